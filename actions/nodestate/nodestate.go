// Package nodestate reads what GKE and this service have written on a Node: GKE's maintenance labels, taint and
// annotation, readiness, and the service's own progress annotations. The annotations are the service's only memory,
// so Alertmanager repeats, restarts and a change of leader never act twice and interrupted work resumes.
package nodestate

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
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
	// AnnotationFinishedAt is when the action reached done or failed.
	AnnotationFinishedAt = Prefix + "finished-at"
	// AnnotationOpportunistic marks perform-maintenance requested by the opportunistic loop rather than an alert.
	AnnotationOpportunistic = Prefix + "opportunistic"

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
)

// ParseAction returns the action an alert may name, or false.
func ParseAction(s string) (Action, bool) {
	switch Action(s) {
	case PerformMaintenance, Drain:
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
	CordonedBy      string
	Maintenance     string
	Group           []string
	MaintenanceSeen bool
	Opportunistic   bool
	AcceptedAt      time.Time
	DrainStartedAt  time.Time
	FinishedAt      time.Time
}

// Read returns the node's record; unreadable times read as zero.
func Read(node *corev1.Node) Record {
	a := node.Annotations
	r := Record{
		Action:          Action(a[AnnotationAction]),
		Phase:           Phase(a[AnnotationState]),
		Reason:          a[AnnotationReason],
		ClaimedBy:       a[AnnotationClaimedBy],
		CordonedBy:      a[AnnotationCordonedBy],
		Maintenance:     a[AnnotationMaintenance],
		MaintenanceSeen: a[AnnotationMaintenanceSeen] == "true",
		Opportunistic:   a[AnnotationOpportunistic] == "true",
		AcceptedAt:      parseTime(a[AnnotationAcceptedAt]),
		DrainStartedAt:  parseTime(a[AnnotationDrainStartedAt]),
		FinishedAt:      parseTime(a[AnnotationFinishedAt]),
	}
	if r.Maintenance == "" && a[legacyScheduledMaintenance] != "" {
		r.Maintenance = LabelKey(a[legacyScheduledMaintenance])
	}
	if g := a[AnnotationGroup]; g != "" {
		r.Group = strings.Split(g, ",")
	}
	return r
}

// Active reports work in progress: claimed and not yet done or failed.
func (r Record) Active() bool { return r.Phase.Active() }

// HoldsCordon reports a finished record whose cordon of ours is still on the node.
func (r Record) HoldsCordon() bool {
	return (r.Phase == Done || r.Phase == Failed) && r.CordonedBy != ""
}

// Active reports a phase of work in progress.
func (p Phase) Active() bool {
	switch p {
	case Accepted, Draining, MaintenanceRequested:
		return true
	}
	return false
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

// InMaintenance reports GKE maintenance under way: label active-node-maintenance (any value: ONGOING, terminating,
// passthrough, …), the impending-termination taint, or GKE's upcoming-maintenance annotation saying ONGOING.
func InMaintenance(node *corev1.Node) bool {
	if v := node.Labels[gke.LabelActiveNodeMaintenance]; v != "" || announcedOngoing(node) {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == gke.TaintImpendingTermination {
			return true
		}
	}
	return false
}

// PerformMaintenanceRequested reports label perform-maintenance=true.
func PerformMaintenanceRequested(node *corev1.Node) bool {
	return node.Labels[gke.LabelPerformMaintenance] == "true"
}

// Ready reports the Ready condition True.
func Ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Labels are the GKE node labels this package reads.
var Labels = []string{gke.LabelActiveNodeMaintenance, gke.LabelPerformMaintenance, gke.LabelScheduledMaintenanceTime,
	gke.LabelNodePool, gke.LabelInstanceType, gke.LabelTPUTopology, gke.LabelOpportunisticDisable}

// Annotations are the node annotations of GKE and of the other hands (OtherOwner) this package reads.
var Annotations = []string{gke.AnnotationUpcomingMaintenance, gke.AnnotationOpportunisticConfig, AnnotationNVSentinelQuarantine}

// OwnAnnotation reports whether an annotation key is one of this service's.
func OwnAnnotation(key string) bool { return strings.HasPrefix(key, Prefix) }

// Disrupted reports a node that counts against disruption budgets: cordoned, in GKE maintenance, perform-maintenance
// requested, not Ready, or being acted on by this service.
func Disrupted(node *corev1.Node) bool {
	return node.Spec.Unschedulable || InMaintenance(node) || PerformMaintenanceRequested(node) || !Ready(node) ||
		Phase(node.Annotations[AnnotationState]).Active()
}

// Reserved reports the members of groups claimed half-way, not claimed yet: the room their group reserved counts
// against budgets until the group is complete.
func Reserved(all []*corev1.Node) func(*corev1.Node) bool {
	reserved := map[string]bool{}
	for _, n := range all {
		if r := Read(n); r.Phase == Accepted {
			for _, member := range r.Group {
				reserved[member] = true
			}
		}
	}
	return func(n *corev1.Node) bool { return reserved[n.Name] }
}
