package actions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestOpportunistic: the leader itself starts reschedulable maintenance on idle nodes of pools that ask for it.
func TestOpportunistic(t *testing.T) {
	t.Parallel() // its own API server
	api := testenv.StartAPIServer(t)
	startKubelet(t, api.Client) // finishes the evictions of the drains before the request
	t.Run("GKEDocumentedExample", func(t *testing.T) { testOpportunisticExample(t, api) })
	t.Run("AcceleratorPodBeforeTheCordonWins", func(t *testing.T) { testOpportunisticPodWins(t, api) })
	t.Run("OptedOutAndCordonedNodes", func(t *testing.T) { testOpportunisticOptOut(t, api) })
	t.Run("DryRun", func(t *testing.T) { testOpportunisticDryRun(t, api) })
	t.Run("Windows", func(t *testing.T) { testOpportunisticWindows(t, api) })
	t.Run("TPUSliceAsAWhole", func(t *testing.T) { testOpportunisticSlice(t, api) })
	t.Run("TwoReplicas", func(t *testing.T) { testOpportunisticTwoReplicas(t, api) })
	t.Run("DueWorkFirst", func(t *testing.T) { testOpportunisticGivenBack(t, api) })
}

// testOpportunisticGivenBack: with maxDisruptedNodes 1 held by an idle node's requested maintenance 5 days out, a
// drain due in an hour has that request given back (uncordoned, request withdrawn, the maintenance left to GKE)
// and goes; the idle node is not taken again for that maintenance.
func testOpportunisticGivenBack(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("due")
	ns := api.Namespace("due")
	idle, due := pool+"-idle", pool+"-due"
	c.node(idle, map[string]string{"pool": pool}, announced(120*time.Hour))
	c.node(due, map[string]string{"pool": pool}, withScheduledMaintenance)
	for _, n := range []string{pool + "-b1", pool + "-b2"} {
		c.node(n, map[string]string{"pool": pool})
		c.pod(ns, n, n, usingGPU())
	}
	c.pod(ns, "training", due, usingGPU())
	r := startReplica(t, api, opportunisticPolicy(pool, "maxDisruptedNodes: 1\n"), replicaOpts{})
	r.waitLeading()
	c.waitNode(idle, "the idle node's maintenance requested", func(n *corev1.Node) error {
		if !nodeview.Of(n).PerformMaintenanceRequested {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})

	mustAccept(t, r, alert(due, nodeview.Drain, false, startsAt))
	c.waitNode(idle, "given back", func(n *corev1.Node) error {
		v := nodeview.Of(n)
		if v.Record.Active() || v.PerformMaintenanceRequested || n.Spec.Unschedulable || !strings.Contains(v.Record.Reason, "given back") {
			return fmt.Errorf("state %s, reason %q, labels %v, unschedulable %v", v.Record.Phase, v.Record.Reason, n.Labels, n.Spec.Unschedulable)
		}
		return nil
	})
	c.waitEvent(idle, "given back: drain of "+due)
	c.waitNode(due, "the due drain done", inState(nodeview.Done))
	settle()
	settle() // several opportunistic passes
	if n := c.get(idle); taken(n) || n.Spec.Unschedulable {
		t.Errorf("the idle node was taken again for the maintenance given back: %v", n.Annotations)
	}
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
	r := nodeview.Of(n).Record
	return r.Action == nodeview.OpportunisticMaintenance && (r.Active() || r.HoldsCordon())
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
		if !nodeview.Of(n).PerformMaintenanceRequested || !n.Spec.Unschedulable {
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
		n.Annotations[nodeview.AnnotationAction] = string(nodeview.OpportunisticMaintenance)
		n.Annotations[nodeview.AnnotationState] = string(nodeview.Accepted)
		n.Annotations[nodeview.AnnotationOpportunistic] = "true"
		n.Annotations[nodeview.AnnotationMaintenance] = nodeview.Of(n).Maintenance.Key()
	})
	c.pod(ns, "landed", node, usingGPU())
	r := startReplica(t, api, opportunisticPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	n := c.waitNode(node, "abandoned", inState(nodeview.Done))
	if n.Spec.Unschedulable || nodeview.Of(n).PerformMaintenanceRequested {
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

// testOpportunisticWindows: the policy's windows hold (an idle node waits, counted and evented, until one opens),
// and a maintenance beyond the pool's opportunistic window is never taken.
func testOpportunisticWindows(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppwin")
	soon := c.node(pool+"-soon", map[string]string{"pool": pool}, announced(96*time.Hour))
	late := c.node(pool+"-late", map[string]string{"pool": pool}, announced(400*time.Hour)) // beyond 336h
	c.node(pool+"-3", map[string]string{"pool": pool})
	c.node(pool+"-4", map[string]string{"pool": pool})
	policy := func(windows string) string {
		return fmt.Sprintf(`%s
pools:
  - name: %s
    nodeSelector: {pool: %[2]s}
    maxUnavailable: 4
    opportunistic: {nodeIdleTime: 2s, minNodes: 1, window: 336h}
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, windows, pool)
	}
	// Open three days from now, every hour of that day: closed all through the test.
	day := time.Now().UTC().Add(72 * time.Hour).Weekday().String()[:3]
	closed := fmt.Sprintf(`windows: [{days: [%s], start: "00:00", end: "24:00", timezone: UTC}]`, day)
	r := startReplica(t, api, policy(closed), replicaOpts{})
	r.waitLeading()
	waiting := map[string]string{"action": "opportunistic-maintenance", "pool": pool, "reason": "window"}
	r.waitMetric("the idle node waits for a window", "gke_disruption_actions_waiting", waiting, 1)
	c.waitEvent(soon.Name, "opportunistic-maintenance waits: outside every maintenance window")
	if got := c.countEvents(soon.Name, "DisruptionActionWaiting"); got != 1 {
		t.Errorf("%d wait Events on %s, want 1 per maintenance and reason: %q", got, soon.Name, c.events(soon.Name))
	}
	c.untouched(soon, "outside every window")
	c.untouched(late, "outside every window")

	cfg, err := config.Parse([]byte(policy("")))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	c.waitNode(soon.Name, "taken once a window is open", func(n *corev1.Node) error {
		if !taken(n) || !n.Spec.Unschedulable {
			return fmt.Errorf("annotations %v, unschedulable %v", n.Annotations, n.Spec.Unschedulable)
		}
		return nil
	})
	r.waitMetric("no longer waiting", "gke_disruption_actions_waiting", waiting, 0)
	settle()
	c.untouched(late, "maintenance beyond the opportunistic window")
}

// tpuHost is a host of a 2-host v5e slice (2x4 chips on 4-chip VMs), the slice being GKE node pool slice.
func tpuHost(slice string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Labels[gke.LabelNodePool] = slice
		n.Labels[gke.LabelInstanceType] = "ct5lp-hightpu-4t"
		n.Labels[gke.LabelTPUTopology] = "2x4"
	}
}

func usingTPU() podOpt {
	return func(p *corev1.Pod) {
		four := resource.MustParse("4")
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"google.com/tpu": four}, Limits: corev1.ResourceList{"google.com/tpu": four}}
	}
}

// testOpportunisticSlice: a multi-host TPU slice goes only as a whole and only with every host idle; minNodes
// counts slices.
func testOpportunisticSlice(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppslice")
	ns := api.Namespace("oppslice")
	idleSlice, busySlice := unique("slice-a"), unique("slice-b")
	var idleHosts, busyHosts []string
	for i := range 2 {
		idleHosts = append(idleHosts, fmt.Sprintf("%s-%d", idleSlice, i))
		busyHosts = append(busyHosts, fmt.Sprintf("%s-%d", busySlice, i))
		c.node(idleHosts[i], map[string]string{"pool": pool}, announced(96*time.Hour), tpuHost(idleSlice))
		// The busy slice's maintenance comes first: only its one busy host keeps it from going first.
		c.node(busyHosts[i], map[string]string{"pool": pool}, announced(90*time.Hour), tpuHost(busySlice))
	}
	c.pod(ns, "worker", busyHosts[1], usingTPU())
	r := startReplica(t, api, fmt.Sprintf(`pools:
  - name: %s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 4
    opportunistic: {nodeIdleTime: 2s, minNodes: 1, window: 336h}
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, pool), replicaOpts{})
	r.waitLeading()
	for _, h := range idleHosts {
		c.waitNode(h, "the idle slice taken as a whole", func(n *corev1.Node) error {
			if !taken(n) || !nodeview.Of(n).PerformMaintenanceRequested {
				return fmt.Errorf("annotations %v, labels %v", n.Annotations, n.Labels)
			}
			return nil
		})
	}
	c.waitEvent(idleHosts[0], "pool keeps 1 of 2 units (nodes or TPU slices)")
	settle()
	for _, h := range busyHosts {
		if taken(c.get(h)) {
			t.Fatalf("%s taken: its slice has a busy host, and minNodes 1 of 2 slices allows one out", h)
		}
	}

	// The idle slice is maintained and returns; the other still has its worker.
	for _, h := range idleHosts {
		c.startMaintenanceAndWaitNoted(h)
	}
	for _, h := range idleHosts {
		c.updateNode(h, "GKE finishing", func(n *corev1.Node) {
			delete(n.Labels, gke.LabelActiveNodeMaintenance)
			delete(n.Annotations, gke.AnnotationUpcomingMaintenance)
			n.Spec.Taints = nil
		})
	}
	for _, h := range idleHosts {
		c.waitNode(h, "uncordoned after maintenance", func(n *corev1.Node) error {
			if n.Spec.Unschedulable {
				return fmt.Errorf("still cordoned")
			}
			return nil
		})
	}
	settle()
	for _, h := range busyHosts {
		if taken(c.get(h)) {
			t.Fatalf("%s taken while a host of its slice runs a TPU pod", h)
		}
	}
	// The worker finishes: the whole slice goes.
	if err := api.Client.CoreV1().Pods(ns).Delete(context.Background(), "worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range busyHosts {
		c.waitNode(h, "the slice taken once every host is idle", func(n *corev1.Node) error {
			if !taken(n) {
				return fmt.Errorf("annotations %v", n.Annotations)
			}
			return nil
		})
	}
}

// simulateOpportunisticGKE moves one node along as GKE does after perform-maintenance=true: maintenance starts
// and, once the service has noticed it, ends with the announcement gone. Errors are left for the next round.
func simulateOpportunisticGKE(ctx context.Context, c *cluster, name string) {
	n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	r := nodeview.Of(n).Record
	_, inMaintenance := n.Labels[gke.LabelActiveNodeMaintenance]
	switch {
	case nodeview.Of(n).PerformMaintenanceRequested && !inMaintenance:
		n.Labels[gke.LabelActiveNodeMaintenance] = "ONGOING"
		delete(n.Labels, gke.LabelPerformMaintenance)
	case inMaintenance && r.MaintenanceSeen:
		delete(n.Labels, gke.LabelActiveNodeMaintenance)
		delete(n.Annotations, gke.AnnotationUpcomingMaintenance)
	default:
		return
	}
	_, _ = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
}

// testOpportunisticTwoReplicas: two replicas share the Lease; the leader is stopped after its first node; every
// node is still taken exactly once, minNodes (3 of 4) holds from every watch event, and no claim is evented twice.
func testOpportunisticTwoReplicas(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppha")
	var names []string
	for i := range 4 {
		names = append(names, fmt.Sprintf("%s-%d", pool, i))
		c.node(names[i], map[string]string{"pool": pool}, announced(time.Duration(96+i)*time.Hour))
	}
	budget := watchPool(t, api, pool, 1)
	replicas := startReplicaPair(t, api, opportunisticPolicy(pool, ""))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	playGKE(ctx, &wg, c, names, simulateOpportunisticGKE)

	testenv.Eventually(t, waitLong, "first node maintained", func() error {
		for _, name := range names {
			if r := nodeview.Of(c.get(name)).Record; r.Phase == nodeview.Done && r.MaintenanceSeen {
				return nil
			}
		}
		return fmt.Errorf("none maintained yet")
	})
	stopLeader(t, replicas)
	for _, name := range names {
		c.waitNode(name, "node "+name+" maintained and uncordoned", func(n *corev1.Node) error {
			r := nodeview.Of(n).Record
			if r.Phase != nodeview.Done || !r.MaintenanceSeen || n.Spec.Unschedulable {
				return fmt.Errorf("state %q, seen %v, unschedulable %v", r.Phase, r.MaintenanceSeen, n.Spec.Unschedulable)
			}
			return nil
		})
	}
	cancel()
	wg.Wait()
	budget.check(t, names, 1)
	c.acceptedAtMostOnce(names)
}
