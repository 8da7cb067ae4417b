package actions

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// slowDrainPolicy gives drains room to outlive restarts.
func slowDrainPolicy(pool string) string {
	return strings.Replace(poolPolicy(pool, ""), "timeout: 20s", "timeout: 3m", 1)
}

// waitTerminating waits until the pod has been evicted (deletion timestamp set) but not yet removed.
func waitTerminating(t *testing.T, api *testenv.APIServer, ns, pod string) {
	t.Helper()
	testenv.Eventually(t, waitLong, "pod "+pod+" evicted", func() error {
		p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("not terminating yet")
		}
		return nil
	})
}

// TestDrainSurvivesAPIServerRestart stops the API server while a drain waits for a pod to terminate: the drain is
// interrupted while it is away (the replica also loses its Lease) and completes once it is back, without starting
// the action again.
func TestDrainSurvivesAPIServerRestart(t *testing.T) {
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	kl.setPaused(true)
	c := newCluster(t, api)
	pool := unique("restart")
	ns := api.Namespace("restart")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "slow", node, grace(30))
	r := startReplica(t, api, slowDrainPolicy(pool), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	waitTerminating(t, api, ns, "slow")
	c.waitNode(node, "draining", inState(nodeview.Draining))

	api.StopAPIServer()
	api.StartAgain()
	kl.setPaused(false)

	n := c.waitNode(node, "drain finished after the API server came back", inState(nodeview.Done))
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != r.identity {
		t.Errorf("node should stay cordoned by us: %v %v", n.Spec.Unschedulable, n.Annotations)
	}
	r.waitMetric("one success", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "succeeded"}, 1)
	c.waitEvent(node, "DisruptionDrainSucceeded")
	if got := c.countEvents(node, "DisruptionDrainStarted"); got != 1 {
		t.Errorf("drain started %d times: %q", got, c.events(node))
	}
}

// testResumeAfterRestart stops the replica mid-drain and starts a new one (another identity, as a new pod would
// have): it finds the unfinished drain on the node and completes it; the cordon stays recorded as the first
// replica's and is still lifted after maintenance.
func testResumeAfterRestart(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("resume")
	ns := api.Namespace("resume")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "slow", node, grace(30))
	kl.setPaused(true)
	defer kl.setPaused(false)
	first := startReplica(t, api, slowDrainPolicy(pool), replicaOpts{})
	first.waitLeading()
	mustAccept(t, first, alert(node, nodeview.Drain, false, startsAt))
	waitTerminating(t, api, ns, "slow")
	c.waitNode(node, "draining", inState(nodeview.Draining))
	first.stop()

	second := startReplica(t, api, slowDrainPolicy(pool), replicaOpts{})
	second.waitLeading()
	kl.setPaused(false)
	n := c.waitNode(node, "drain resumed and finished by the new replica", inState(nodeview.Done))
	if n.Annotations[nodeview.AnnotationCordonedBy] != first.identity {
		t.Errorf("cordon should stay recorded as %s's: %v", first.identity, n.Annotations)
	}
	second.waitMetric("success counted by the new replica", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "succeeded"}, 1)
	if got := c.countEvents(node, "DisruptionDrainStarted"); got != 1 {
		t.Errorf("drain started %d times: %q", got, c.events(node))
	}
	c.startMaintenanceAndWaitNoted(node)
	c.finishMaintenance(node)
	c.waitNode(node, "uncordoned by the new replica", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
}
