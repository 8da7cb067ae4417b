// Package webhook receives Alertmanager notifications: it decodes the payload, picks out the alerts that ask for an
// action on a node, hands them on, and answers with a decision per alert. It never acts itself; the alert is a
// trigger and the executor re-reads the node.
package webhook

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Version is the Alertmanager webhook payload version this receiver speaks.
const Version = "4"

// The alert labels the receiver reads.
const (
	LabelAction        = "gke_disruption_action"
	LabelNode          = "node"
	LabelCanReschedule = "can_reschedule"
	LabelReasons       = "reasons"
	// LabelFaultBehavior is the fault to report with report-faulty-host (gke.FaultBehavior; default unspecified).
	LabelFaultBehavior = "fault_behavior"
	// LabelXid is the GPU fault's Xid on GKENodeGPUFailed: its report-faulty-host or drain is a repair keyed on the
	// (node, boot ID, Xid) incident, under the repair guard rails.
	LabelXid = "xid"
)

// Message is Alertmanager's webhook body: the notification data plus the protocol fields.
type Message struct {
	template.Data
	Version         string `json:"version"`
	GroupKey        string `json:"groupKey"`
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// Decode parses a webhook body. Unknown fields are allowed (newer Alertmanagers add some); a body that is not one
// JSON object of version 4 is an error.
func Decode(body []byte) (*Message, error) {
	var msg Message
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("not an Alertmanager webhook payload: %w", err)
	}
	if msg.Version != Version {
		return nil, fmt.Errorf("payload version %q is not supported (want %q)", msg.Version, Version)
	}
	return &msg, nil
}

// Trigger is an alert asking for an action on a node.
type Trigger struct {
	Node   string
	Action nodeview.Action
	// Firing is false for a resolved alert, which withdraws work that has not started.
	Firing bool
	// CanReschedule is the alert's can_reschedule label being "true".
	CanReschedule bool
	// HardwareFailure is the alert's reasons label naming a hardware failure (gke.HardwareFailure).
	HardwareFailure bool
	// FaultBehavior is what report-faulty-host reports (the alert's fault_behavior label).
	FaultBehavior gke.FaultBehavior
	// Xid is the GPU fault the alert reports (its xid label, a decimal number), or "" when it reports none.
	Xid string
	// StartsAt identifies the alert episode: Alertmanager repeats keep it, a new occurrence moves it forward.
	StartsAt    time.Time
	Fingerprint string
}

// Decision values in replies.
const (
	Accepted = "accepted"
	Skipped  = "skipped"
)

// Result is the reply for one alert.
type Result struct {
	Fingerprint string `json:"fingerprint,omitempty"`
	Alertname   string `json:"alertname,omitempty"`
	Node        string `json:"node,omitempty"`
	Action      string `json:"action,omitempty"`
	Decision    string `json:"decision"`
	Reason      string `json:"reason,omitempty"`
}

// Classify turns one alert into its reply and, when the alert names a node and an action, a trigger to pass on. A
// resolved alert is both skipped in the reply and passed on, so waiting work for it is withdrawn.
func Classify(a template.Alert) (trigger Trigger, pass bool, res Result) {
	res = Result{Fingerprint: a.Fingerprint, Alertname: a.Labels["alertname"], Node: a.Labels[LabelNode], Action: a.Labels[LabelAction]}
	skip := func(format string, args ...any) (Trigger, bool, Result) {
		res.Decision, res.Reason = Skipped, fmt.Sprintf(format, args...)
		return Trigger{}, false, res
	}
	actionLabel, ok := a.Labels[LabelAction]
	if !ok {
		return skip("no %s label", LabelAction)
	}
	action, ok := nodeview.ParseAction(actionLabel)
	if !ok {
		return skip("%s %q is not an action (perform-maintenance, drain, report-faulty-host)", LabelAction, actionLabel)
	}
	var behavior gke.FaultBehavior
	if action == nodeview.ReportFaultyHost {
		if behavior, ok = gke.ParseFaultBehavior(a.Labels[LabelFaultBehavior]); !ok {
			return skip("%s %q is not a fault behavior (PERFORMANCE, SDC, XID, unspecified)", LabelFaultBehavior, a.Labels[LabelFaultBehavior])
		}
	}
	xid := a.Labels[LabelXid]
	if xid != "" {
		n, err := strconv.ParseUint(xid, 10, 32)
		if err != nil {
			return skip("%s %q is not an Xid (a decimal number)", LabelXid, xid)
		}
		xid = strconv.FormatUint(n, 10) // one spelling per Xid: the incident is keyed on it
	}
	node := a.Labels[LabelNode]
	if node == "" {
		return skip("no %s label", LabelNode)
	}
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return skip("%s label %q is not a node name", LabelNode, node)
	}
	trigger = Trigger{
		Node:            node,
		Action:          action,
		CanReschedule:   a.Labels[LabelCanReschedule] == "true",
		HardwareFailure: gke.HardwareFailure(strings.Split(a.Labels[LabelReasons], ",")),
		FaultBehavior:   behavior,
		Xid:             xid,
		StartsAt:        a.StartsAt,
		Fingerprint:     a.Fingerprint,
	}
	switch a.Status {
	case "firing":
		trigger.Firing = true
		res.Decision = Accepted
		return trigger, true, res
	case "resolved":
		res.Decision, res.Reason = Skipped, "alert is resolved; work not yet started for it is withdrawn"
		return trigger, true, res
	}
	return skip("status %q is neither firing nor resolved", a.Status)
}
