package nodeview

import (
	"encoding/json"
	"time"
)

// AnnotationReportRequest holds a faulty-host report the actions service has taken and not yet claimed (it waits
// for the repair budget, say), as JSON (ReportRequest). A request from report-faulty is sent once, not repeated like
// an alert, so the service keeps it on the node, where the next leader finds it. It is removed when the report is
// claimed, refused or withdrawn.
const AnnotationReportRequest = Prefix + "report-request"

// ReportRequest is a faulty-host report taken and not yet claimed.
type ReportRequest struct {
	// StartsAt identifies the incident (IncidentKey): the alert's startsAt, or the time of report-faulty's request.
	StartsAt      time.Time `json:"startsAt"`
	FaultBehavior string    `json:"faultBehavior"`
	// Owner is the instance that took the request (its Lease, namespace/name): only it resumes the request while
	// its Lease is held.
	Owner string `json:"owner,omitempty"`
	// ReceivedAt is when the request was taken; a request waits at most the service's pending TTL from then.
	ReceivedAt time.Time `json:"receivedAt"`
}

// ReadReportRequest reads the node's pending faulty-host request; an unreadable one reads as none.
func ReadReportRequest(a map[string]string) (ReportRequest, bool) {
	v, ok := a[AnnotationReportRequest]
	if !ok {
		return ReportRequest{}, false
	}
	var r ReportRequest
	if err := json.Unmarshal([]byte(v), &r); err != nil || r.StartsAt.IsZero() {
		return ReportRequest{}, false
	}
	return r, true
}

// Incident is the request's incident key.
func (r ReportRequest) Incident() string { return IncidentKey(r.StartsAt) }

// Encode is the annotation's value.
func (r ReportRequest) Encode() string {
	b, _ := json.Marshal(r) // a struct of strings and times always marshals
	return string(b)
}
