package actions

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestOpportunistic: the leader itself starts reschedulable maintenance on idle nodes of pools that ask for it.
func TestOpportunistic(t *testing.T) {
	api := testenv.StartAPIServer(t)
	startKubelet(t, api.Client) // finishes the evictions of the drains before the request
	t.Run("GKEDocumentedExample", func(t *testing.T) { testOpportunisticExample(t, api) })
	t.Run("AcceleratorPodBeforeTheCordonWins", func(t *testing.T) { testOpportunisticPodWins(t, api) })
	t.Run("OptedOutAndCordonedNodes", func(t *testing.T) { testOpportunisticOptOut(t, api) })
	t.Run("DryRun", func(t *testing.T) { testOpportunisticDryRun(t, api) })
}

// announced writes GKE's upcoming-maintenance annotation: reschedulable maintenance starting in d.
func announced(d time.Duration) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[gke.AnnotationUpcomingMaintenance] = fmt.Sprintf(
			`{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true","window_start_time":%q}`,
			time.Now().Add(d).UTC().Format(time.RFC3339))
	}
}

func usingGPU() podOpt {
	return func(p *corev1.Pod) {
		one := resource.MustParse("1")
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": one}, Limits: corev1.ResourceList{"nvidia.com/gpu": one}}
	}
}

func opportunisticPolicy(pool, extra string) string {
	return fmt.Sprintf(`%[2]s
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 4
    opportunistic: {nodeIdleTime: 3s, minNodes: 3, window: 336h}
drain:
  timeout: 20s
  evictionRetryDelay: 200ms
`, pool, extra)
}

func taken(n *corev1.Node) bool {
	r := nodestate.Read(n)
	return r.Action == nodestate.OpportunisticMaintenance && (r.Active() || r.HoldsCordon())
}

// testOpportunisticExample is GKE's documented example: a 4-node pool, minNodes 3; node1 busy, node2 idle only
// briefly, node3 and node4 idle long enough: exactly one of node3/node4 is taken, then the other after it returns.
func testOpportunisticExample(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("opp")
	ns := api.Namespace("opp")
	names := []string{pool + "-1", pool + "-2", pool + "-3", pool + "-4"}
	due := []time.Duration{96 * time.Hour, 144 * time.Hour, 120 * time.Hour, 121 * time.Hour}
	for i, n := range names {
		c.node(n, map[string]string{"pool": pool}, announced(due[i]))
	}
	c.pod(ns, "busy", names[0], usingGPU())
	c.pod(ns, "finishing", names[1], usingGPU())
	r := startReplica(t, api, opportunisticPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	time.Sleep(2 * time.Second)
	if err := api.Client.CoreV1().Pods(ns).Delete(context.Background(), "finishing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	first := ""
	testenv.Eventually(t, waitLong, "one of node3/node4 taken", func() error {
		for _, n := range names {
			if taken(c.get(n)) {
				first = n
				return nil
			}
		}
		return fmt.Errorf("none taken")
	})
	if first != names[2] {
		t.Fatalf("took %s first, want %s (idle long enough, maintenance first)", first, names[2])
	}
	c.waitNode(first, "perform-maintenance requested", func(n *corev1.Node) error {
		if !nodestate.PerformMaintenanceRequested(n) || !n.Spec.Unschedulable {
			return fmt.Errorf("labels %v, unschedulable %v", n.Labels, n.Spec.Unschedulable)
		}
		return nil
	})
	c.waitEvent(first, "pool keeps 3 of 4")
	settle()
	for _, n := range names {
		if n != first && taken(c.get(n)) {
			t.Fatalf("%s taken while %s is out: minNodes 3 of 4 allows one", n, first)
		}
	}
	r.waitMetric("counted", "gke_disruption_actions_total", map[string]string{"action": "opportunistic-maintenance", "result": "succeeded"}, 1)

	// GKE does the maintenance; the node returns, and the next one goes.
	c.startMaintenanceAndWaitNoted(first)
	c.updateNode(first, "GKE finishing", func(n *corev1.Node) {
		delete(n.Labels, gke.LabelActiveNodeMaintenance)
		delete(n.Annotations, gke.AnnotationUpcomingMaintenance)
		n.Spec.Taints = nil
	})
	c.waitNode(first, "uncordoned after maintenance", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	c.waitNode(names[3], "then the other", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken: %v", n.Annotations)
		}
		return nil
	})
	if taken(c.get(names[0])) {
		t.Error("the busy node was taken")
	}
}

// testOpportunisticPodWins: an accelerator pod that landed between the decision and the cordon wins; the claim is
// abandoned, the node uncordoned and the pod left alone.
func testOpportunisticPodWins(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("opprace")
	ns := api.Namespace("opprace")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour), func(n *corev1.Node) {
		// As a leader leaves it when it decided and stopped before cordoning.
		n.Annotations[nodestate.AnnotationAction] = string(nodestate.OpportunisticMaintenance)
		n.Annotations[nodestate.AnnotationState] = string(nodestate.Accepted)
		n.Annotations[nodestate.AnnotationOpportunistic] = "true"
		n.Annotations[nodestate.AnnotationMaintenance] = nodestate.PendingMaintenance(n).Key()
	})
	c.pod(ns, "landed", node, usingGPU())
	r := startReplica(t, api, opportunisticPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	n := c.waitNode(node, "abandoned", inState(nodestate.Done))
	if n.Spec.Unschedulable || nodestate.PerformMaintenanceRequested(n) {
		t.Errorf("unschedulable %v, labels %v: the pod's node must be left to it", n.Spec.Unschedulable, n.Labels)
	}
	if p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "landed", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the accelerator pod must not be evicted: %v", err)
	}
	c.waitEvent(node, "started using an accelerator")
}

func testOpportunisticOptOut(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppout")
	var befores []*corev1.Node
	befores = append(befores,
		c.node(pool+"-a", map[string]string{"pool": pool, gke.LabelOpportunisticDisable: "true"}, announced(96*time.Hour)),
		c.node(pool+"-b", map[string]string{"pool": pool}, announced(96*time.Hour), func(n *corev1.Node) {
			n.Annotations[gke.AnnotationOpportunisticConfig] = `{"nodeIdleTimeSeconds":600}`
		}),
		c.node(pool+"-c", map[string]string{"pool": pool}, announced(96*time.Hour)),
		c.node(pool+"-d", map[string]string{"pool": pool}, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
	)
	// minNodes 3 of 4 with d cordoned by someone else: nothing may go; a and b are not ours to take anyway.
	r := startReplica(t, api, opportunisticPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	time.Sleep(5 * time.Second) // past nodeIdleTime: a wrong pick would show by now; no check depends on speed
	for _, b := range befores {
		c.untouched(b, "opted out, GKE's own, or minNodes")
	}
}

func testOpportunisticDryRun(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppdry")
	var befores []*corev1.Node
	for i := range 5 {
		befores = append(befores, c.node(fmt.Sprintf("%s-%d", pool, i), map[string]string{"pool": pool}, announced(time.Duration(96+i)*time.Hour)))
	}
	r := startReplica(t, api, opportunisticPolicy(pool, ""), replicaOpts{dryRun: true})
	r.waitLeading()
	r.waitMetric("one would go", "gke_disruption_actions_total", map[string]string{"action": "opportunistic-maintenance", "result": "dry_run"}, 1)
	r.waitMetric("then a second: minNodes 3 of 5", "gke_disruption_actions_total", map[string]string{"action": "opportunistic-maintenance", "result": "dry_run"}, 2)
	time.Sleep(5 * time.Second)
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "opportunistic-maintenance", "result": "dry_run"}); got != 2 {
		t.Errorf("dry_run %v, want 2: the simulated claims hold minNodes", got)
	}
	for _, b := range befores {
		c.untouched(b, "dry run")
	}
}
