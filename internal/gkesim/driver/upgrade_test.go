package driver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gkecontainer "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

const upgradeTarget = "1.33.5-gke.1201000"

// nodeLog records, in the order the watch delivered them, the nodes' appearances, their drain marks (label,
// annotation and cordon together) and their deletions.
type nodeLog struct {
	mu     sync.Mutex
	events []string
	nodes  map[string]*corev1.Node // last seen
}

func (l *nodeLog) add(s string) {
	if !slices.Contains(l.events, s) {
		l.events = append(l.events, s)
	}
}

func (l *nodeLog) seen(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes[n.Name] = n
	if nodeReady(n) {
		l.add("ready " + n.Name)
	}
	if n.Labels[LabelGKEOperation] == "drain" && strings.Contains(n.Annotations[AnnotationCurrentOperation], `"operation_type":"UPGRADE_NODES"`) &&
		n.Spec.Unschedulable {
		l.add("drain " + n.Name)
	}
}

func (l *nodeLog) gone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.add("deleted " + n.Name)
	}
}

// order checks that the log holds want in this order.
func (l *nodeLog) order(want ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := -1
	for _, w := range want {
		i := slices.Index(l.events, w)
		if i < 0 {
			return fmt.Errorf("never saw %q; saw %q", w, l.events)
		}
		if i < last {
			return fmt.Errorf("%q came before %q; saw %q", w, want[slices.Index(want, w)-1], l.events)
		}
		last = i
	}
	return nil
}

func (l *nodeLog) node(name string) *corev1.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodes[name]
}

// upgradeRig is a driver on a real API server with the GKE API simulator, read through Google's own client.
type upgradeRig struct {
	api     *testenv.APIServer
	d       *Driver
	sc      *Scenario
	client  *gkecontainer.ClusterManagerClient
	cluster string
	log     *nodeLog
}

func startUpgradeRig(t *testing.T, scenario string) *upgradeRig {
	t.Helper()
	sc, err := Parse([]byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	api := testenv.StartAPIServer(t)
	log := &nodeLog{nodes: map[string]*corev1.Node{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: log.seen, UpdateFunc: func(_, n any) { log.seen(n) }, DeleteFunc: log.gone,
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)

	gkeAPI := container.New()
	cluster := gkeAPI.SetCluster(sc.Cluster.Project, sc.Cluster.Location, sc.GKECluster())
	addr, err := gkeAPI.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gkeAPI.Close)
	client, err := gkecontainer.NewClusterManagerClient(ctx, option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })

	d, err := New(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Options{Client: api.Client, Scenario: sc, GKE: gkeAPI})
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
		t.Fatalf("driver stopped before the story started: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the driver did not register the cluster within 60s")
	}
	return &upgradeRig{api: api, d: d, sc: sc, client: client, cluster: cluster, log: log}
}

// servingOnEveryNode waits for one serving pod running on each node of pool and returns the pool's nodes and the
// names their replacements will have.
func (r *upgradeRig) servingOnEveryNode(t *testing.T, pool string) (nodes, replacements []string) {
	t.Helper()
	nodes = r.sc.NodeNames(pool)
	for i := range nodes {
		replacements = append(replacements, r.sc.ReplacementNodeName(pool, i, 1))
	}
	until(t, "a serving pod running on every node", 30*time.Second, func() bool {
		for _, n := range nodes {
			if runningPods(podsOn(t, r.api, "serving", n)) != 1 {
				return false
			}
		}
		return true
	})
	return nodes, replacements
}

// pool reads the node pool and its upgrade operation (nil before one runs) through the GKE API.
func (r *upgradeRig) pool(t *testing.T, name string) (*containerpb.NodePool, *containerpb.Operation) {
	t.Helper()
	ctx := context.Background()
	c, err := r.client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: r.cluster})
	if err != nil {
		t.Fatal(err)
	}
	var np *containerpb.NodePool
	for _, p := range c.GetNodePools() {
		if p.GetName() == name {
			np = p
		}
	}
	parent, _, _ := strings.Cut(r.cluster, "/clusters/")
	ops, err := r.client.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops.GetOperations() {
		if strings.HasSuffix(op.GetTargetLink(), "/nodePools/"+name) && op.GetOperationType() == containerpb.Operation_UPGRADE_NODES {
			return np, op
		}
	}
	return np, nil
}

func nodesDone(op *containerpb.Operation) int64 {
	for _, m := range op.GetProgress().GetMetrics() {
		if m.GetName() == "NODES_DONE" {
			return m.GetIntValue()
		}
	}
	return -1
}

// until polls check until it reports done or the deadline passes.
func until(t *testing.T, what string, within time.Duration, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDriverPlaysSurgeUpgrade: a surge upgrade of a 3-node GPU pool, node by node on the API server and in the GKE
// API as Google's client reads it: each new node Ready at the new version before its old node is labelled,
// annotated and cordoned, drained and deleted; the operation's done count rising to 3; the pool RECONCILING, then
// RUNNING at the new version; the workloads' pods on the new nodes; the metadata servers describing the new VMs.
func TestDriverPlaysSurgeUpgrade(t *testing.T) {
	r := startUpgradeRig(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke: {nodeCreation: 1s, podShutdown: 100ms, drainTimeout: 1h}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 3}
workloads:
  - {name: inference, namespace: serving, kind: Deployment, nodePools: [l4], replicas: 3, pdb: {maxUnavailable: 1}}
  - {name: device-plugin, namespace: kube-system, kind: DaemonSet}
events:
  - {at: 2s, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000}}
`)
	old, fresh := r.servingOnEveryNode(t, "l4")

	var done []int64
	var reconciling bool
	until(t, "the upgrade operation DONE", 60*time.Second, func() bool {
		np, op := r.pool(t, "l4")
		if op == nil {
			return false
		}
		if n := nodesDone(op); len(done) == 0 || done[len(done)-1] != n {
			done = append(done, n)
		}
		reconciling = reconciling || np.GetStatus() == containerpb.NodePool_RECONCILING
		return op.GetStatus() == containerpb.Operation_DONE
	})
	if !slices.Equal(done, []int64{0, 1, 2, 3}) {
		t.Errorf("NODES_DONE seen %v, want 0, 1, 2, 3", done)
	}
	if !reconciling {
		t.Error("the pool was never RECONCILING during the upgrade")
	}
	np, _ := r.pool(t, "l4")
	if np.GetVersion() != upgradeTarget || np.GetStatus() != containerpb.NodePool_RUNNING {
		t.Errorf("pool after the upgrade: version %s, status %s; want %s RUNNING", np.GetVersion(), np.GetStatus(), upgradeTarget)
	}

	// Surge 1: each replacement is complete before the next begins.
	var order []string
	for i := range old {
		order = append(order, "ready "+fresh[i], "drain "+old[i], "deleted "+old[i])
	}
	if err := r.log.order(order...); err != nil {
		t.Error(err)
	}
	for i, name := range fresh {
		n := r.log.node(name)
		if n == nil {
			t.Fatalf("new node %s never seen", name)
		}
		if v := n.Status.NodeInfo.KubeletVersion; v != "v"+upgradeTarget {
			t.Errorf("new node %s: kubelet %s, want v%s", name, v, upgradeTarget)
		}
		if n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.BootID == bootID(old[i], 0) {
			t.Errorf("new node %s: boot ID %q, want one of its own", name, n.Status.NodeInfo.BootID)
		}
		if got := metadataValue(t, r.d, old[i], "instance/name"); got != name {
			t.Errorf("the metadata server of node %d describes %s, want the new VM %s", i, got, name)
		}
	}
	until(t, "inference running on the new nodes", 30*time.Second, func() bool {
		running := 0
		for _, n := range fresh {
			running += runningPods(podsOn(t, r.api, "serving", n))
		}
		return running == 3
	})
	for _, n := range fresh {
		if runningPods(podsOn(t, r.api, "kube-system", n)) != 1 {
			t.Errorf("new node %s runs no device-plugin pod", n)
		}
	}
}

// TestDriverPlaysRequestedUpgrade: an upgrade asked for through the GKE API (UpdateNodePool, as a client of the
// API asks) is played like GKE's own: the operation it answered moves on node by node to DONE and the pool is at the
// new version. An upgrade whose operation fails stops where it is: the nodes not yet replaced stay, and the pool is
// RUNNING at its old version.
func TestDriverPlaysRequestedUpgrade(t *testing.T) {
	r := startUpgradeRig(t, `
cluster: {project: sim-project, location: us-central1, name: sim, version: 1.33.4-gke.1000}
gke: {nodeCreation: 1s, podShutdown: 100ms, drainTimeout: 1h}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 3}
  - {name: a3, machineType: a3-highgpu-8g, accelerator: nvidia-h100-80gb, nodes: 3}
workloads:
  - {name: inference, namespace: serving, kind: Deployment, nodePools: [l4, a3], replicas: 6, pdb: {maxUnavailable: 1}}
`)
	ctx := context.Background()
	update := func(pool string) *containerpb.Operation {
		t.Helper()
		op, err := r.client.UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{
			Name: r.cluster + "/nodePools/" + pool, NodeVersion: upgradeTarget, ImageType: "COS_CONTAINERD"})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	operation := func(name string) *containerpb.Operation {
		t.Helper()
		parent, _, _ := strings.Cut(r.cluster, "/clusters/")
		op, err := r.client.GetOperation(ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + name})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}

	old := r.sc.NodeNames("l4")
	op := update("l4")
	until(t, "the requested upgrade DONE", 60*time.Second, func() bool { return operation(op.GetName()).GetStatus() == containerpb.Operation_DONE })
	if got := operation(op.GetName()); got.GetError() != nil || nodesDone(got) != 3 {
		t.Errorf("requested upgrade ended %v", got)
	}
	np, _ := r.pool(t, "l4")
	if np.GetVersion() != upgradeTarget || np.GetStatus() != containerpb.NodePool_RUNNING {
		t.Errorf("pool after the requested upgrade: version %s, status %s; want %s RUNNING", np.GetVersion(), np.GetStatus(), upgradeTarget)
	}
	for _, n := range old {
		if err := r.log.order("drain "+n, "deleted "+n); err != nil {
			t.Errorf("node %s: %v", n, err)
		}
	}

	// The second pool's upgrade fails once its first node is replaced.
	old = r.sc.NodeNames("a3")
	op = update("a3")
	until(t, "the first a3 node replaced", 60*time.Second, func() bool { return r.log.order("deleted "+old[0]) == nil })
	if err := r.d.gke.FailOperation(op.GetName(), "simulated: the upgrade failed"); err != nil {
		t.Fatal(err)
	}
	until(t, "the pool RUNNING after the failed upgrade", 30*time.Second, func() bool {
		np, _ := r.pool(t, "a3")
		return np.GetStatus() == containerpb.NodePool_RUNNING
	})
	time.Sleep(3 * time.Second) // longer than a node's replacement takes
	np, _ = r.pool(t, "a3")
	if np.GetVersion() == upgradeTarget {
		t.Errorf("pool at %s after its upgrade failed, want its old version", np.GetVersion())
	}
	if got := operation(op.GetName()); got.GetError().GetMessage() != "simulated: the upgrade failed" {
		t.Errorf("failed operation %v", got)
	}
	for _, n := range old[2:] {
		if r.log.order("deleted "+n) == nil || r.log.order("drain "+n) == nil {
			t.Errorf("node %s drained or deleted after its pool's upgrade failed", n)
		}
	}
}

// TestDriverPlaysBlueGreenUpgrade: a blue-green upgrade of a 3-node GPU pool through GKE's phases, as Google's client
// reads them in update_info: every green node Ready before any blue node drains, the blue nodes drained two at a
// time, kept through the pool's soak and only then deleted; the operation DONE with 3 nodes, the pool RUNNING at the
// new version, its update_info cleared, its strategy BLUE_GREEN; the workload on the green nodes.
func TestDriverPlaysBlueGreenUpgrade(t *testing.T) {
	r := startUpgradeRig(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke: {nodeCreation: 1s, podShutdown: 100ms, drainTimeout: 1h}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 3}
workloads:
  - {name: inference, namespace: serving, kind: Deployment, nodePools: [l4], replicas: 3}
  - {name: device-plugin, namespace: kube-system, kind: DaemonSet}
events:
  - {at: 2s, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000, strategy: BLUE_GREEN, blueGreen: {batchNodes: 2, batchSoak: 1s, poolSoak: 3s}}}
`)
	blue, green := r.servingOnEveryNode(t, "l4")

	var phases []containerpb.NodePool_UpdateInfo_BlueGreenInfo_Phase
	var soakingWithBlue bool
	until(t, "the upgrade operation DONE", 60*time.Second, func() bool {
		np, op := r.pool(t, "l4")
		if p := np.GetUpdateInfo().GetBlueGreenInfo().GetPhase(); p != 0 && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		if np.GetUpdateInfo().GetBlueGreenInfo().GetPhase() == containerpb.NodePool_UpdateInfo_BlueGreenInfo_NODE_POOL_SOAKING {
			soakingWithBlue = soakingWithBlue || r.log.order("deleted "+blue[0]) != nil
		}
		return op != nil && op.GetStatus() == containerpb.Operation_DONE
	})
	for i, want := range []containerpb.NodePool_UpdateInfo_BlueGreenInfo_Phase{
		containerpb.NodePool_UpdateInfo_BlueGreenInfo_CREATING_GREEN_POOL,
		containerpb.NodePool_UpdateInfo_BlueGreenInfo_DRAINING_BLUE_POOL,
		containerpb.NodePool_UpdateInfo_BlueGreenInfo_NODE_POOL_SOAKING,
	} {
		if j := slices.Index(phases, want); j < 0 || (i > 0 && j < slices.Index(phases, containerpb.NodePool_UpdateInfo_BlueGreenInfo_CREATING_GREEN_POOL)) {
			t.Errorf("phases seen %v: want %v among them, in GKE's order", phases, want)
		}
	}
	if !slices.IsSorted(phases) {
		t.Errorf("phases seen %v, not in GKE's order", phases)
	}
	if !soakingWithBlue {
		t.Error("the blue nodes were deleted before the pool's soak, or it was never seen")
	}
	np, op := r.pool(t, "l4")
	if np.GetVersion() != upgradeTarget || np.GetStatus() != containerpb.NodePool_RUNNING || np.GetUpdateInfo() != nil ||
		np.GetUpgradeSettings().GetStrategy() != containerpb.NodePoolUpdateStrategy_BLUE_GREEN || nodesDone(op) != 3 {
		t.Errorf("pool after the upgrade: version %s, status %s, update_info %v, strategy %s, %d nodes done; want %s RUNNING, none, BLUE_GREEN, 3",
			np.GetVersion(), np.GetStatus(), np.GetUpdateInfo(), np.GetUpgradeSettings().GetStrategy(), nodesDone(op), upgradeTarget)
	}

	// Every green node Ready before any blue node drains; the first batch of two drained before the third; every
	// blue node deleted only after the last drain.
	var order []string
	for _, g := range green {
		order = append(order, "ready "+g)
	}
	for _, first := range blue[:2] {
		if err := r.log.order(append(slices.Clone(order), "drain "+first, "drain "+blue[2])...); err != nil {
			t.Error(err)
		}
	}
	for _, b := range blue {
		if err := r.log.order("drain "+blue[2], "deleted "+b); err != nil {
			t.Error(err)
		}
	}
	until(t, "inference running on the green nodes", 30*time.Second, func() bool {
		running := 0
		for _, n := range green {
			running += runningPods(podsOn(t, r.api, "serving", n))
		}
		return running == 3
	})
}

// TestUpgradeDrainWaitsForDisruptionBudget: a PodDisruptionBudget that allows no disruption holds the drain: the
// Eviction API refuses, the pod keeps running on the cordoned node until the drain timeout, and GKE then deletes
// the node anyway.
func TestUpgradeDrainWaitsForDisruptionBudget(t *testing.T) {
	r := startUpgradeRig(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke: {nodeCreation: 200ms, podShutdown: 100ms, drainTimeout: 8s}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 1}
workloads:
  - {name: inference, namespace: serving, kind: Deployment, nodePools: [l4], replicas: 1, pdb: {minAvailable: 1}}
events:
  - {at: 2s, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000}}
`)
	old, fresh := r.sc.NodeName("l4", 0), r.sc.ReplacementNodeName("l4", 0, 1)
	var pod corev1.Pod
	until(t, "inference running", 30*time.Second, func() bool {
		pods := podsOn(t, r.api, "serving", old)
		if runningPods(pods) != 1 {
			return false
		}
		pod = pods[0]
		return true
	})
	until(t, "the old node cordoned for the drain", 30*time.Second, func() bool { return r.log.order("drain "+old) == nil })
	// The drain started at most the informer's lag before it was seen: for half the drain timeout after that, the
	// pod must still be running, however slowly the events arrive.
	drainSeen := time.Now()
	// The Eviction API itself refuses, as it does the drain's requests.
	err := r.api.Client.CoreV1().Pods("serving").EvictV1(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s while the drain waits: %v, want 429 Too Many Requests from the disruption budget", pod.Name, err)
	}

	// While the drain waits, the budget allows nothing and the pod keeps running on the cordoned node.
	var evictionRefused bool
	for time.Since(drainSeen) < 4*time.Second {
		pods := podsOn(t, r.api, "serving", old)
		for _, p := range pods {
			if p.UID == pod.UID && p.DeletionTimestamp != nil {
				t.Fatalf("pod %s marked for deletion %s into the drain, while its budget allows no disruption", p.Name, time.Since(drainSeen).Round(time.Millisecond))
			}
		}
		pdb, err := r.api.Client.PolicyV1().PodDisruptionBudgets("serving").Get(context.Background(), "inference", metav1.GetOptions{})
		evictionRefused = evictionRefused || (err == nil && pdb.Status.DisruptionsAllowed == 0 && len(pods) == 1)
		time.Sleep(100 * time.Millisecond)
	}
	until(t, "the old node deleted", 60*time.Second, func() bool { return r.log.order("deleted "+old) == nil })
	if !evictionRefused {
		t.Error("never saw the budget at 0 disruptions with the pod on the draining node")
	}
	until(t, "the upgrade operation DONE", 30*time.Second, func() bool {
		_, op := r.pool(t, "l4")
		return op.GetStatus() == containerpb.Operation_DONE
	})
	np, op := r.pool(t, "l4")
	if nodesDone(op) != 1 || np.GetVersion() != upgradeTarget {
		t.Errorf("after the timed-out drain: %d nodes done, pool at %s; want 1, %s", nodesDone(op), np.GetVersion(), upgradeTarget)
	}
	until(t, "inference running on the new node", 30*time.Second, func() bool {
		return runningPods(podsOn(t, r.api, "serving", fresh)) == 1
	})
}

// TestDriverPlaysFlexStartEnd: a flex-start VM carries its end (annotation, RFC 3339, its maximum run duration after
// its creation) and GKE's flex-start labels; GKE deletes it no earlier than that end and, as the pool asks,
// creates a new VM in its place with an end of its own.
func TestDriverPlaysFlexStartEnd(t *testing.T) {
	r := startUpgradeRig(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke: {nodeCreation: 200ms, podShutdown: 100ms}
nodePools:
  - {name: dws, machineType: a3-highgpu-8g, accelerator: nvidia-h100-80gb, acceleratorCount: 8, nodes: 1, maxRunDuration: 4s, replaceAtEnd: true}
workloads:
  - {name: train, namespace: training, kind: Job, nodePools: [dws]}
`)
	first, second := r.sc.NodeName("dws", 0), r.sc.ReplacementNodeName("dws", 0, 1)
	until(t, "the flex-start node seen", 30*time.Second, func() bool { return r.log.node(first) != nil })
	n := r.log.node(first)
	if n.Labels[LabelFlexStart] != "true" || n.Labels[LabelMaxRunDuration] != "4" {
		t.Errorf("labels %v: want %s=true and %s=4", n.Labels, LabelFlexStart, LabelMaxRunDuration)
	}
	end, err := time.Parse(time.RFC3339, n.Annotations[AnnotationMachineTermination])
	if err != nil {
		t.Fatalf("annotation %s: %v", AnnotationMachineTermination, err)
	}
	// Both are whole seconds: the end is the run duration after the creation, give or take the second it straddles.
	if d := end.Sub(n.CreationTimestamp.Time); d < 3*time.Second || d > 5*time.Second {
		t.Errorf("end %s is %s after the creation %s, want 4s", end, d, n.CreationTimestamp.Time)
	}
	until(t, "the flex-start VM deleted", 30*time.Second, func() bool { return r.log.order("deleted "+first) == nil })
	if deleted := time.Now(); deleted.Before(end) {
		t.Errorf("deleted at %s, before its end %s", deleted, end)
	}
	until(t, "the new VM Ready", 30*time.Second, func() bool { return r.log.order("deleted "+first, "ready "+second) == nil })
	next, err := time.Parse(time.RFC3339, r.log.node(second).Annotations[AnnotationMachineTermination])
	if err != nil || !next.After(end) {
		t.Errorf("the new VM's end %q (%v), want one after %s", r.log.node(second).Annotations[AnnotationMachineTermination], err, end)
	}
	until(t, "the Job's pod on the new VM", 30*time.Second, func() bool { return runningPods(podsOn(t, r.api, "training", second)) == 1 })
}
