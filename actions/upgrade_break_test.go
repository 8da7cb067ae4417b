package actions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/executor"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// countingGKE passes every call to the real client, counts the UpdateNodePool calls GKE accepted (operations
// started), and loses the answer of the first lose accepted calls, as a connection broken after GKE acted would.
type countingGKE struct {
	executor.GKE
	mu       sync.Mutex
	lose     int
	accepted []string
}

func (g *countingGKE) UpdateNodePool(ctx context.Context, pool, imageType string) (*containerpb.Operation, error) {
	op, err := g.GKE.UpdateNodePool(ctx, pool, imageType)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted = append(g.accepted, op.GetName())
	if g.lose > 0 {
		g.lose--
		return nil, status.Error(codes.Unavailable, "the connection broke before GKE's answer came")
	}
	return op, nil
}

func (g *countingGKE) operations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.accepted...)
}

func readUpgradeLedger(t *testing.T, rig *upgradeRig, lease string) upgrades.Ledger {
	t.Helper()
	l, err := upgrades.Read(context.Background(), rig.api.Client, metav1.NamespaceDefault, lease)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestUpgradeRefusedPermissionDenied: GKE refuses UpdateNodePool (no container.clusters.update): asked once, the
// upgrade counted failed once, every member's work failed and the node handed back (uncordoned), and the Event
// names the permission to grant.
func TestUpgradeRefusedPermissionDenied(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	rig.sim.FailWith(container.MethodUpdateNodePool, status.New(codes.PermissionDenied,
		`Required "container.clusters.update" permission(s) for "`+rig.cluster+`".`), -1)
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease, identity: "only"})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)

	c := newCluster(t, rig.api)
	for _, n := range nodes {
		c.waitNode(n, "work failed and the node handed back", func(node *corev1.Node) error {
			rec := nodeview.Of(node).Record
			if rec.Phase != nodeview.Failed {
				return fmt.Errorf("state %q (reason %q)", rec.Phase, rec.Reason)
			}
			if node.Spec.Unschedulable {
				return fmt.Errorf("still cordoned")
			}
			return nil
		})
		mustAccept(t, r, trainAlerts(nodes)...)
	}
	r.waitMetric("the upgrade counted failed once", "gke_disruption_actions_total",
		map[string]string{"action": "upgrade-node-pool", "result": "failed"}, 1)
	testenv.Eventually(t, waitLong, "an Event naming container.clusters.update", func() error {
		for _, n := range nodes {
			for _, e := range c.events(n) {
				if strings.HasPrefix(e, "DisruptionUpgradeFailed:") && strings.Contains(e, "container.clusters.update") {
					return nil
				}
			}
		}
		return fmt.Errorf("no DisruptionUpgradeFailed Event naming container.clusters.update")
	})
	// Nothing asks again, whatever repeats come.
	for range 6 {
		mustAccept(t, r, trainAlerts(nodes)...)
		time.Sleep(500 * time.Millisecond)
	}
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool called %d times, want once", n)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}); got != 1 {
		t.Errorf("failed counted %v times, want once", got)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}); got != 0 {
		t.Errorf("succeeded counted %v times, want 0", got)
	}
	if e := readUpgradeLedger(t, rig, lease).Pools["train"]; e.State != upgrades.Failed || e.Attempts != 1 {
		t.Errorf("ledger entry %+v, want failed after one attempt", e)
	}
	if v := rig.nodePool(t, "train").GetVersion(); v == controlPlaneVersion {
		t.Errorf("pool upgraded to %s although GKE refused", v)
	}
}

// TestUpgradeUnavailableNoOperation: UpdateNodePool fails Unavailable before GKE acted: the nodes wait (cordoned),
// and after nodestate.LostAnswer the service finds no operation and asks again: exactly one operation started, the
// pool upgraded, counted succeeded once.
func TestUpgradeUnavailableNoOperation(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	rig.sim.Fail(container.MethodUpdateNodePool, codes.Unavailable, 1)
	gke := &countingGKE{GKE: rig.client}
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: gke, lease: lease, identity: "only"})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	waitAllPending(t, c, r, nodes)
	testenv.Eventually(t, waitLong, "the first UpdateNodePool call failed", func() error {
		if n := rig.sim.Calls(container.MethodUpdateNodePool); n < 1 {
			return fmt.Errorf("%d calls", n)
		}
		return nil
	})
	// Within LostAnswer nothing asks again, and the nodes stay cordoned.
	time.Sleep(20 * time.Second)
	mustAccept(t, r, trainAlerts(nodes)...)
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool called %d times within LostAnswer, want once", n)
	}
	for _, n := range nodes {
		node := c.get(n)
		if !node.Spec.Unschedulable || !nodeview.Of(node).Record.Phase.WaitsForUpgrade() {
			t.Errorf("%s: cordoned %v, state %q while the answer is awaited", n, node.Spec.Unschedulable, nodeview.Of(node).Record.Phase)
		}
	}
	waitUpgradedAndEnded(t, rig, nodes)
	r.waitMetric("the upgrade counted once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}, 1)
	if ops := gke.operations(); len(ops) != 1 {
		t.Errorf("GKE started %d upgrade operations (%v), want exactly one", len(ops), ops)
	}
	if n := rig.sim.Calls(container.MethodListOperations); n < 1 {
		t.Errorf("ListOperations called %d times: the operation was not looked for before asking again", n)
	}
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 2 {
		t.Errorf("UpdateNodePool called %d times, want twice (one failed, one asked again)", n)
	}
	if e := readUpgradeLedger(t, rig, lease).Pools["train"]; e.State != upgrades.Done || e.Attempts != 2 || e.Operation == "" {
		t.Errorf("ledger entry %+v, want done after two attempts with its operation", e)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}); got != 0 {
		t.Errorf("failed counted %v times, want 0", got)
	}
}

// TestUpgradeLostAnswerOperationStarted: GKE started the upgrade but its answer was lost: the service must find
// the operation (ListOperations) rather than ask again, follow it to its end and count it once; and the ledger must
// not keep a requested entry that would block the pool's next upgrade.
func TestUpgradeLostAnswerOperationStarted(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	gke := &countingGKE{GKE: rig.client, lose: 1}
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: gke, lease: lease, identity: "only"})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	waitAllPending(t, c, r, nodes)
	waitUpgradedAndEnded(t, rig, nodes)
	// LostAnswer passes; whatever the service does, it must not start a second upgrade, and the entry must end.
	testenv.Eventually(t, 2*waitLong, "the ledger's entry ended with the operation found", func() error {
		mustAccept(t, r, trainAlerts(nodes)...)
		e := readUpgradeLedger(t, rig, lease).Pools["train"]
		if e.State == upgrades.Requested {
			return fmt.Errorf("entry still requested: %+v", e)
		}
		return nil
	})
	if ops := gke.operations(); len(ops) != 1 {
		t.Errorf("GKE started %d upgrade operations (%v), want exactly one", len(ops), ops)
	}
	e := readUpgradeLedger(t, rig, lease).Pools["train"]
	if e.State != upgrades.Done || e.Operation != gke.operations()[0] {
		t.Errorf("ledger entry %+v, want done with operation %v", e, gke.operations())
	}
	r.waitMetric("the upgrade counted succeeded once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}, 1)
}

// TestUpgradeDryRun: a dry run decides but changes nothing: no UpdateNodePool, no ledger, nodes untouched.
func TestUpgradeDryRun(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	r := startReplica(t, rig.api, "dryRun: true\n"+upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease, identity: "only"})
	r.waitLeading()
	for range 10 {
		mustAccept(t, r, trainAlerts(nodes)...)
		time.Sleep(time.Second)
	}
	for _, n := range nodes {
		node, err := rig.api.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable {
			t.Errorf("%s cordoned in a dry run", n)
		}
		for k := range node.Annotations {
			if strings.HasPrefix(k, nodeview.Prefix) {
				t.Errorf("%s: annotation %s=%q written in a dry run", n, k, node.Annotations[k])
			}
		}
		if v := nodeview.Of(node); v.PerformMaintenanceRequested {
			t.Errorf("%s: perform-maintenance requested in a dry run", n)
		}
	}
	for _, m := range []string{container.MethodUpdateNodePool, container.MethodListOperations, container.MethodGetOperation} {
		if n := rig.sim.Calls(m); n != 0 {
			t.Errorf("%s called %d times in a dry run", m, n)
		}
	}
	cm, err := rig.api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	default:
		if d, ok := cm.Data[upgrades.DataKey]; ok {
			t.Errorf("upgrade ledger written in a dry run: %s", d)
		}
	}
	if n := rig.evicted.count("train"); n != 0 {
		t.Errorf("%d workload pods stopped in a dry run", n)
	}
	if v := rig.nodePool(t, "train").GetVersion(); v == controlPlaneVersion {
		t.Errorf("pool upgraded in a dry run")
	}
}

// TestUpgradeRestartWhilePending: the only replica stops while every node is upgrade-pending and nothing was
// claimed yet (GKE's cluster unreadable); a new replica with the same Lease carries on: one UpdateNodePool, the
// pool upgraded, every pod stopped once, counted once.
func TestUpgradeRestartWhilePending(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	rig.sim.Fail(container.MethodGetCluster, codes.Unavailable, -1)
	first := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease, identity: "first"})
	first.waitLeading()
	mustAccept(t, first, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	waitAllPending(t, c, first, nodes)
	time.Sleep(2 * time.Second)
	first.stop()
	rig.sim.Fail(container.MethodGetCluster, codes.OK, 0)
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 0 {
		t.Fatalf("UpdateNodePool called %d times while the cluster was unreadable", n)
	}
	for _, n := range nodes {
		if p := nodeview.Of(c.get(n)).Record.Phase; p != nodeview.UpgradePending {
			t.Fatalf("%s: state %q before the restart, want upgrade-pending", n, p)
		}
	}
	second := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease, identity: "second"})
	second.waitLeading()
	mustAccept(t, second, trainAlerts(nodes)...)
	waitUpgradedAndEnded(t, rig, nodes)
	mustAccept(t, second, trainAlerts(nodes)...)
	testenv.Eventually(t, waitLong, "the Job running again on the upgraded nodes", func() error {
		if n := rig.running(t, "train"); n != 4 {
			return fmt.Errorf("%d pods running", n)
		}
		return nil
	})
	second.waitMetric("the upgrade counted once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}, 1)
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool called %d times, want once", n)
	}
	if n := rig.evicted.count("train"); n != 4 {
		t.Errorf("%d workload pods stopped, want 4 (each once)", n)
	}
	if e := readUpgradeLedger(t, rig, lease).Pools["train"]; e.State != upgrades.Done || e.Attempts != 1 {
		t.Errorf("ledger entry %+v, want done after one attempt", e)
	}
}

// TestUpgradeOperationFails: GKE's upgrade operation fails: the work ends failed, nodes handed back, counted
// failed once, never asked again.
func TestUpgradeOperationFails(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	// GetOperation unreadable at first, so the test fails the operation before the service sees it end.
	rig.sim.Fail(container.MethodGetOperation, codes.Unavailable, -1)
	gke := &countingGKE{GKE: rig.client}
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: gke, lease: lease, identity: "only"})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	testenv.Eventually(t, waitLong, "the upgrade operation started", func() error {
		if len(gke.operations()) == 0 {
			return fmt.Errorf("no operation")
		}
		return nil
	})
	op := gke.operations()[0]
	if err := rig.sim.FailOperation(op, "simulated: a node could not be created"); err != nil {
		t.Fatal(err)
	}
	rig.sim.Fail(container.MethodGetOperation, codes.OK, 0)
	r.waitMetric("the upgrade counted failed once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}, 1)
	for _, n := range nodes {
		node, err := rig.api.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := nodeview.Of(node).Record
		if rec.Phase.WaitsForUpgrade() {
			c.waitNode(n, "work ended after the operation failed", func(node *corev1.Node) error {
				if p := nodeview.Of(node).Record.Phase; p.WaitsForUpgrade() {
					return fmt.Errorf("state %q", p)
				}
				return nil
			})
		}
	}
	for range 4 {
		mustAccept(t, r, trainAlerts(nodes)...)
		time.Sleep(500 * time.Millisecond)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}); got != 1 {
		t.Errorf("failed counted %v times, want once", got)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}); got != 0 {
		t.Errorf("succeeded counted %v times, want 0", got)
	}
	if n := len(gke.operations()); n != 1 {
		t.Errorf("%d operations started, want one", n)
	}
	if e := readUpgradeLedger(t, rig, lease).Pools["train"]; e.State != upgrades.Failed {
		t.Errorf("ledger entry %+v, want failed", e)
	}
}

// TestUpgradeDeadlinePassesBeforeClaim: the group's maintenance finished but the upgrade cannot be claimed (GKE's
// cluster unreadable) until upgrade.deadline passes: every member's work ends failed, the node handed back,
// counted failed once, and nothing asks GKE afterwards when the API comes back.
func TestUpgradeDeadlinePassesBeforeClaim(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	rig.sim.Fail(container.MethodGetCluster, codes.Unavailable, -1)
	r := startReplica(t, rig.api, upgradePolicy("8s"), replicaOpts{gke: rig.client, lease: lease, identity: "only"})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	for _, n := range nodes {
		c.waitNode(n, "work failed past upgrade.deadline and the node handed back", func(node *corev1.Node) error {
			rec := nodeview.Of(node).Record
			if rec.Phase != nodeview.Failed {
				return fmt.Errorf("state %q (reason %q)", rec.Phase, rec.Reason)
			}
			if node.Spec.Unschedulable {
				return fmt.Errorf("still cordoned")
			}
			if !strings.Contains(rec.Reason, "upgrade.deadline") {
				return fmt.Errorf("reason %q does not name upgrade.deadline", rec.Reason)
			}
			return nil
		})
	}
	r.waitMetric("the upgrade counted failed once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}, 1)
	rig.sim.Fail(container.MethodGetCluster, codes.OK, 0)
	for range 6 {
		mustAccept(t, r, trainAlerts(nodes)...)
		time.Sleep(500 * time.Millisecond)
	}
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 0 {
		t.Errorf("UpdateNodePool called %d times after the work ended", n)
	}
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}); got != 1 {
		t.Errorf("failed counted %v times, want once", got)
	}
	if e := readUpgradeLedger(t, rig, lease).Pools["train"]; e.State != upgrades.Failed {
		t.Errorf("ledger entry %+v, want failed", e)
	}
	for _, n := range nodes {
		if node := c.get(n); node.Spec.Unschedulable || nodeview.Of(node).Record.Phase != nodeview.Failed {
			t.Errorf("%s: cordoned %v, state %q after the API came back", n, node.Spec.Unschedulable, nodeview.Of(node).Record.Phase)
		}
	}
}
