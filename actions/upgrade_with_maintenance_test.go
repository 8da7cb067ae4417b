package actions

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/prometheus/alertmanager/template"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/gkeapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// upgradeScenario: two 4-node GPU pools, each running a 4-pod training Job, with reschedulable host maintenance
// announced on every node and the control plane a version ahead of the pools (set by the test). GKE's timings are
// shortened; its steps are the documented ones.
const upgradeScenario = `
cluster: {project: p, location: europe-west4, name: c, version: 1.33.4-gke.1000}
gke: {sequence: documented, maintenanceStartDelay: 1s, workloadEviction: 1s, systemEviction: 1s, hostMaintenance: 2s,
      podShutdown: 200ms, nodeCreation: 1s, drainTimeout: 1h}
nodePools:
  - {name: train, machineType: a3-highgpu-8g, accelerator: nvidia-h100-80gb, acceleratorCount: 8, nodes: 4}
  - {name: bare, machineType: a3-highgpu-8g, accelerator: nvidia-h100-80gb, acceleratorCount: 8, nodes: 4}
workloads:
  - {name: pretrain, namespace: train, kind: Job, nodePools: [train]}
  - {name: pretrain, namespace: bare, kind: Job, nodePools: [bare]}
events:
  - {at: 0s, maintenance: {nodePool: train, windowStartsIn: 48h, canReschedule: true, reasons: [PLANNED_UPDATE]}}
  - {at: 0s, maintenance: {nodePool: bare, windowStartsIn: 48h, canReschedule: true, reasons: [PLANNED_UPDATE]}}
`

const controlPlaneVersion = "1.34.1-gke.1200"

type upgradeRig struct {
	api     *testenv.APIServer
	sc      *driver.Scenario
	sim     *container.Server
	cluster string
	client  *gkeapi.Client
	evicted *podDeletions
}

func startUpgradeRig(t *testing.T) *upgradeRig {
	t.Helper()
	sc, err := driver.Parse([]byte(upgradeScenario))
	if err != nil {
		t.Fatal(err)
	}
	api := testenv.StartAPIServer(t)
	sim := container.New()
	cluster := sim.SetCluster(sc.Cluster.Project, sc.Cluster.Location, sc.GKECluster())
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := driver.New(slog.New(slog.NewTextHandler(io.Discard, nil)), driver.Options{Client: api.Client, Scenario: sc, GKE: sim})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
	})
	select {
	case <-d.Started():
	case err := <-done:
		t.Fatalf("driver stopped: %v", err)
	case <-time.After(waitLong):
		t.Fatal("the driver did not start")
	}
	// The control plane was upgraded; the pools are a version behind.
	if err := sim.UpdateCluster(cluster, func(c *containerpb.Cluster) { c.CurrentMasterVersion = controlPlaneVersion }); err != nil {
		t.Fatal(err)
	}
	cm, err := gkecollector.NewClient(ctx, addr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Close() })
	resource, err := gkecollector.ParseCluster(cluster)
	if err != nil {
		t.Fatal(err)
	}
	r := &upgradeRig{api: api, sc: sc, sim: sim, cluster: cluster, client: gkeapi.New(cm, resource), evicted: watchPodDeletions(t, api)}
	for _, pool := range []string{"train", "bare"} {
		testenv.Eventually(t, waitLong, "the "+pool+" Job running on every node", func() error {
			if n := r.running(t, pool); n != 4 {
				return fmt.Errorf("%d pods running", n)
			}
			return nil
		})
	}
	return r
}

// running counts the Job's running pods in namespace ns.
func (r *upgradeRig) running(t *testing.T, ns string) int {
	pods, err := r.api.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func (r *upgradeRig) nodePool(t *testing.T, name string) *containerpb.NodePool {
	t.Helper()
	c, err := r.client.GetCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range c.GetNodePools() {
		if np.GetName() == name {
			return np
		}
	}
	t.Fatalf("no node pool %s", name)
	return nil
}

// podDeletions counts the workload pods stopped (deleted or evicted), by namespace: every one is a job restart.
type podDeletions struct {
	mu sync.Mutex
	by map[string]map[string]bool
}

func watchPodDeletions(t *testing.T, api *testenv.APIServer) *podDeletions {
	d := &podDeletions{by: map[string]map[string]bool{}}
	note := func(obj any, gone bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase == corev1.PodSucceeded || (!gone && p.DeletionTimestamp == nil) {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.by[p.Namespace] == nil {
			d.by[p.Namespace] = map[string]bool{}
		}
		d.by[p.Namespace][string(p.UID)] = true
	}
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, n any) { note(n, false) }, DeleteFunc: func(o any) { note(o, true) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return d
}

func (d *podDeletions) count(ns string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.by[ns])
}

// trainAlerts are the perform-maintenance alerts of the train pool's nodes, as Alertmanager sends them (again).
func trainAlerts(nodes []string) []template.Alert {
	var out []template.Alert
	for _, n := range nodes {
		out = append(out, alert(n, nodeview.PerformMaintenance, true, startsAt))
	}
	return out
}

// waitAllPending waits until every node waits for the pool's upgrade, cordoned, repeating the alerts meanwhile.
func waitAllPending(t *testing.T, c *cluster, r *replica, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		c.waitNode(n, "waiting for the pool's upgrade after its maintenance", func(node *corev1.Node) error {
			if p := nodeview.Of(node).Record.Phase; !p.WaitsForUpgrade() {
				return fmt.Errorf("state %q", p)
			}
			if !node.Spec.Unschedulable {
				return fmt.Errorf("not cordoned")
			}
			return nil
		})
		mustAccept(t, r, trainAlerts(nodes)...)
	}
}

// waitUpgradedAndEnded waits until the train pool is at the control plane's version and no old node has work left.
func waitUpgradedAndEnded(t *testing.T, rig *upgradeRig, nodes []string) {
	t.Helper()
	testenv.Eventually(t, 2*waitLong, "the pool upgraded and every old node handed to GKE or back", func() error {
		if v := rig.nodePool(t, "train").GetVersion(); v != controlPlaneVersion {
			return fmt.Errorf("pool at %s", v)
		}
		for _, n := range nodes {
			node, err := rig.api.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
			if err == nil && nodeview.Of(node).Record.Active() {
				return fmt.Errorf("%s still %s", n, nodeview.Of(node).Record.Phase)
			}
		}
		return nil
	})
}

func upgradePolicy(deadline string) string {
	return fmt.Sprintf(`
pools:
  - name: train
    nodeSelector: {%s: train}
    strategy: parallel
    upgrade: {withMaintenance: true, deadline: %s}
performMaintenance: {drainFirst: true}
drain: {timeout: 30s, evictionRetryDelay: 200ms}
`, gke.LabelNodePool, deadline)
}

// TestUpgradeWithMaintenance: a parallel 4-node pool with host maintenance pending and its version behind the
// control plane is drained once, maintained, upgraded in the same downtime and handed back, through a leader change
// while GKE upgrades and every alert repeated throughout: UpdateNodePool called once, each workload pod stopped once.
// The same pool without the product (GKE's maintenance at its window, then GKE's upgrade) stops each pod twice.
func TestUpgradeWithMaintenance(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	first := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease, identity: "first"})
	first.waitLeading()
	mustAccept(t, first, trainAlerts(nodes)...)

	c := newCluster(t, rig.api)
	waitAllPending(t, c, first, nodes)
	var ledger upgrades.Ledger
	testenv.Eventually(t, waitLong, "the upgrade asked for and its operation recorded", func() error {
		var err error
		if ledger, err = upgrades.Read(context.Background(), rig.api.Client, metav1.NamespaceDefault, lease); err != nil {
			return err
		}
		if e := ledger.Pools["train"]; e.Operation == "" {
			return fmt.Errorf("ledger %+v", ledger)
		}
		return nil
	})
	// The leader goes away while GKE upgrades; the next one follows the same operation.
	first.stop()
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
		t.Errorf("with the product: %d workload pods stopped, want 4 (each pod once)", n)
	}

	// Without the product: GKE's maintenance at its window on every node, then GKE's upgrade of the pool.
	bare := rig.sc.NodeNames("bare")
	for _, n := range bare {
		c.updateNode(n, "GKE's maintenance window starts", func(node *corev1.Node) { node.Labels[gke.LabelPerformMaintenance] = "true" })
	}
	for _, n := range bare {
		c.waitNode(n, "GKE's maintenance done", func(node *corev1.Node) error {
			v := nodeview.Of(node)
			if v.Maintenance.Pending() || v.InMaintenance || v.PerformMaintenanceRequested || !v.Ready {
				return fmt.Errorf("maintenance %q, in maintenance %v", v.Maintenance.Key(), v.InMaintenance)
			}
			return nil
		})
	}
	testenv.Eventually(t, waitLong, "the bare Job running again after the maintenance", func() error {
		if n := rig.running(t, "bare"); n != 4 {
			return fmt.Errorf("%d pods running", n)
		}
		return nil
	})
	if _, err := rig.client.UpdateNodePool(context.Background(), "bare", "COS_CONTAINERD"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*waitLong, "the bare pool upgraded and its Job running", func() error {
		if v := rig.nodePool(t, "bare").GetVersion(); v != controlPlaneVersion {
			return fmt.Errorf("pool at %s", v)
		}
		if n := rig.running(t, "bare"); n != 4 {
			return fmt.Errorf("%d pods running", n)
		}
		return nil
	})
	if n := rig.evicted.count("bare"); n != 8 {
		t.Errorf("without the product: %d workload pods stopped, want 8 (each pod twice)", n)
	}
	t.Logf("workload pods stopped for host maintenance and the upgrade of a 4-node pool: %d with the product, %d without",
		rig.evicted.count("train"), rig.evicted.count("bare"))
}

// TestUpgradeWithMaintenanceFails: GKE's upgrade fails part-way: every node still there is handed back (failed, our
// cordon lifted), the failure counted once (the page: GKEDisruptionActionFailed), and the Job runs again.
func TestUpgradeWithMaintenanceFails(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	var operation string
	testenv.Eventually(t, waitLong, "the upgrade asked for", func() error {
		l, err := upgrades.Read(context.Background(), rig.api.Client, metav1.NamespaceDefault, lease)
		if err != nil {
			return err
		}
		if operation = l.Pools["train"].Operation; operation == "" {
			return fmt.Errorf("ledger %+v", l)
		}
		return nil
	})
	if err := rig.sim.FailOperation(operation, "simulated: the upgrade failed"); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("the failure counted once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}, 1)
	c := newCluster(t, rig.api)
	left := 0
	for _, n := range nodes {
		if _, err := rig.api.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{}); err != nil {
			continue // replaced before the failure
		}
		left++
		c.waitNode(n, "handed back after the failed upgrade", func(node *corev1.Node) error {
			if rec := nodeview.Of(node).Record; rec.Phase != nodeview.Failed && rec.Phase != nodeview.Done {
				return fmt.Errorf("state %q", rec.Phase)
			}
			if nodeview.Of(node).Record.Phase == nodeview.Failed && node.Spec.Unschedulable {
				return fmt.Errorf("still cordoned")
			}
			return nil
		})
	}
	if left == 0 {
		t.Fatal("every node replaced before the failure: the test proves nothing")
	}
	testenv.Eventually(t, waitLong, "the Job running again", func() error {
		if n := rig.running(t, "train"); n != 4 {
			return fmt.Errorf("%d pods running", n)
		}
		return nil
	})
	settle()
	if v := r.metric("gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "failed"}); v != 1 {
		t.Errorf("upgrade failures counted %v times, want once", v)
	}
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool called %d times after a failure, want once", n)
	}
}

// TestUpgradeWithMaintenanceFollowsGKEsOwn: GKE runs an upgrade of the pool already when the group's maintenance is
// done (its auto-upgrade, say): UpdateNodePool is refused (FailedPrecondition), the service follows GKE's operation
// instead of asking again, and hands the nodes back once it is DONE, whether or not GKE replaced them.
func TestUpgradeWithMaintenanceFollowsGKEsOwn(t *testing.T) {
	rig := startUpgradeRig(t)
	nodes := rig.sc.NodeNames("train")
	lease := unique("lease")
	// GKE's own operation, which nothing plays: the nodes stay as they are.
	own := rig.sim.StartNodePoolOperation(rig.cluster, "train", containerpb.Operation_UPGRADE_NODES, 4)
	r := startReplica(t, rig.api, upgradePolicy("6h"), replicaOpts{gke: rig.client, lease: lease})
	r.waitLeading()
	mustAccept(t, r, trainAlerts(nodes)...)
	c := newCluster(t, rig.api)
	for _, n := range nodes {
		c.waitNode(n, "following GKE's own upgrade", inState(nodeview.UpgradeRequested))
	}
	l, err := upgrades.Read(context.Background(), rig.api.Client, metav1.NamespaceDefault, lease)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Pools["train"].Operation; got != own {
		t.Fatalf("following operation %q, want GKE's own %q", got, own)
	}
	settle()
	for _, n := range nodes {
		if node := c.get(n); !node.Spec.Unschedulable {
			t.Errorf("%s uncordoned while GKE's upgrade runs", n)
		}
	}
	if err := rig.sim.FinishOperation(own); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c.waitNode(n, "handed back once GKE's upgrade is DONE", func(node *corev1.Node) error {
			if rec := nodeview.Of(node).Record; rec.Phase != nodeview.Done || node.Spec.Unschedulable {
				return fmt.Errorf("state %q, unschedulable %v", rec.Phase, node.Spec.Unschedulable)
			}
			return nil
		})
	}
	r.waitMetric("the upgrade counted once", "gke_disruption_actions_total", map[string]string{"action": "upgrade-node-pool", "result": "succeeded"}, 1)
	if n := rig.sim.Calls(container.MethodUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool called %d times, want once", n)
	}
}
