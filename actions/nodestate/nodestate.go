// Package nodestate reads what GKE and this service have written on a Node: GKE's maintenance labels and taint,
// readiness, and the service's own progress annotations. The annotations are the service's only memory, so
// Alertmanager repeats, restarts and a change of leader never act twice and interrupted work resumes.
package nodestate

import (
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	corev1 "k8s.io/api/core/v1"
)

// Prefix is the project-owned annotation prefix.
const Prefix = "gke-disruption-exporter.io/"

// The service's annotations on a Node.
const (
	// AnnotationAction is the action the node was claimed for.
	AnnotationAction = Prefix + "action"
	// AnnotationState is the progress of that action (see Phase).
	AnnotationState = Prefix + "state"
	// AnnotationReason says why the action failed.
	AnnotationReason = Prefix + "reason"
	// AnnotationClaimedBy is the replica that claimed the node.
	AnnotationClaimedBy = Prefix + "claimed-by"
	// AnnotationAcceptedAt is when the node was claimed (RFC 3339).
	AnnotationAcceptedAt = Prefix + "accepted-at"
	// AnnotationDrainStartedAt is when the drain began; the drain timeout counts from here across restarts.
	AnnotationDrainStartedAt = Prefix + "drain-started-at"
	// AnnotationTriggerStartsAt is the startsAt of the alert that triggered the action: a repeat of that alert
	// (same or earlier startsAt) is the same episode and is never acted on again.
	AnnotationTriggerStartsAt = Prefix + "trigger-starts-at"
	// AnnotationCordonedBy is set only when this service cordoned the node (to the replica's identity), so only
	// its own cordons are ever lifted.
	AnnotationCordonedBy = Prefix + "cordoned-by"
	// AnnotationScheduledMaintenance is GKE's scheduled-maintenance-time label value when the node was claimed;
	// the label vanishing or changing afterwards shows that maintenance happened.
	AnnotationScheduledMaintenance = Prefix + "scheduled-maintenance-time"
	// AnnotationMaintenanceSeen records that GKE maintenance was observed on the node after the claim.
	AnnotationMaintenanceSeen = Prefix + "maintenance-seen"
	// AnnotationFinishedAt is when the action reached done or failed.
	AnnotationFinishedAt = Prefix + "finished-at"
)

// Action is what an alert asks for.
type Action string

const (
	// PerformMaintenance asks GKE to start the scheduled maintenance now (label perform-maintenance=true).
	PerformMaintenance Action = "perform-maintenance"
	// Drain cordons the node and evicts its pods ahead of maintenance that cannot be rescheduled.
	Drain Action = "drain"
)

// ParseAction returns the action named s, or false.
func ParseAction(s string) (Action, bool) {
	switch Action(s) {
	case PerformMaintenance, Drain:
		return Action(s), true
	}
	return "", false
}

// Phase is the progress of an action on a node.
type Phase string

const (
	// Accepted: claimed; nothing changed on the node yet.
	Accepted Phase = "accepted"
	// Draining: cordoned (by us or already), evicting pods.
	Draining Phase = "draining"
	// MaintenanceRequested: label perform-maintenance=true set; waiting for GKE to finish.
	MaintenanceRequested Phase = "maintenance-requested"
	// Done: the action finished. A cordon of ours (AnnotationCordonedBy) stays until GKE has finished.
	Done Phase = "done"
	// Failed: the action gave up; AnnotationReason says why. Any cordon of ours has been lifted.
	Failed Phase = "failed"
)

// Record is the service's annotations on one node.
type Record struct {
	Action               Action
	Phase                Phase
	Reason               string
	ClaimedBy            string
	CordonedBy           string
	ScheduledMaintenance string
	MaintenanceSeen      bool
	AcceptedAt           time.Time
	DrainStartedAt       time.Time
	TriggerStartsAt      time.Time
}

// Read returns the node's record; unreadable times read as zero.
func Read(node *corev1.Node) Record {
	a := node.Annotations
	return Record{
		Action:               Action(a[AnnotationAction]),
		Phase:                Phase(a[AnnotationState]),
		Reason:               a[AnnotationReason],
		ClaimedBy:            a[AnnotationClaimedBy],
		CordonedBy:           a[AnnotationCordonedBy],
		ScheduledMaintenance: a[AnnotationScheduledMaintenance],
		MaintenanceSeen:      a[AnnotationMaintenanceSeen] == "true",
		AcceptedAt:           parseTime(a[AnnotationAcceptedAt]),
		DrainStartedAt:       parseTime(a[AnnotationDrainStartedAt]),
		TriggerStartsAt:      parseTime(a[AnnotationTriggerStartsAt]),
	}
}

// Active reports work in progress: claimed and not yet done or failed.
func (r Record) Active() bool { return r.Phase.Active() }

// Active reports a phase of work in progress.
func (p Phase) Active() bool {
	switch p {
	case Accepted, Draining, MaintenanceRequested:
		return true
	}
	return false
}

// FormatTime is the annotations' time format. It keeps fractions of a second: an alert's startsAt has them, and a
// repeat of the alert must compare equal to the startsAt recorded from it.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// InMaintenance reports GKE maintenance under way: label active-node-maintenance or the impending-termination taint.
func InMaintenance(node *corev1.Node) bool {
	if _, ok := node.Labels[gke.LabelActiveNodeMaintenance]; ok {
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

// ScheduledMaintenance returns GKE's scheduled-maintenance-time label value, if any.
func ScheduledMaintenance(node *corev1.Node) (string, bool) {
	v, ok := node.Labels[gke.LabelScheduledMaintenanceTime]
	return v, ok
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
var Labels = []string{gke.LabelActiveNodeMaintenance, gke.LabelPerformMaintenance, gke.LabelScheduledMaintenanceTime}

// OwnAnnotation reports whether an annotation key is one of this service's.
func OwnAnnotation(key string) bool { return strings.HasPrefix(key, Prefix) }

// Disrupted reports a node that counts against disruption budgets: cordoned, in GKE maintenance, perform-maintenance
// requested, not Ready, or being acted on by this service.
func Disrupted(node *corev1.Node) bool {
	return node.Spec.Unschedulable || InMaintenance(node) || PerformMaintenanceRequested(node) || !Ready(node) ||
		Phase(node.Annotations[AnnotationState]).Active()
}
