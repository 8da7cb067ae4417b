package actions

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestSafety: work is keyed on the maintenance it serves; the ordinary events of a fleet (repeats, moved or vanished
// maintenance, groups, deleted nodes, dry runs, followers) never act twice and never leave a node cordoned by this
// service without maintenance pending.
func TestSafety(t *testing.T) {
	t.Parallel() // its own API server
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	t.Run("NoMaintenancePendingIsRefusedOnce", func(t *testing.T) { testNoMaintenanceRefused(t, api) })
	t.Run("RepeatsOfAHandledMaintenance", func(t *testing.T) { testRepeatsOfHandledMaintenance(t, api) })
	t.Run("MaintenanceMovedAfterDrain", func(t *testing.T) { testMovedAfterDrain(t, api) })
	t.Run("MaintenanceMovedDuringDrain", func(t *testing.T) { testMovedDuringDrain(t, api, kl) })
	t.Run("ParkedAlertMaintenanceMovedLater", func(t *testing.T) { testParkedAlertMovedLater(t, api) })
	t.Run("ParallelPoolCapFitsThree", func(t *testing.T) { testParallelCap(t, api, 3) })
	t.Run("ParallelPoolCapFitsFour", func(t *testing.T) { testParallelCap(t, api, 4) })
	t.Run("TPUSliceUnderRollingPolicy", func(t *testing.T) { testTPUSliceRolling(t, api) })
	t.Run("GroupClaimedHalfWay", func(t *testing.T) { testGroupClaimedHalfWay(t, api) })
	t.Run("NodeRecreatedMidDrain", func(t *testing.T) { testNodeRecreatedMidDrain(t, api, kl) })
	t.Run("DryRunHoldsBudgets", func(t *testing.T) { testDryRunBudgets(t, api) })
	t.Run("PausedThenResumed", func(t *testing.T) { testPaused(t, api) })
	t.Run("OnlyTheLeaderIsReady", func(t *testing.T) { testOnlyLeaderReady(t, api) })
}

func (c *cluster) moveMaintenance(name, v string) {
	c.t.Helper()
	c.updateNode(name, "GKE moving the maintenance", func(n *corev1.Node) { n.Labels[gke.LabelScheduledMaintenanceTime] = v })
}

// untouched fails if the service wrote anything on the node since before.
func (c *cluster) untouched(before *corev1.Node, why string) {
	c.t.Helper()
	after := c.get(before.Name)
	if after.ResourceVersion != before.ResourceVersion || after.Spec.Unschedulable != before.Spec.Unschedulable {
		c.t.Errorf("%s: node changed: unschedulable %v, annotations %v", why, after.Spec.Unschedulable, after.Annotations)
	}
}

// startSlowDrain starts a drain that stays in progress: the node's pod is being evicted, and the kubelet holds it
// until the test ends.
func startSlowDrain(t *testing.T, api *testenv.APIServer, kl *kubelet, prefix string) (c *cluster, r *replica, node, pool string) {
	t.Helper()
	c = newCluster(t, api)
	pool = unique(prefix)
	ns := api.Namespace(prefix)
	node = unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "slow", node, grace(30))
	kl.setPaused(true)
	t.Cleanup(func() { kl.setPaused(false) })
	r = startReplica(t, api, strings.Replace(poolPolicy(pool, ""), "timeout: 20s", "timeout: 1m", 1), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	waitTerminating(t, api, ns, "slow")
	return c, r, node, pool
}

// settle gives wrongly started work the time to show; no check depends on how fast the service is.
func settle() { time.Sleep(1500 * time.Millisecond) }

func testNoMaintenanceRefused(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("nomaint")
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool})
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	for i := range 3 {
		// Repeats, one with a later startsAt (Prometheus restarted): each refused, counted and evented once.
		mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt.Add(time.Duration(i)*time.Hour)))
	}
	c.waitEvent(node, "no maintenance is pending")
	r.waitMetric("refusal counted", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}, 1)
	settle()
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}); got != 1 {
		t.Errorf("skipped counted %v times, want once per (node, maintenance, reason)", got)
	}
	if n := c.countEvents(node, "DisruptionActionRefused"); n != 1 {
		t.Errorf("%d refusal Events, want 1", n)
	}
	c.untouched(before, "a drain alert for a node with no maintenance")
}

func testRepeatsOfHandledMaintenance(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("repeat")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drain done", inState(nodeview.Done))
	// The same maintenance, an alert with a later startsAt (a label flapped): a repeat, not new work.
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt.Add(2*time.Hour)))
	settle()
	if n := c.countEvents(node, "DisruptionDrainStarted"); n != 1 {
		t.Fatalf("%d drains for one maintenance", n)
	}
	c.startMaintenanceAndWaitNoted(node)
	c.finishMaintenance(node)
	c.waitNode(node, "uncordoned after GKE finished", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	// A freshly maintained node gets a repeat with a later startsAt (Prometheus restarted): refused, never cordoned.
	before := c.get(node)
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt.Add(4*time.Hour)))
	c.waitEvent(node, "no maintenance is pending")
	settle()
	c.untouched(before, "a repeat after maintenance")
	if n := c.countEvents(node, "DisruptionDrainStarted"); n != 1 {
		t.Errorf("%d drains for one maintenance", n)
	}
}

func testMovedAfterDrain(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("movedafter")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	a := alert(node, nodeview.Drain, false, startsAt)
	mustAccept(t, r, a)
	c.waitNode(node, "drained and cordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if !n.Spec.Unschedulable {
			return fmt.Errorf("not cordoned")
		}
		return nil
	})
	r.waitMetric("state while cordoned", "gke_disruption_action_state", map[string]string{"node": node, "action": "drain", "state": "done"}, 1)

	c.moveMaintenance(node, "1760000000")
	c.waitNode(node, "cordon lifted: the maintenance drained for is no longer the one announced", func(n *corev1.Node) error {
		if n.Spec.Unschedulable || n.Annotations[nodeview.AnnotationCordonedBy] != "" {
			return fmt.Errorf("unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
		}
		return nil
	})
	c.waitEvent(node, "DisruptionActionAbandoned")
	r.waitMetric("no work left on the node", "gke_disruption_action_state", map[string]string{"node": node, "action": "drain", "state": "done"}, 0)

	// The alert is still firing and Alertmanager repeats it: the new maintenance is new work.
	mustAccept(t, r, a)
	c.waitNode(node, "drained again for the new date", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if got := n.Annotations[nodeview.AnnotationMaintenance]; got != nodeview.LabelKey("1760000000") || !n.Spec.Unschedulable {
			return fmt.Errorf("maintenance %q, unschedulable %v", got, n.Spec.Unschedulable)
		}
		return nil
	})
	if n := c.countEvents(node, "DisruptionDrainStarted"); n != 2 {
		t.Errorf("%d drains, want one per maintenance (2)", n)
	}
}

func testMovedDuringDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c, r, node, _ := startSlowDrain(t, api, kl, "movedduring")
	c.moveMaintenance(node, "1760000000")
	n := c.waitNode(node, "drain abandoned, cordon lifted", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	if !strings.Contains(n.Annotations[nodeview.AnnotationReason], "moved") {
		t.Errorf("reason %q should say the maintenance moved", n.Annotations[nodeview.AnnotationReason])
	}
	r.waitMetric("abandoned drain counted as skipped", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}, 1)
	r.waitMetric("nothing in progress", "gke_disruption_actions_in_progress", map[string]string{"action": "drain"}, 0)
}

func testParkedAlertMovedLater(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("parked")
	busy, parked := unique("gpu"), unique("gpu")
	c.node(busy, map[string]string{"pool": pool}, withScheduledMaintenance, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	c.node(parked, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(parked, nodeview.Drain, false, startsAt))
	c.waitEvent(parked, "DisruptionActionWaiting")
	r.waitMetric("waiting for the pool budget", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "pool_budget"}, 1)
	// The maintenance moves a week later while the alert is parked; then the slot frees.
	c.moveMaintenance(parked, "1750604800")
	before := c.get(parked)
	c.updateNode(busy, "someone uncordoning", func(n *corev1.Node) { n.Spec.Unschedulable = false })
	c.waitEvent(parked, "moved later")
	settle()
	c.untouched(before, "a parked alert decided after its maintenance moved a week later")
	r.waitMetric("no longer waiting", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "pool_budget"}, 0)
}

// parallelPolicy is one parallel pool (pool=<pool>) with a cluster cap.
func parallelPolicy(pool string, maxDisrupted int) string {
	return fmt.Sprintf(`
maxDisruptedNodes: %d
pools:
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    strategy: parallel
drain:
  timeout: 20s
  evictionRetryDelay: 200ms
  maxGracePeriod: 10s
`, maxDisrupted, pool)
}

// testParallelCap: the API server is shared, so the cap counts every node of it; the test's cap is the count of
// other nodes disrupted now plus room.
func testParallelCap(t *testing.T, api *testenv.APIServer, room int) {
	c := newCluster(t, api)
	pool := unique("parallel")
	var nodes []string
	for i := range 4 {
		nodes = append(nodes, fmt.Sprintf("%s-%d", pool, i))
		c.node(nodes[i], map[string]string{"pool": pool}, withScheduledMaintenance)
	}
	r := startReplica(t, api, parallelPolicy(pool, disruptedNow(t, api)+room), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(nodes[0], nodeview.Drain, false, startsAt))
	if room < 4 {
		c.waitEvent(nodes[0], "cluster-wide cap")
		r.waitMetric("waiting for the cap", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "cluster_cap"}, 1)
		settle()
		for _, n := range nodes {
			if rec := nodeview.Of(c.get(n)).Record; rec.Phase != "" || c.get(n).Spec.Unschedulable {
				t.Errorf("%s touched while the group does not fit the cap: %+v", n, rec)
			}
		}
		return
	}
	for _, n := range nodes {
		got := c.waitNode(n, "drained with its group", inState(nodeview.Done))
		if g := got.Annotations[nodeview.AnnotationGroup]; g != strings.Join(nodes, ",") {
			t.Errorf("%s: group %q", n, g)
		}
	}
	for _, n := range nodes {
		if k := c.countEvents(n, "DisruptionActionAccepted"); k != 1 {
			t.Errorf("%s: %d Accepted events, want 1", n, k)
		}
	}
}

// disruptedNow counts the API server's nodes that count as disrupted (other tests' nodes included).
func disruptedNow(t *testing.T, api *testenv.APIServer) int {
	list, err := api.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if nodeview.Of(&list.Items[i]).Disrupted() {
			n++
		}
	}
	return n
}

// sliceHost is a host of a 4-host v5e slice (4x4 chips on 4-chip VMs) in GKE node pool slice.
func sliceHost(slice string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Labels[gke.LabelNodePool] = slice
		n.Labels[gke.LabelInstanceType] = "ct5lp-hightpu-4t"
		n.Labels[gke.LabelTPUTopology] = "4x4"
	}
}

func testTPUSliceRolling(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("tpu")
	slice := unique("slice")
	var hosts []string
	for i := range 4 {
		hosts = append(hosts, fmt.Sprintf("%s-%d", slice, i))
		c.node(hosts[i], map[string]string{"pool": pool}, withScheduledMaintenance, sliceHost(slice))
	}
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{}) // rolling, maxUnavailable 1
	r.waitLeading()
	mustAccept(t, r, alert(hosts[2], nodeview.Drain, false, startsAt))
	for _, h := range hosts {
		c.waitNode(h, "the whole slice drained as one unit", inState(nodeview.Done))
	}
}

// testGroupClaimedHalfWay: a leader claimed two of a group of four and stopped; the next leader claims the rest
// before any member proceeds, and the group goes as a whole.
func testGroupClaimedHalfWay(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("halfway")
	var nodes []string
	for i := range 4 {
		nodes = append(nodes, fmt.Sprintf("%s-%d", pool, i))
	}
	group := strings.Join(nodes, ",")
	for i, name := range nodes {
		c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance, func(n *corev1.Node) {
			if i < 2 {
				n.Annotations = map[string]string{
					nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "accepted", nodeview.AnnotationClaimedBy: "old-leader",
					nodeview.AnnotationMaintenance: nodeview.LabelKey("1750000000"), nodeview.AnnotationGroup: group,
				}
			}
		})
	}
	r := startReplica(t, api, parallelPolicy(pool, 1000), replicaOpts{})
	r.waitLeading()
	for _, n := range nodes {
		got := c.waitNode(n, "the group completed and drained", inState(nodeview.Done))
		if got.Annotations[nodeview.AnnotationGroup] != group {
			t.Errorf("%s: group %q", n, got.Annotations[nodeview.AnnotationGroup])
		}
	}
}

func testNodeRecreatedMidDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c, r, node, pool := startSlowDrain(t, api, kl, "recreate")
	c.waitNode(node, "draining", inState(nodeview.Draining))
	r.waitMetric("draining", "gke_disruption_actions_in_progress", map[string]string{"action": "drain"}, 1)

	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("a deleted node leaves the gauges", "gke_disruption_actions_in_progress", map[string]string{"action": "drain"}, 0)
	r.waitMetric("a deleted node leaves the state", "gke_disruption_action_state", map[string]string{"node": node, "action": "drain", "state": "draining"}, 0)
	fresh := c.node(node, map[string]string{"pool": pool})
	settle()
	c.untouched(fresh, "a node re-created under the name of one being drained")
}

func testDryRunBudgets(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("drybudget")
	var nodes []string
	var befores []*corev1.Node
	for i := range 3 {
		nodes = append(nodes, fmt.Sprintf("%s-%d", pool, i))
		befores = append(befores, c.node(nodes[i], map[string]string{"pool": pool}, withScheduledMaintenance))
	}
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{dryRun: true}) // maxUnavailable 1
	r.waitLeading()
	for _, n := range nodes {
		mustAccept(t, r, alert(n, nodeview.Drain, false, startsAt))
	}
	r.waitMetric("one would act", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "dry_run"}, 1)
	r.waitMetric("the others wait for the budget the dry run holds", "gke_disruption_actions_waiting",
		map[string]string{"action": "drain", "pool": pool, "reason": "pool_budget"}, 2)
	for _, n := range nodes { // repeats change nothing
		mustAccept(t, r, alert(n, nodeview.Drain, false, startsAt))
	}
	settle()
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "drain", "result": "dry_run"}); got != 1 {
		t.Errorf("dry_run counted %v times in a maxUnavailable 1 pool, want 1", got)
	}
	for _, b := range befores {
		c.untouched(b, "dry run")
	}
}

func testPaused(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("paused")
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, "paused: true\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	r.waitMetric("waiting: paused", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "paused"}, 1)
	c.untouched(before, "paused")
	cfg, err := config.Parse([]byte(poolPolicy(pool, "")))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	c.waitNode(node, "drained once the policy is resumed", inState(nodeview.Done))
	r.waitMetric("no longer waiting", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "paused"}, 0)
}

func testOnlyLeaderReady(t *testing.T, api *testenv.APIServer) {
	lease := unique("lease")
	pool := unique("ready")
	a := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{lease: lease})
	a.waitLeading()
	b := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{lease: lease})
	testenv.Eventually(t, waitLong, "follower synced", func() error {
		if !b.svc.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	for _, tc := range []struct {
		r    *replica
		want int
	}{{a, http.StatusOK}, {b, http.StatusServiceUnavailable}} {
		resp, err := http.Get(tc.r.url + "/-/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s /-/ready: %d, want %d", tc.r.identity, resp.StatusCode, tc.want)
		}
	}
	if got := a.metric("gke_disruption_actions_leader", nil); got != 1 {
		t.Errorf("leader gauge on the leader: %v", got)
	}
	if got := b.metric("gke_disruption_actions_leader", nil); got != 0 {
		t.Errorf("leader gauge on the follower: %v", got)
	}
	// The follower's 503 closes the connection, so Alertmanager's retry can reach the leader.
	req, err := http.NewRequest(http.MethodPost, b.url+"/webhook", strings.NewReader(string(payload(t, alert("n-x", nodeview.Drain, false, startsAt)))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
		t.Errorf("follower: code %d, connection closed %v; want 503 and a closed connection", resp.StatusCode, resp.Close)
	}
	// The leader stops: the follower takes over and becomes ready.
	a.stop()
	b.waitLeading()
	testenv.Eventually(t, waitLong, "the new leader ready", func() error {
		resp, err := http.Get(b.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("code %d", resp.StatusCode)
		}
		return nil
	})
}
