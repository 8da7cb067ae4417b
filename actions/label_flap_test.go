package actions

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestLabelFlapDuringDrain: the scheduled-maintenance-time label disappears for a moment mid-drain and comes back
// with the same value. The drain is abandoned (cordon lifted: right while nothing is announced), but the maintenance
// it was for is still coming and was never drained for: the still-firing alert must act for it. Instead the
// abandoned record "serves" that maintenance, so every repeat is silently a no-op and the node meets its unmovable
// maintenance undrained and uncordoned.
func TestLabelFlapDuringDrain(t *testing.T) {
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	c := newCluster(t, api)
	pool := unique("flap")
	ns := api.Namespace("flap")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "slow", node, grace(30))
	kl.setPaused(true)
	r := startReplica(t, api, strings.Replace(poolPolicy(pool, ""), "timeout: 20s", "timeout: 1m", 1), replicaOpts{})
	r.waitLeading()
	a := alert(node, nodeview.Drain, false, startsAt)
	mustAccept(t, r, a)
	waitTerminating(t, api, ns, "slow")

	c.updateNode(node, "the label disappearing", func(n *corev1.Node) { delete(n.Labels, gke.LabelScheduledMaintenanceTime) })
	c.waitNode(node, "drain abandoned", inState(nodeview.Done))
	c.updateNode(node, "the same label back", withScheduledMaintenance)
	kl.setPaused(false)
	mustAccept(t, r, a) // Alertmanager repeats the still-firing alert
	c.waitNode(node, "drained for the maintenance still coming", func(n *corev1.Node) error {
		if err := drainedAndCordoned(n); err != nil {
			return err
		}
		if nodeview.Of(n).Record.Reason != "" {
			return fmt.Errorf("still the abandoned record: %q", nodeview.Of(n).Record.Reason)
		}
		return nil
	})
}
