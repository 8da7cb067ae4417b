package nodeview

import (
	"strings"
	"time"
)

// Prefix is the project-owned annotation prefix.
const Prefix = "gke-disruption-exporter.io/"

// The service's annotations on a Node.
const (
	// AnnotationAction is the action the node was claimed for.
	AnnotationAction = Prefix + "action"
	// AnnotationState is the progress of that action (see Phase).
	AnnotationState = Prefix + "state"
	// AnnotationReason says why the work ended the way it did (failed, abandoned, not requested).
	AnnotationReason = Prefix + "reason"
	// AnnotationClaimedBy is the replica that claimed the node.
	AnnotationClaimedBy = Prefix + "claimed-by"
	// AnnotationOwner is the instance that owns the work: its Lease, as namespace/name. Only that instance acts on
	// the work, unless its Lease has expired (the instance is gone).
	AnnotationOwner = Prefix + "owner"
	// AnnotationAcceptedAt is when the node was claimed (RFC 3339).
	AnnotationAcceptedAt = Prefix + "accepted-at"
	// AnnotationDrainStartedAt is when the drain began; the drain timeout counts from here across restarts.
	AnnotationDrainStartedAt = Prefix + "drain-started-at"
	// AnnotationMaintenance identifies the maintenance the work serves (see Maintenance.Key). Work is keyed on it,
	// never on an alert: a repeat of any alert for this maintenance is the same work, and a maintenance that moved
	// is new work.
	AnnotationMaintenance = Prefix + "maintenance"
	// AnnotationGroup lists the nodes claimed together as one operation (a parallel pool or a multi-host TPU slice),
	// comma-separated; a leader that finds a member unclaimed claims it before any member proceeds.
	AnnotationGroup = Prefix + "group"
	// AnnotationCordonedBy is set only when this service cordoned the node (to the replica's identity), so only
	// its own cordons are ever lifted.
	AnnotationCordonedBy = Prefix + "cordoned-by"
	// AnnotationMaintenanceSeen records that GKE maintenance was observed on the node after the claim.
	AnnotationMaintenanceSeen = Prefix + "maintenance-seen"
	// AnnotationRequestedAt is when perform-maintenance was requested; performMaintenance.startDeadline counts from
	// here.
	AnnotationRequestedAt = Prefix + "requested-at"
	// AnnotationFinishedAt is when the action reached done or failed.
	AnnotationFinishedAt = Prefix + "finished-at"
	// AnnotationOpportunistic marks perform-maintenance requested by the opportunistic loop rather than an alert.
	AnnotationOpportunistic = Prefix + "opportunistic"
	// AnnotationIncident identifies the incident a faulty-host report serves (IncidentKey). Claims of other actions
	// leave it, so the same incident is never reported twice whatever work comes after.
	AnnotationIncident = Prefix + "incident"
	// AnnotationFaultBehavior is the fault behavior to report (gke.FaultBehavior), from the claim to the label.
	AnnotationFaultBehavior = Prefix + "fault-behavior"
	// AnnotationReportStatus is GKE's last report-and-replace status this service has recorded (and evented).
	AnnotationReportStatus = Prefix + "report-status"
	// AnnotationUpgradeSince is when the node began to wait for its pool's upgrade (UpgradePending);
	// upgrade.deadline counts from here.
	AnnotationUpgradeSince = Prefix + "upgrade-since"

	// legacyScheduledMaintenance is where earlier releases recorded the maintenance (the label's value).
	legacyScheduledMaintenance = Prefix + "scheduled-maintenance-time"
)

// Action is what an alert asks for.
type Action string

const (
	// PerformMaintenance asks GKE to start the scheduled maintenance now (label perform-maintenance=true).
	PerformMaintenance Action = "perform-maintenance"
	// Drain cordons the node and evicts its pods ahead of maintenance that cannot be rescheduled.
	Drain Action = "drain"
	// OpportunisticMaintenance is perform-maintenance started by the service itself on an idle node.
	OpportunisticMaintenance Action = "opportunistic-maintenance"
	// ReportFaultyHost asks GKE to report the node's host as faulty and replace it (label fault-behavior); GKE
	// evicts the pods itself.
	ReportFaultyHost Action = "report-faulty-host"
)

// ParseAction returns the action an alert may name, or false.
func ParseAction(s string) (Action, bool) {
	switch Action(s) {
	case PerformMaintenance, Drain, ReportFaultyHost:
		return Action(s), true
	}
	return "", false
}

// Requests reports whether the action ends with the perform-maintenance label.
func (a Action) Requests() bool { return a == PerformMaintenance || a == OpportunisticMaintenance }

// Phase is the progress of an action on a node.
type Phase string

const (
	// Accepted: claimed; nothing changed on the node yet.
	Accepted Phase = "accepted"
	// Draining: cordoned (by us or already), evicting pods.
	Draining Phase = "draining"
	// MaintenanceRequested: label perform-maintenance=true set; waiting for GKE to finish.
	MaintenanceRequested Phase = "maintenance-requested"
	// Done: the action finished (or ended because its maintenance moved or vanished). A cordon of ours
	// (AnnotationCordonedBy) stays until GKE has finished, or the maintenance moved or vanished.
	Done Phase = "done"
	// HostReported: label fault-behavior set; GKE evicts, reports the host and replaces it, showing its progress in
	// report-and-replace-status.
	HostReported Phase = "host-reported"
	// UpgradePending: GKE finished the host maintenance; our cordon stays while the group's maintenance finishes
	// and the pool's upgrade is asked for (upgrade: {withMaintenance: true}), so the pods land on upgraded nodes.
	UpgradePending Phase = "upgrade-pending"
	// UpgradeRequested: GKE upgrades the node's pool; our cordon stays until its operation is done.
	UpgradeRequested Phase = "upgrade-requested"
	// Failed: the action gave up; AnnotationReason says why. A cordon of ours stays only while maintenance that
	// cannot be moved is still pending on the node (pods placed there would be killed anyway).
	Failed Phase = "failed"
)

// Record is the service's annotations on one node.
type Record struct {
	Action          Action
	Phase           Phase
	Reason          string
	ClaimedBy       string
	Owner           string
	CordonedBy      string
	Maintenance     string
	Group           []string
	MaintenanceSeen bool
	Opportunistic   bool
	// Incident, FaultBehavior and ReportStatus belong to faulty-host reports: the incident last reported, the
	// behavior to report, and GKE's status last recorded.
	Incident      string
	FaultBehavior string
	ReportStatus  string
	// Request is a faulty-host report taken and not yet claimed (AnnotationReportRequest); nil when none.
	Request        *ReportRequest
	AcceptedAt     time.Time
	DrainStartedAt time.Time
	RequestedAt    time.Time
	FinishedAt     time.Time
	UpgradeSince   time.Time
}

// ReadRecord reads the service's annotations; unreadable times read as zero. The annotations are the service's only
// memory, so Alertmanager repeats, restarts and a change of leader never act twice and interrupted work resumes.
func ReadRecord(a map[string]string) Record {
	r := Record{
		Action:          Action(a[AnnotationAction]),
		Phase:           Phase(a[AnnotationState]),
		Reason:          a[AnnotationReason],
		ClaimedBy:       a[AnnotationClaimedBy],
		Owner:           a[AnnotationOwner],
		CordonedBy:      a[AnnotationCordonedBy],
		Maintenance:     a[AnnotationMaintenance],
		MaintenanceSeen: a[AnnotationMaintenanceSeen] == "true",
		Opportunistic:   a[AnnotationOpportunistic] == "true",
		Incident:        a[AnnotationIncident],
		FaultBehavior:   a[AnnotationFaultBehavior],
		ReportStatus:    a[AnnotationReportStatus],
		AcceptedAt:      parseTime(a[AnnotationAcceptedAt]),
		DrainStartedAt:  parseTime(a[AnnotationDrainStartedAt]),
		RequestedAt:     parseTime(a[AnnotationRequestedAt]),
		FinishedAt:      parseTime(a[AnnotationFinishedAt]),
		UpgradeSince:    parseTime(a[AnnotationUpgradeSince]),
	}
	if r.Maintenance == "" && a[legacyScheduledMaintenance] != "" {
		r.Maintenance = LabelKey(a[legacyScheduledMaintenance])
	}
	if req, ok := ReadReportRequest(a); ok {
		r.Request = &req
	}
	if g := a[AnnotationGroup]; g != "" {
		r.Group = strings.Split(g, ",")
	}
	return r
}

// Active reports work in progress: claimed and not yet done or failed.
func (r Record) Active() bool { return r.Phase.Active() }

// FaultDrain reports a drain for a GPU fault (GKENodeGPUFailed on a machine type GKE cannot replace): keyed on
// the fault's incident, not on a maintenance, it holds the node until the node boots anew.
func (r Record) FaultDrain() bool {
	_, _, gpu := ParseGPUIncident(r.Incident)
	return r.Action == Drain && r.Maintenance == "" && gpu
}

// HoldsCordon reports a finished record whose cordon of ours is still on the node.
func (r Record) HoldsCordon() bool {
	return (r.Phase == Done || r.Phase == Failed) && r.CordonedBy != ""
}

// WaitsForUpgrade reports work whose maintenance is done and that waits for its pool's upgrade.
func (p Phase) WaitsForUpgrade() bool { return p == UpgradePending || p == UpgradeRequested }

// Active reports a phase of work in progress.
func (p Phase) Active() bool {
	switch p {
	case Accepted, Draining, MaintenanceRequested, HostReported, UpgradePending, UpgradeRequested:
		return true
	}
	return false
}

// IncidentKey identifies an incident a faulty-host report serves: the alert's startsAt (Alertmanager's repeats keep
// it), or for a request made by hand the time it was made.
func IncidentKey(at time.Time) string { return "incident/" + FormatTime(at) }

// GPUIncidentKey identifies a GPU fault: the node's boot and the Xid. Repeats of the alert, a gauge that stays at the
// Xid after a repair, a restart or a new leader all give the same key for the same boot, and a repair (a new boot)
// ends the incident.
func GPUIncidentKey(bootID, xid string) string { return "gpu/" + bootID + "/xid/" + xid }

// ParseGPUIncident reads a GPUIncidentKey; ok is false for any other key.
func ParseGPUIncident(key string) (bootID, xid string, ok bool) {
	rest, ok := strings.CutPrefix(key, "gpu/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/xid/")
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("/xid/"):], true
}

// FormatTime is the annotations' time format, with fractions of a second.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// OwnAnnotation reports whether an annotation key is one of this service's.
func OwnAnnotation(key string) bool { return strings.HasPrefix(key, Prefix) }
