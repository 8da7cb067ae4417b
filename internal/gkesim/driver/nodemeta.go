package driver

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What GKE writes on a node about its maintenance, beyond the labels in objects.go. The window-started taint, the
// passthrough state and the annotation are seen in the field rather than documented.
const (
	AnnotationUpcomingMaintenance = "node.gke.io/upcoming-maintenance"
	TaintMaintenanceWindowStarted = "cloud.google.com/maintenance-window-started"
	maintenancePassthrough        = "passthrough"
)

// nodeMeta is what GKE shows on a node about its maintenance.
type nodeMeta struct {
	scheduled string // label scheduled-maintenance-time
	state     string // label active-node-maintenance
	upcoming  string // annotation upcoming-maintenance, the same JSON as the metadata server's
	// terminating is the impending-node-termination taint (NoSchedule), windowStarted the
	// maintenance-window-started one (PreferNoSchedule).
	terminating, windowStarted bool
}

// desiredNodeMeta is what GKE shows while maintenance is pending or running: the scheduled time and GKE's
// maintenance handler's annotation from the announcement; after perform-maintenance the passthrough state; the
// window-started taint from the start; ONGOING, then terminating, with the termination taint while pods are
// stopped and the VM is down. In the field sequence passthrough and the window-started taint come at their times
// and stay through the repair, without the termination taint. Nothing once it is done.
func desiredNodeMeta(sn *simNode) nodeMeta {
	m := sn.maintenance
	if m == nil {
		return nodeMeta{}
	}
	announced := m.announced
	want := nodeMeta{scheduled: strconv.FormatInt(m.windowStart.Unix(), 10)}
	switch m.phase {
	case phaseStarting:
		if m.requested {
			want.state = maintenancePassthrough
		}
		want.windowStarted = true
	case phaseWorkloadEviction, phaseSystemEviction:
		want.state, want.terminating, want.windowStarted = maintenanceOngoing, true, true
		announced.Status = "ONGOING"
	case phaseHostDown:
		if m.field {
			want.state, want.windowStarted = maintenancePassthrough, true
			break
		}
		want.state, want.terminating, want.windowStarted = maintenanceTerminating, true, true
		announced.Status = "ONGOING"
	case phaseDrainWindow:
		if m.passthrough {
			want.state = maintenancePassthrough
		}
		want.windowStarted = m.windowStartedTaint
	}
	want.upcoming = announced.JSON()
	return want
}

func currentNodeMeta(n *corev1.Node) nodeMeta {
	return nodeMeta{
		scheduled:     n.Labels[LabelScheduledMaintenance],
		state:         n.Labels[LabelActiveMaintenance],
		upcoming:      n.Annotations[AnnotationUpcomingMaintenance],
		terminating:   hasTaint(n, TaintImpendingTermination),
		windowStarted: hasTaint(n, TaintMaintenanceWindowStarted),
	}
}

func nodeMetaDiffers(n *corev1.Node, sn *simNode) bool {
	return currentNodeMeta(n) != desiredNodeMeta(sn) || (sn.clearPerformMaintenance && n.Labels[LabelPerformMaintenance] != "")
}

// applyNodeMeta changes n to the desired labels, annotation and taints and tells whether anything changed.
func applyNodeMeta(n *corev1.Node, sn *simNode) bool {
	if !nodeMetaDiffers(n, sn) {
		return false
	}
	want := desiredNodeMeta(sn)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	setLabel(n.Labels, LabelScheduledMaintenance, want.scheduled)
	setLabel(n.Labels, LabelActiveMaintenance, want.state)
	setLabel(n.Annotations, AnnotationUpcomingMaintenance, want.upcoming)
	if sn.clearPerformMaintenance {
		delete(n.Labels, LabelPerformMaintenance)
	}
	setTaint(n, TaintImpendingTermination, corev1.TaintEffectNoSchedule, want.terminating)
	setTaint(n, TaintMaintenanceWindowStarted, corev1.TaintEffectPreferNoSchedule, want.windowStarted)
	return true
}

// setTaint adds the taint key (with effect) when on and it is missing, and removes it when off.
func setTaint(n *corev1.Node, key string, effect corev1.TaintEffect, on bool) {
	if on == hasTaint(n, key) {
		return
	}
	if on {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect, TimeAdded: ptrTo(metav1.Now())})
		return
	}
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != key {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func hasTerminationTaint(n *corev1.Node) bool { return hasTaint(n, TaintImpendingTermination) }
