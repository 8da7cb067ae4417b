package actions

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// upcoming is GKE's node.gke.io/upcoming-maintenance for a window starting at 1750000000 (2025-06-15T15:06:40Z).
func upcoming(status string) string {
	return `{"type":"SCHEDULED","maintenance_status":"` + status + `","can_reschedule":"false",` +
		`"window_start_time":"2025-06-15T15:06:40Z","window_end_time":"2025-06-15T19:06:40Z"}`
}

// TestAnnouncedWindowLifecycle: GKE's handler announces the maintenance in the annotation first; the drain is keyed
// on that window. Then GKE's own steps for that same maintenance must neither end the work nor start it again.
func TestAnnouncedWindowLifecycle(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("LabelAddedThenWindowOngoing", func(t *testing.T) { testLabelThenOngoing(t, api) })
	t.Run("WindowOngoing", func(t *testing.T) { testWindowOngoing(t, api) })
}

func drainedAndCordoned(n *corev1.Node) error {
	if err := inState(nodeview.Done)(n); err != nil {
		return err
	}
	if !n.Spec.Unschedulable {
		return fmt.Errorf("not cordoned")
	}
	return nil
}

func announcedNode(c *cluster, pool string) string {
	name := unique("gpu")
	c.node(name, map[string]string{"pool": pool}, func(n *corev1.Node) {
		n.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: upcoming("PENDING")}
	})
	return name
}

// The label for the same instant follows the annotation, then the annotation turns ONGOING as the maintenance
// begins (before the active-node-maintenance label shows): one maintenance, so one drain and our cordon kept.
func testLabelThenOngoing(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("window")
	node := announcedNode(c, pool)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drained for the announced window", drainedAndCordoned)

	c.updateNode(node, "GKE adding the label for the same maintenance", func(n *corev1.Node) {
		n.Labels[gke.LabelScheduledMaintenanceTime] = "1750000000"
	})
	c.updateNode(node, "GKE reporting the maintenance under way", func(n *corev1.Node) {
		n.Annotations[gke.AnnotationUpcomingMaintenance] = upcoming("ONGOING")
	})
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt)) // Alertmanager repeats the still-firing alert
	settle()
	n := c.get(node)
	if !n.Spec.Unschedulable {
		t.Errorf("uncordoned as the maintenance starts (reason %q)", n.Annotations[nodeview.AnnotationReason])
	}
	if k := c.countEvents(node, "DisruptionDrainStarted"); k != 1 {
		t.Errorf("%d drains for one maintenance (events %q)", k, c.events(node))
	}
}

// Only the annotation announces the maintenance; it turns ONGOING before the active-node-maintenance label shows.
func testWindowOngoing(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("ongoing")
	node := announcedNode(c, pool)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drained for the announced window", drainedAndCordoned)

	c.updateNode(node, "GKE reporting the maintenance under way", func(n *corev1.Node) {
		n.Annotations[gke.AnnotationUpcomingMaintenance] = upcoming("ONGOING")
	})
	settle()
	if n := c.get(node); !n.Spec.Unschedulable {
		t.Errorf("uncordoned as the maintenance starts (reason %q)", n.Annotations[nodeview.AnnotationReason])
	}
}
