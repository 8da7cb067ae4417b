package actions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestGPUFaultRepairs runs GKENodeGPUFailed's repairs and their guard rails against one real kube-apiserver, the
// test playing the GPU device plugin (boot ID, XidCriticalError) and GKE (report-and-replace, maintenance notices).
func TestGPUFaultRepairs(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("OneRepairThroughRepeatsLeaderChangeRestartAndStickyGauge", func(t *testing.T) { testGPURepairOnce(t, api) })
	t.Run("LaterGKENoticeIsTheSameIncident", func(t *testing.T) { testGPULaterNotice(t, api) })
	t.Run("CorrelatedFaultsHeld", func(t *testing.T) { testGPUCorrelation(t, api) })
	t.Run("BreakerStaysTrippedAcrossRestartUntilReset", func(t *testing.T) { testGPUBreaker(t, api) })
	t.Run("MaxPerNodeHandsToAPerson", func(t *testing.T) { testGPUMaxPerNode(t, api) })
	t.Run("DryRunWritesNothing", func(t *testing.T) { testGPUDryRun(t, api) })
	t.Run("DrainHoldsTheNodeUntilItBootsAnew", func(t *testing.T) { testGPUFaultDrain(t, api) })
}

// gpuAlert is the mixin's GKENodeGPUFailed for a node whose machine type GKE can replace.
func gpuAlert(node, xid string, startsAt time.Time) template.Alert {
	labels := template.KV{"alertname": "GKENodeGPUFailed", "severity": "critical", "node": node, "xid": xid,
		"gke_disruption_action": string(nodeview.ReportFaultyHost), "fault_behavior": "XID"}
	return template.Alert{Status: "firing", Labels: labels, Annotations: template.KV{}, StartsAt: startsAt,
		Fingerprint: node + "-gpu-" + xid}
}

// gpuNodeLabels are an A4 node's of pool, in topology block block.
func gpuNodeLabels(pool, block string) map[string]string {
	l := a4Node(pool)
	l[gke.LabelTopologyBlock] = block
	return l
}

// boot plays the kubelet and the GPU device plugin: the node runs in boot bootID and, with xid set, shows the
// critical Xid of that boot. A condition of an earlier boot stays as it was, stale, as the plugin leaves it until
// it runs again.
func (c *cluster) boot(name, bootID, xid string) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.NodeInfo.BootID = bootID
		if xid != "" {
			var conds []corev1.NodeCondition
			for _, cond := range n.Status.Conditions {
				if cond.Type != gke.ConditionXidCriticalError {
					conds = append(conds, cond)
				}
			}
			n.Status.Conditions = append(conds, corev1.NodeCondition{Type: gke.ConditionXidCriticalError, Status: corev1.ConditionTrue,
				Reason: `{"` + xid + `":true}`, Message: bootID, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
		}
		_, err = c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatalf("booting %s: %v", name, err)
	}
}

// replaceHost plays GKE's report-and-replace to its end: PodsEvicted, OperationDone (label removed).
func (c *cluster) replaceHost(name string) {
	c.t.Helper()
	c.setReportStatus(name, gke.ReportOperationRunning)
	c.setReportStatus(name, gke.ReportOperationDone)
	c.waitNode(name, "report done", inState(nodeview.Done))
}

// ledgerOf reads the repair ledger of the replica's instance.
func ledgerOf(t *testing.T, api *testenv.APIServer, r *replica) repairs.Ledger {
	t.Helper()
	l, err := repairs.Store{Client: api.Client, Namespace: metav1.NamespaceDefault, Name: repairs.ConfigMapName(leaseOf(t, r))}.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func repairedCount(l repairs.Ledger, node string) int {
	n := 0
	for _, e := range l.Entries {
		if e.Node == node && e.Repaired() {
			n++
		}
	}
	return n
}

// guardPolicy is a pool of A4 nodes with room in its repair budget, so the guard rails are what decide.
func guardPolicy(pool, repair string) string {
	return strings.Replace(poolPolicy(pool, "repair: {maxPerHour: 50}\n"), "    maxUnavailable: 1\n",
		"    maxUnavailable: 1\n    repair: {maxConcurrent: 5, "+repair+"}\n", 1)
}

func testGPURepairOnce(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-once")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	sets := watchLabelSets(t, c, node)
	policy := guardPolicy(pool, "maxPerHour: 10")
	replicas := startReplicaPair(t, api, policy)

	// Alertmanager repeats the alert to every replica alive throughout; Prometheus restarting gives it new
	// episodes (startsAt) of the same fault.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var mu sync.Mutex
	targets := append([]*replica(nil), replicas...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			body := payload(t, gpuAlert(node, "79", startsAt.Add(time.Duration(i%3)*time.Minute)))
			mu.Lock()
			now := append([]*replica(nil), targets...)
			mu.Unlock()
			for _, r := range now {
				send(ctx, r.url, body)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	c.waitNode(node, "host reported", hostReported("XID"))
	c.setReportStatus(node, gke.ReportPodsEvicted)
	c.waitNode(node, "PodsEvicted noted", reportStatusNoted(gke.ReportPodsEvicted))
	stopLeader(t, replicas) // a leader change mid-repair
	c.setReportStatus(node, gke.ReportOperationRunning)
	c.waitNode(node, "OperationRUNNING noted by the new leader", reportStatusNoted(gke.ReportOperationRunning))
	second := leaderOf(t, replicas...)
	second.stop() // and a restart
	restarted := startReplica(t, api, policy, replicaOpts{identity: "replica-c", lease: leaseOf(t, second)})
	mu.Lock()
	targets = append(targets, restarted)
	mu.Unlock()
	restarted.waitLeading()
	time.Sleep(time.Second) // repeats reach the restarted leader mid-repair
	c.setReportStatus(node, gke.ReportOperationDone)
	n := c.waitNode(node, "report done", inState(nodeview.Done))
	if r := nodeview.Of(n).Record; r.Incident != nodeview.GPUIncidentKey("boot-1", "79") {
		t.Errorf("incident %q, want the node's boot and the Xid", r.Incident)
	}

	// The host replaced, the node boots anew; the Xid source still says 79 (dcgm-exporter's gauge is sticky), and
	// the alert fires again, a new episode after the repair.
	c.boot(node, "boot-2", "")
	mu.Lock()
	targets = []*replica{restarted}
	mu.Unlock()
	cancel()
	wg.Wait()
	mustAccept(t, restarted, gpuAlert(node, "79", time.Now()))
	c.waitEvent(node, "DisruptionRepairHeld: repair held (unconfirmed): Xid 79 was repaired on this node")
	restarted.waitMetric("held and visible", "gke_disruption_repairs_held", map[string]string{"node": node, "pool": pool, "reason": "unconfirmed"}, 1)
	time.Sleep(500 * time.Millisecond) // a second report would be labelled within this
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want once: %q", got, c.events(node))
	}
	c.acceptedAtMostOnce([]string{node})
	if got := repairedCount(ledgerOf(t, api, restarted), node); got != 1 {
		t.Errorf("ledger has %d repairs of %s, want 1: %+v", got, node, ledgerOf(t, api, restarted))
	}
}

func testGPULaterNotice(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-notice")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	r := startReplica(t, api, guardPolicy(pool, "maxPerHour: 10"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, gpuAlert(node, "79", startsAt))
	c.waitNode(node, "host reported", hostReported("XID"))
	c.replaceHost(node)

	// GKE's own notice of the same fault, hours later, as the mixin's GKENodeHardwareFailureMaintenance asks for it.
	c.updateNode(node, "GKE announces the GPU failure", func(n *corev1.Node) {
		withScheduledMaintenance(n)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[gke.AnnotationUpcomingMaintenance] = `{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true",` +
			`"window_start_time":"2025-06-15T10:00:00Z","maintenance_reasons":["FAILURE_GPU_XID","FAILURE_GPU"]}`
	})
	notice := alert(node, nodeview.PerformMaintenance, true, time.Now())
	notice.Labels["alertname"], notice.Labels["reasons"] = "GKENodeHardwareFailureMaintenance", "FAILURE_GPU_XID,FAILURE_GPU"
	mustAccept(t, r, notice)
	c.waitEvent(node, "is of the GPU fault already repaired in this boot (Xid 79, reported as faulty): one incident, one repair")
	c.waitEvent(node, "DisruptionActionRefused: refused perform-maintenance: GKE's notice of a GPU failure")
	n := c.get(node)
	if n.Labels[gke.LabelPerformMaintenance] != "" || n.Spec.Unschedulable || nodeview.Of(n).Record.Action != nodeview.ReportFaultyHost {
		t.Errorf("a second repair for the same incident: labels %v, unschedulable %v, annotations %v", n.Labels, n.Spec.Unschedulable, n.Annotations)
	}
}

func testGPUCorrelation(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-corr")
	block := "blk-" + pool
	nodes := []string{unique("a4-a"), unique("a4-b"), unique("a4-c")}
	for _, n := range nodes {
		c.node(n, gpuNodeLabels(pool, block))
	}
	other := unique("a4-other") // another block of the same pool
	c.node(other, gpuNodeLabels(pool, "blk-other-"+pool))
	r := startReplica(t, api, guardPolicy(pool, "maxPerHour: 10"), replicaOpts{})
	r.waitLeading()

	// Two nodes of a block are repaired; so is a node of another block.
	for _, n := range append(nodes[:2:2], other) {
		c.boot(n, "boot-1", "79")
		mustAccept(t, r, gpuAlert(n, "79", time.Now()))
		c.waitNode(n, "host reported", hostReported("XID"))
	}
	// The third of the block within 10 minutes is held: a shared cause.
	c.boot(nodes[2], "boot-1", "79")
	mustAccept(t, r, gpuAlert(nodes[2], "79", time.Now()))
	c.waitEvent(nodes[2], "DisruptionRepairHeld: repair held (correlated): 3 nodes of topology block "+block+" had a GPU fault within 10m0s")
	r.waitMetric("held and visible", "gke_disruption_repairs_held", map[string]string{"node": nodes[2], "pool": pool, "reason": "correlated"}, 1)
	mustAccept(t, r, gpuAlert(nodes[2], "79", time.Now())) // repeats stay held
	time.Sleep(500 * time.Millisecond)
	if n := c.get(nodes[2]); n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Phase != "" {
		t.Errorf("held node acted on: labels %v, annotations %v", n.Labels, n.Annotations)
	}
	if got := c.countEvents(nodes[2], "DisruptionRepairHeld"); got != 1 {
		t.Errorf("hold evented %d times, want once: %q", got, c.events(nodes[2]))
	}
}

func testGPUBreaker(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-breaker")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, gpuNodeLabels(pool, "blk-a-"+pool))
	c.node(b, gpuNodeLabels(pool, "blk-b-"+pool))
	policy := guardPolicy(pool, "maxPerHour: 1")
	lease := unique("lease")
	r := startReplica(t, api, policy, replicaOpts{lease: lease})
	r.waitLeading()
	c.boot(a, "boot-1", "79")
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	c.waitNode(a, "first host reported", hostReported("XID"))

	c.boot(b, "boot-1", "48")
	mustAccept(t, r, gpuAlert(b, "48", time.Now()))
	c.waitEvent(b, "DisruptionRepairBreakerTripped: repair held (breaker): 1 GPU-fault repairs in pool "+pool+" within the hour (repair.maxPerHour 1 = 1)")
	scope := map[string]string{"scope": repairs.PoolScope(pool)}
	r.waitMetric("breaker tripped", "gke_disruption_repair_breaker_tripped", scope, 1)
	r.waitMetric("repair held", "gke_disruption_repairs_held", map[string]string{"node": b, "pool": pool, "reason": "breaker"}, 1)

	// A restart keeps it tripped, after the hour too (the first repair is made older than the hour).
	r.stop()
	store := repairs.Store{Client: api.Client, Namespace: metav1.NamespaceDefault, Name: repairs.ConfigMapName(lease)}
	if _, err := store.Update(context.Background(), func(l *repairs.Ledger) bool {
		for i := range l.Entries {
			l.Entries[i].At = l.Entries[i].At.Add(-2 * time.Hour)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	restarted := startReplica(t, api, policy, replicaOpts{lease: lease})
	restarted.waitLeading()
	restarted.waitMetric("still tripped after a restart", "gke_disruption_repair_breaker_tripped", scope, 1)
	mustAccept(t, restarted, gpuAlert(b, "48", time.Now()))
	c.waitEvent(b, "DisruptionRepairHeld: repair held (breaker): the circuit breaker of pool "+pool+" is tripped since")
	if n := c.get(b); n.Labels[gke.LabelFaultBehavior] != "" {
		t.Fatalf("repaired while the breaker is tripped: %v", n.Labels)
	}

	// status says so; the operator resets it, and the next alert repairs.
	var out strings.Builder
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease,
		Pools: []string{"no-such-pool"}, Now: time.Now()}); err == nil || !strings.Contains(err.Error(), "not tripped: pool/no-such-pool") {
		t.Errorf("resetting a breaker not tripped: %v", err)
	}
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease, By: "oncall", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "circuit breaker pool/"+pool+" reset") {
		t.Errorf("reset said %q", out.String())
	}
	restarted.waitMetric("reset seen by the leader", "gke_disruption_repair_breaker_tripped", scope, 0)
	mustAccept(t, restarted, gpuAlert(b, "48", time.Now()))
	c.waitNode(b, "repaired after the reset", hostReported("XID"))
	if l := ledgerOf(t, api, restarted); l.Breakers[repairs.PoolScope(pool)].ResetBy != "oncall" {
		t.Errorf("ledger breakers %+v", l.Breakers)
	}
}

func testGPUMaxPerNode(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-pernode")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	r := startReplica(t, api, guardPolicy(pool, "maxPerHour: 10"), replicaOpts{})
	r.waitLeading()
	for i, boot := range []string{"boot-1", "boot-2"} {
		c.boot(node, boot, "79") // a new fault the node shows in each new boot
		mustAccept(t, r, gpuAlert(node, "79", time.Now()))
		c.waitNode(node, fmt.Sprintf("repair %d reported", i+1), hostReported("XID"))
		c.replaceHost(node)
	}
	c.boot(node, "boot-3", "79")
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	c.waitEvent(node, "DisruptionRepairHeld: repair held (max_per_node): the node had 2 automatic repairs in 7 days (repair.maxPerNode 2)")
	r.waitMetric("held and visible", "gke_disruption_repairs_held", map[string]string{"node": node, "pool": pool, "reason": "max_per_node"}, 1)
	if n := c.get(node); n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("third repair in 7 days: %v", n.Labels)
	}
}

func testGPUDryRun(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("gpu-dry")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, gpuNodeLabels(pool, "blk-a-"+pool))
	c.node(b, gpuNodeLabels(pool, "blk-b-"+pool))
	c.boot(a, "boot-1", "79")
	c.boot(b, "boot-1", "79")
	before := map[string]string{a: c.get(a).ResourceVersion, b: c.get(b).ResourceVersion}
	r := startReplica(t, api, guardPolicy(pool, "maxPerHour: 1"), replicaOpts{dryRun: true})
	r.waitLeading()
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	c.waitEvent(a, "DisruptionActionDryRun: dry run: would report-faulty-host")
	// The dry run counts its own repairs: the second trips the breaker it would have tripped.
	mustAccept(t, r, gpuAlert(b, "79", time.Now()))
	c.waitEvent(b, "DisruptionRepairHeld: repair held (breaker)")
	for name, rv := range before {
		if n := c.get(name); n.ResourceVersion != rv {
			t.Errorf("dry run changed %s: %v %v", name, n.Labels, n.Annotations)
		}
	}
	_, err := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(context.Background(), repairs.ConfigMapName(leaseOf(t, r)), metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("dry run wrote the repair ledger: %v", err)
	}
}

// testGPUFaultDrain: on a machine type GKE cannot replace, GKENodeGPUFailed asks for a drain: with no maintenance
// pending, once per incident, the node kept cordoned until it boots anew.
func testGPUFaultDrain(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	startKubelet(t, api.Client) // the evicted pod goes
	pool := unique("gpu-drain")
	node := unique("a3-4g")
	labels := gpuNodeLabels(pool, "blk-"+pool)
	labels[gke.LabelInstanceType] = "a3-highgpu-4g"
	c.node(node, labels)
	c.boot(node, "boot-1", "79")
	c.pod("default", unique("train"), node, grace(1))
	r := startReplica(t, api, guardPolicy(pool, "maxPerHour: 10"), replicaOpts{})
	r.waitLeading()
	drainAlert := gpuAlert(node, "79", startsAt)
	drainAlert.Labels["gke_disruption_action"] = string(nodeview.Drain)
	delete(drainAlert.Labels, "fault_behavior")
	mustAccept(t, r, drainAlert)
	n := c.waitNode(node, "drained", inState(nodeview.Done))
	if rec := nodeview.Of(n).Record; !n.Spec.Unschedulable || rec.CordonedBy == "" || rec.Incident != nodeview.GPUIncidentKey("boot-1", "79") {
		t.Errorf("drained node: unschedulable %v, record %+v", n.Spec.Unschedulable, rec)
	}
	c.waitEvent(node, "the node stays cordoned until it boots anew")

	// Repeats, a new episode included, are the same incident.
	drainAlert.StartsAt = startsAt.Add(time.Hour)
	mustAccept(t, r, drainAlert)
	time.Sleep(500 * time.Millisecond)
	if got := c.countEvents(node, "DisruptionDrainStarted"); got != 1 {
		t.Errorf("drain started %d times, want once: %q", got, c.events(node))
	}
	if n := c.get(node); !n.Spec.Unschedulable {
		t.Fatal("the faulty node was uncordoned before it booted anew")
	}
	if got := repairedCount(ledgerOf(t, api, r), node); got != 1 {
		t.Errorf("ledger has %d repairs of %s, want 1", got, node)
	}

	// The host repaired (or the node rebooted): a new boot, and the cordon goes.
	c.boot(node, "boot-2", "")
	c.waitNode(node, "uncordoned after the new boot", func(n *corev1.Node) error {
		if n.Spec.Unschedulable || nodeview.Of(n).Record.CordonedBy != "" {
			return fmt.Errorf("unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
		}
		return nil
	})
	c.waitEvent(node, "DisruptionMaintenanceFinished: the node booted anew (boot boot-2; the GPU fault was of boot boot-1): the fault is gone with that boot; uncordoned (our cordon)")
}
