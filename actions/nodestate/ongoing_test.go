package nodestate

import (
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// When GKE's maintenance handler reports the announced window as ONGOING, the maintenance the work served has
// started, not vanished. Until the active-node-maintenance label or the impending-termination taint shows, the
// lifecycle must not read it as "no longer announced": that lifts our cordon (or withdraws our request) just as the
// maintenance begins, so pods are scheduled onto a node about to stop.
func TestNextWindowOngoingIsNotVanished(t *testing.T) {
	const window = "2025-12-05T10:00:00Z"
	announced := func(status string) *corev1.Node {
		n := nodeWith(map[string]string{}, map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED","maintenance_status":"` +
			status + `","can_reschedule":"false","window_start_time":"` + window + `","window_end_time":"2025-12-05T14:00:00Z"}`})
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	key := nodeview.Of(announced("PENDING")).Maintenance.Key()
	if key == "" {
		t.Fatal("the PENDING window announces no maintenance")
	}
	ongoing := announced("ONGOING")
	requested := announced("ONGOING")
	requested.Labels[gke.LabelPerformMaintenance] = "true"

	for _, tc := range []struct {
		name string
		r    nodeview.Record
		node *corev1.Node
	}{
		{"drained, our cordon held", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Done, CordonedBy: "us", Maintenance: key}, ongoing},
		{"draining", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Draining, CordonedBy: "us", Maintenance: key}, ongoing},
		{"failed drain, cordon kept for unmovable maintenance", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Failed, CordonedBy: "us", Maintenance: key}, ongoing},
		{"perform-maintenance requested", nodeview.Record{Action: nodeview.PerformMaintenance, Phase: nodeview.MaintenanceRequested, Maintenance: key}, requested},
	} {
		step, why := Next(tc.r, Observe(nodeview.Of(tc.node)), false)
		if step == StepFinish || step == StepAbandon {
			t.Errorf("%s: GKE reports maintenance %s ONGOING: Next = %s (%q); the work's maintenance has started, it must not end as if it vanished",
				tc.name, key, step, why)
		}
	}
}

func nodeWith(labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
}
