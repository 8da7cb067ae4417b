package actions

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestActions runs the service against one real kube-apiserver; each subtest has its own nodes, pool label,
// namespace and Lease.
func TestActions(t *testing.T) {
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	t.Run("PerformMaintenance", func(t *testing.T) { testPerformMaintenance(t, api, kl) })
	t.Run("PerformMaintenanceNoLongerScheduled", func(t *testing.T) { testNoLongerScheduled(t, api, kl) })
	t.Run("PerformMaintenanceNotReschedulable", func(t *testing.T) { testNotReschedulable(t, api) })
	t.Run("DrainGraceCapsDaemonSetsAndSelf", func(t *testing.T) { testDrain(t, api, kl) })
	t.Run("DrainBlockedByPDB", func(t *testing.T) { testDrainBlockedByPDB(t, api) })
	t.Run("OthersCordonKept", func(t *testing.T) { testOthersCordonKept(t, api) })
	t.Run("GKEOperationIsGKEs", func(t *testing.T) { testGKEOperationIsGKEs(t, api) })
	t.Run("UpgradeReplacesNode", func(t *testing.T) { testUpgradeReplacesNode(t, api) })
	t.Run("DuplicateWebhooks", func(t *testing.T) { testDuplicateWebhooks(t, api) })
	t.Run("SpoofedAlerts", func(t *testing.T) { testSpoofedAlerts(t, api) })
	t.Run("AuthAndBadRequests", func(t *testing.T) { testAuthAndBadRequests(t, api) })
	t.Run("DryRun", func(t *testing.T) { testDryRun(t, api) })
	t.Run("RollingWaitsForSlot", func(t *testing.T) { testRollingWaitsForSlot(t, api) })
	t.Run("ResolvedWithdrawsWaiting", func(t *testing.T) { testResolvedWithdrawsWaiting(t, api) })
	t.Run("ResumeAfterRestart", func(t *testing.T) { testResumeAfterRestart(t, api, kl) })
	t.Run("TwoReplicas", func(t *testing.T) { testTwoReplicas(t, api) })
}

// poolPolicy is a rolling pool selecting label pool=<pool>, with short drain timeouts.
func poolPolicy(pool, extra string) string {
	return fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    strategy: rolling
    maxUnavailable: 1
drain:
  timeout: 20s
  evictionRetryDelay: 200ms
  maxGracePeriod: 10s
%[2]s`, pool, extra)
}

var startsAt = time.Date(2025, 6, 7, 10, 0, 0, 0, time.UTC)

func withScheduledMaintenance(n *corev1.Node) {
	n.Labels[gke.LabelScheduledMaintenanceTime] = "1750000000"
}

func testPerformMaintenance(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("pm")
	ns := api.Namespace("pm")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "trainer", node, grace(600))
	r := startReplica(t, api, poolPolicy(pool, "performMaintenance: {drainFirst: true}\n"), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(node, nodeview.PerformMaintenance, true, startsAt))
	n := c.waitNode(node, "perform-maintenance requested", inState(nodeview.MaintenanceRequested))
	if n.Labels[gke.LabelPerformMaintenance] != "true" {
		t.Errorf("label %s not set: %v", gke.LabelPerformMaintenance, n.Labels)
	}
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != r.identity {
		t.Errorf("drainFirst: node should be cordoned by %s: unschedulable %v, annotations %v", r.identity, n.Spec.Unschedulable, n.Annotations)
	}
	if _, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "trainer", metav1.GetOptions{}); err == nil {
		t.Error("pod still on the node after the drain")
	}
	if g, ok := kl.graceOf(ns, "trainer"); !ok || g != 10 {
		t.Errorf("trainer's 600s grace period should be capped to 10s, got %d (seen %v)", g, ok)
	}
	r.waitMetric("succeeded counted", "gke_disruption_actions_total", map[string]string{"action": "perform-maintenance", "result": "succeeded"}, 1)
	if got := r.metric("gke_disruption_actions_in_progress", map[string]string{"action": "perform-maintenance"}); got != 1 {
		t.Errorf("in progress while waiting for GKE = %v, want 1", got)
	}

	c.startMaintenanceAndWaitNoted(node)
	if n := c.get(node); !n.Spec.Unschedulable {
		t.Error("uncordoned while GKE maintenance is under way")
	}
	c.finishMaintenance(node)
	n = c.waitNode(node, "done and uncordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	if _, ok := n.Annotations[nodeview.AnnotationCordonedBy]; ok {
		t.Errorf("cordoned-by left behind: %v", n.Annotations)
	}
	for _, want := range []string{"DisruptionActionAccepted", "DisruptionDrainStarted", "DisruptionMaintenanceRequested", "DisruptionMaintenanceFinished"} {
		c.waitEvent(node, want)
	}
	r.waitMetric("in progress back to 0", "gke_disruption_actions_in_progress", map[string]string{"action": "perform-maintenance"}, 0)
	if got := r.metric("gke_disruption_action_duration_seconds", map[string]string{"action": "perform-maintenance"}); got != 1 {
		t.Errorf("duration observations = %v, want 1", got)
	}

	// Alertmanager repeats the same alert: the episode is finished, nothing happens again.
	mustAccept(t, r, alert(node, nodeview.PerformMaintenance, true, startsAt))
	time.Sleep(time.Second) // give a wrong second action the chance to show; the assertions below do not depend on speed
	if n := c.get(node); n.Labels[gke.LabelPerformMaintenance] != "" || n.Spec.Unschedulable {
		t.Errorf("a repeat of a finished alert acted again: labels %v, unschedulable %v", n.Labels, n.Spec.Unschedulable)
	}
	if got := c.countEvents(node, "DisruptionActionAccepted"); got != 1 {
		t.Errorf("accepted %d times", got)
	}
}

func testNotReschedulable(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("pm")
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(node, nodeview.PerformMaintenance, false, startsAt))
	c.waitEvent(node, "DisruptionActionRefused: refused perform-maintenance: can_reschedule is not true")
	r.waitMetric("skip counted", "gke_disruption_actions_total", map[string]string{"action": "perform-maintenance", "result": "skipped"}, 1)
	if after := c.get(node); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("refused action changed the node: %v %v", after.Labels, after.Annotations)
	}
}

func testDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("drain")
	ns := api.Namespace("drain")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)

	ds, err := api.Client.AppsV1().DaemonSets(ns).Create(context.Background(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.pod(ns, "agent-x", node, withLabels(map[string]string{"app": "agent"}), ownedBy("DaemonSet", "agent", ds.UID))
	c.pod(ns, "short", node, grace(5))
	c.pod(ns, "long", node, grace(600))
	c.pod(ns, "default-grace", node)
	c.pod(ns, "actions-self", node, grace(600))
	c.pod(ns, "opted-out", node, grace(5), withAnnotations(map[string]string{policy.AnnotationKarpenterDoNotDisrupt: "true"}))

	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{self: types.NamespacedName{Namespace: ns, Name: "actions-self"}})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	n := c.waitNode(node, "drain done", inState(nodeview.Done))
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != r.identity {
		t.Errorf("drained node should stay cordoned by us until GKE is done: %v %v", n.Spec.Unschedulable, n.Annotations)
	}
	for pod, want := range map[string]int64{"short": 5, "long": 10, "default-grace": 10, "opted-out": 5} {
		if got, ok := kl.graceOf(ns, pod); !ok || got != want {
			t.Errorf("pod %s evicted with grace %d (seen %v), want %d", pod, got, ok, want)
		}
	}
	for _, pod := range []string{"agent-x", "actions-self"} {
		p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s must be left alone: %v", pod, err)
		}
	}
	r.waitMetric("drain success counted", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "succeeded"}, 1)
	c.waitEvent(node, "DisruptionDrainSucceeded")
	c.waitEvent(node, "pods "+ns+"/opted-out asked not to be disrupted")

	// GKE's maintenance comes and goes; only then is our cordon lifted.
	c.startMaintenanceAndWaitNoted(node)
	c.finishMaintenance(node)
	c.waitNode(node, "uncordoned after maintenance", func(n *corev1.Node) error {
		if n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != "" {
			return fmt.Errorf("unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
		}
		return nil
	})
	c.waitEvent(node, "uncordoned (our cordon)")
}

func testDrainBlockedByPDB(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("pdb")
	ns := api.Namespace("pdb")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.guardedPod(ns, node)
	policy := strings.NewReplacer("timeout: 20s", "timeout: 3s", "maxGracePeriod: 10s", "maxGracePeriod: 2s").Replace(poolPolicy(pool, ""))
	r := startReplica(t, api, policy, replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))

	c.waitNode(node, "draining", func(n *corev1.Node) error {
		if r := nodeview.Of(n).Record; r.Phase != nodeview.Draining && r.Phase != nodeview.Failed {
			return fmt.Errorf("state %q", r.Phase)
		}
		return nil
	})
	n := c.waitNode(node, "drain failed", inState(nodeview.Failed))
	reason := n.Annotations[nodeview.AnnotationReason]
	if !strings.Contains(reason, "did not finish within 3s") || !strings.Contains(reason, "guarded") {
		t.Errorf("failure reason %q should say the drain timed out on pod guarded", reason)
	}
	// The maintenance cannot be moved and is still pending: pods placed on the node would be stopped by it, so
	// the cordon stays, and the reason says so.
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] == "" || !strings.Contains(reason, "stays cordoned") {
		t.Errorf("a failed drain before unmovable maintenance must keep our cordon: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "guarded", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the PDB-protected pod must survive: %v", err)
	}
	r.waitMetric("failure counted", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "failed"}, 1)
	c.waitEvent(node, "DisruptionDrainFailed")
	if got := r.metric("gke_disruption_action_duration_seconds", map[string]string{"action": "drain"}); got != 1 {
		t.Errorf("duration observations = %v, want 1", got)
	}
}

// testOthersCordonKept: a node someone else cordoned is waited on (other_owner), never drained and never uncordoned
// by this service; once that hand lets it go, the drain runs and the cordon it sets is its own.
func testOthersCordonKept(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("cordon")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitEvent(node, "held by cordon")
	r.waitMetric("waiting on the other hand", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "other_owner"}, 1)
	if n := c.get(node); !n.Spec.Unschedulable || nodeview.ReadRecord(n.Annotations).Phase != "" {
		t.Fatalf("a node cordoned by someone else was taken: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}

	c.updateNode(node, "the other hand uncordons", func(n *corev1.Node) { n.Spec.Unschedulable = false })
	n := c.waitNode(node, "drain done", inState(nodeview.Done))
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != r.identity {
		t.Errorf("the drain's cordon should be ours: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
}

// guardedPod runs pod "guarded" on node under a PodDisruptionBudget that never allows a disruption (no disruption
// controller runs to update its status): every eviction gets 429.
func (c *cluster) guardedPod(ns, node string) {
	c.t.Helper()
	c.pod(ns, "guarded", node, withLabels(map[string]string{"app": "guarded"}), ownedBy("ReplicaSet", "guarded", "uid-1"))
	one := intstr.FromInt32(1)
	if _, err := c.client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// testGKEOperationIsGKEs: a node GKE drains for its upgrade is waited on (other_owner) and never touched; work under
// way on a node when GKE's upgrade takes it ends done, reason replaced, its drain stopped and the cordon left to
// GKE; the node GKE re-creates under its name has nothing of ours.
func testGKEOperationIsGKEs(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gkeop")
	ns := api.Namespace("gkeop")
	held, taken := unique("gpu"), unique("gpu")
	gkeDrains := func(n *corev1.Node) {
		n.Labels[gke.LabelOperationType] = "drain"
		n.Annotations = map[string]string{gke.AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES"}`}
		n.Spec.Unschedulable = true
	}
	c.node(held, map[string]string{"pool": pool}, withScheduledMaintenance, gkeDrains)
	c.node(taken, map[string]string{"pool": pool}, withScheduledMaintenance)
	// The drain stays under way until GKE's upgrade comes.
	c.guardedPod(ns, taken)
	r := startReplica(t, api, strings.Replace(poolPolicy(pool, ""), "maxUnavailable: 1", "maxUnavailable: 2", 1), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(held, nodeview.Drain, false, startsAt))
	c.waitEvent(held, "held by gke-operation drain,upgrade_nodes")
	r.waitMetric("waiting on GKE", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "other_owner"}, 1)

	mustAccept(t, r, alert(taken, nodeview.Drain, false, startsAt))
	c.waitNode(taken, "draining", inState(nodeview.Draining))
	c.updateNode(taken, "GKE's upgrade drains the node", func(n *corev1.Node) {
		n.Labels[gke.LabelOperationType] = "drain"
	})
	n := c.waitNode(taken, "work handed over to GKE", inState(nodeview.Done))
	if reason := n.Annotations[nodeview.AnnotationReason]; !strings.HasPrefix(reason, "replaced: ") {
		t.Errorf("reason %q, want replaced: ...", reason)
	}
	if !n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != "" {
		t.Errorf("the cordon under GKE's drain: unschedulable %v, cordoned-by %q; want kept, no longer ours", n.Spec.Unschedulable, n.Annotations[nodeview.AnnotationCordonedBy])
	}
	c.waitEvent(taken, "replaced: GKE's own work on the node (drain)")

	// GKE deletes the node and the new VM registers under the same name; the alert still repeats meanwhile.
	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), taken, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.node(taken, map[string]string{"pool": pool})
	mustAccept(t, r, alert(taken, nodeview.Drain, false, startsAt))
	time.Sleep(time.Second) // a reconcile's time: work resumed would show now
	for _, name := range []string{held, taken} {
		n := c.get(name)
		if rec := nodeview.ReadRecord(n.Annotations); rec.Active() || rec.HoldsCordon() {
			t.Errorf("node %s: work of ours %+v", name, rec)
		}
	}
	if n := c.get(taken); n.Spec.Unschedulable {
		t.Error("the re-created node was cordoned")
	}
	if n := c.get(held); !n.Spec.Unschedulable || nodeview.ReadRecord(n.Annotations).Phase != "" {
		t.Errorf("the node GKE drains was touched: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
}

// testUpgradeReplacesNode: in a rolling pool GKE is upgrading, a node still at the old version gets no
// perform-maintenance (upgrade_replaces_node); once GKE's upgrade no longer shows, the request goes ahead.
func testUpgradeReplacesNode(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("upgrade")
	old, draining, fresh := unique("gpu"), unique("gpu"), unique("gpu")
	for name, v := range map[string]string{old: "v1.33.4-gke.1000", draining: "v1.33.4-gke.1000", fresh: "v1.33.5-gke.1201000"} {
		n := c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
		n.Status.NodeInfo.KubeletVersion = v
		if _, err := api.Client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.updateNode(draining, "GKE's upgrade drains a node of the pool", func(n *corev1.Node) {
		n.Labels[gke.LabelOperationType] = "drain"
	})
	r := startReplica(t, api, strings.Replace(poolPolicy(pool, ""), "maxUnavailable: 1", "maxUnavailable: 2", 1), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(old, nodeview.PerformMaintenance, true, startsAt))
	c.waitEvent(old, "the upgrade replaces it")
	r.waitMetric("waiting for the upgrade", "gke_disruption_actions_waiting",
		map[string]string{"action": "perform-maintenance", "pool": pool, "reason": "upgrade_replaces_node"}, 1)
	if n := c.get(old); n.Labels[gke.LabelPerformMaintenance] != "" || n.Spec.Unschedulable {
		t.Fatalf("a node the upgrade replaces was acted on: %v", n.Labels)
	}

	c.updateNode(draining, "GKE's upgrade no longer shows", func(n *corev1.Node) { delete(n.Labels, gke.LabelOperationType) })
	mustAccept(t, r, alert(old, nodeview.PerformMaintenance, true, startsAt))
	c.waitNode(old, "perform-maintenance requested", inState(nodeview.MaintenanceRequested))
}

func testDuplicateWebhooks(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("dup")
	ns := api.Namespace("dup")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "work", node, grace(1))
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()

	body := payload(t, alert(node, nodeview.Drain, false, startsAt))
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			if code, _ := post(t, r.url, body, postOpts{}); code != http.StatusOK {
				errs <- fmt.Errorf("code %d", code)
				return
			}
			errs <- nil
		}()
	}
	for range 10 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.waitNode(node, "drain done", inState(nodeview.Done))
	// And ten more after it finished.
	for range 10 {
		mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	}
	time.Sleep(time.Second) // a second action would start within this; the checks do not depend on speed
	r.waitMetric("one success", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "succeeded"}, 1)
	for _, reason := range []string{"DisruptionActionAccepted", "DisruptionDrainStarted", "DisruptionDrainSucceeded"} {
		if got := c.countEvents(node, reason); got != 1 {
			t.Errorf("%s %d times, want once: %q", reason, got, c.events(node))
		}
	}
	if r := nodeview.Of(c.get(node)).Record; r.Phase != nodeview.Done {
		t.Errorf("state %q after repeats", r.Phase)
	}
}

func testSpoofedAlerts(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("spoof")
	outside := unique("control-plane-ish")
	before := c.node(outside, map[string]string{"pool": "not-in-any-policy"})
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(outside, nodeview.Drain, false, startsAt), alert("no-such-node", nodeview.Drain, false, startsAt))
	c.waitEvent(outside, "DisruptionActionRefused: refused drain: node is matched by no pool")
	r.waitMetric("both skipped", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}, 2)
	if after := c.get(outside); after.ResourceVersion != before.ResourceVersion || after.Spec.Unschedulable {
		t.Errorf("spoofed alert changed the node: %v", after.Annotations)
	}
}

func testAuthAndBadRequests(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("auth")
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{webConfig: webConfigFile(t)})
	r.waitLeading()
	body := payload(t, alert(node, nodeview.Drain, false, startsAt))

	for _, tc := range []struct {
		name string
		body []byte
		opts postOpts
		want int
	}{
		{"no credentials", body, postOpts{}, http.StatusUnauthorized},
		{"another user of the web config", body, postOpts{user: "prometheus", pass: "prometheus-secret"}, http.StatusForbidden},
		{"wrong password", body, postOpts{user: "alertmanager", pass: "guess"}, http.StatusUnauthorized},
		{"malformed", []byte(`{"version":"4","alerts":[`), postOpts{user: "alertmanager", pass: "alertmanager-secret"}, http.StatusBadRequest},
		{"wrong version", []byte(`{"version":"5","alerts":[]}`), postOpts{user: "alertmanager", pass: "alertmanager-secret"}, http.StatusBadRequest},
		{"wrong type", body, postOpts{user: "alertmanager", pass: "alertmanager-secret", contentType: "text/plain"}, http.StatusUnsupportedMediaType},
		{"oversized", append(append([]byte(`{"version":"4","receiver":"`), make([]byte, webhook.DefaultMaxRequestBytes)...), `"}`...),
			postOpts{user: "alertmanager", pass: "alertmanager-secret"}, http.StatusRequestEntityTooLarge},
	} {
		if code, _ := post(t, r.url, tc.body, tc.opts); code != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.want)
		}
	}
	time.Sleep(time.Second) // work wrongly let through would start within this; the check does not depend on speed
	if after := c.get(node); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("refused requests changed the node: %v", after.Annotations)
	}
	for code, want := range map[string]float64{"400": 2, "403": 1, "413": 1, "415": 1} {
		if got := r.metric("gke_disruption_webhook_requests_total", map[string]string{"code": code}); got != want {
			t.Errorf("webhook_requests_total{code=%s} = %v, want %v", code, got, want)
		}
	}

	code, results := post(t, r.url, body, postOpts{user: "alertmanager", pass: "alertmanager-secret"})
	if code != http.StatusOK || len(results) != 1 || results[0].Decision != webhook.Accepted {
		t.Fatalf("authenticated request: %d %+v", code, results)
	}
	c.waitNode(node, "drain done", inState(nodeview.Done))
}

func testDryRun(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("dry")
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{dryRun: true})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt), alert(node, nodeview.PerformMaintenance, true, startsAt))
	c.waitEvent(node, "DisruptionActionDryRun: dry run: would perform-maintenance")
	r.waitMetric("dry run counted", "gke_disruption_actions_total", map[string]string{"action": "perform-maintenance", "result": "dry_run"}, 1)
	if after := c.get(node); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("dry run changed the node: %v %v", after.Labels, after.Annotations)
	}
}

func testRollingWaitsForSlot(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("roll")
	a, b := unique("gpu-a"), unique("gpu-b")
	c.node(a, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.node(b, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(a, nodeview.Drain, false, startsAt))
	c.waitNode(a, "first node drained", inState(nodeview.Done))
	// Sent once only: the service itself must come back to it when the slot frees.
	mustAccept(t, r, alert(b, nodeview.Drain, false, startsAt))
	c.waitEvent(b, "DisruptionActionWaiting: drain waits: pool "+pool+": 1 of 2 nodes unavailable")
	if st := nodeview.Of(c.get(b)).Record; st.Phase != "" {
		t.Fatalf("second node acted on while the first holds the only slot: %q", st.Phase)
	}
	c.startMaintenance(a)
	c.finishMaintenance(a)
	c.waitNode(b, "second node drained once the slot freed", inState(nodeview.Done))
	if n := c.get(a); n.Spec.Unschedulable {
		t.Error("first node still cordoned")
	}
}

func testResolvedWithdrawsWaiting(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("resolved")
	a, b := unique("gpu-a"), unique("gpu-b")
	c.node(a, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.node(b, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, alert(a, nodeview.Drain, false, startsAt))
	c.waitNode(a, "first node drained", inState(nodeview.Done))
	mustAccept(t, r, alert(b, nodeview.Drain, false, startsAt))
	c.waitEvent(b, "DisruptionActionWaiting")

	resolved := alert(b, nodeview.Drain, false, startsAt)
	resolved.Status = "resolved"
	code, results := post(t, r.url, payload(t, resolved), postOpts{})
	if code != http.StatusOK || len(results) != 1 || results[0].Decision != webhook.Skipped {
		t.Fatalf("resolved alert: %d %+v", code, results)
	}
	r.waitMetric("withdrawal counted", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}, 1)

	c.startMaintenance(a)
	c.finishMaintenance(a)
	c.waitNode(a, "first node uncordoned", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	time.Sleep(time.Second) // the withdrawn alert would be acted on within this; the check does not depend on speed
	if st := nodeview.Of(c.get(b)).Record; st.Phase != "" || c.get(b).Spec.Unschedulable {
		t.Errorf("withdrawn work was done: state %q", st.Phase)
	}
}

// testNoLongerScheduled: the maintenance the node was claimed for happens (or moves) while the node drains first;
// the service must not request maintenance afterwards, and lifts its cordon.
func testNoLongerScheduled(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("moved")
	ns := api.Namespace("moved")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "slow", node, grace(30))
	kl.setPaused(true)
	defer kl.setPaused(false)
	r := startReplica(t, api, poolPolicy(pool, "performMaintenance: {drainFirst: true}\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.PerformMaintenance, true, startsAt))
	waitTerminating(t, api, ns, "slow")
	c.updateNode(node, "GKE moving the maintenance", func(n *corev1.Node) { n.Labels[gke.LabelScheduledMaintenanceTime] = "1760000000" })
	kl.setPaused(false)

	n := c.waitNode(node, "done without a request, uncordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	if _, ok := n.Labels[gke.LabelPerformMaintenance]; ok {
		t.Errorf("maintenance requested for an event that moved: %v", n.Labels)
	}
	c.waitEvent(node, "DisruptionActionAbandoned")
	r.waitMetric("counted as skipped", "gke_disruption_actions_total", map[string]string{"action": "perform-maintenance", "result": "skipped"}, 1)
}
