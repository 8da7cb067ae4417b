package nodestate

import (
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Work keyed on the announced window (the annotation came before the label, as GKE's handler writes it) must still
// serve the same maintenance once only the scheduled-maintenance-time label, at the same instant, announces it (the
// annotation removed or no longer PENDING). Serves already accepts the reverse (keyed on the label, only the window
// left); without this direction the lifecycle calls the maintenance "moved", lifts our cordon, and the still-firing
// alert drains the node a second time for the same maintenance.
func TestServesWindowKeyWhenOnlyTheLabelIsLeft(t *testing.T) {
	start := time.Date(2025, 12, 5, 10, 0, 0, 0, time.UTC)
	windowKey := nodeview.Maintenance{WindowStart: start}.Key()
	labelOnly := nodeview.Maintenance{Label: "1764928800"} // the same instant in epoch seconds
	if !labelOnly.Start().Equal(start) {
		t.Fatalf("fixture: label start %v, window %v", labelOnly.Start(), start)
	}
	if !labelOnly.Serves(windowKey) {
		t.Errorf("work keyed %s does not serve the maintenance announced only by label %s for the same instant", windowKey, labelOnly.Label)
	}

	// The same through the lifecycle: drained with our cordon, GKE then drops the annotation and keeps the label.
	node := nodeWith(map[string]string{gke.LabelScheduledMaintenanceTime: "1764928800"}, nil)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	r := nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Done, CordonedBy: "us", Maintenance: windowKey}
	if step, why := Next(r, Observe(nodeview.Of(node)), false); step != StepNone {
		t.Errorf("drained for %s, the same maintenance now announced by label only: Next = %s (%q), want %s", windowKey, step, why, StepNone)
	}
	if !Serves(r, Observe(nodeview.Of(node)).Maintenance) {
		t.Error("a repeat of the alert would act again for the same maintenance")
	}
}
