package actions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestOpportunisticEdges: what an operator's cluster does to opportunistic maintenance mid-work: pods bound while a
// node drains, a slice host lost to a pod, policy reloads, GKE changing its mind, new nodes, a new leader.
func TestOpportunisticEdges(t *testing.T) {
	t.Parallel() // its own API server
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	t.Run("NewNodeWaitsNodeIdleTimeFromCreation", func(t *testing.T) { testOppNewNodeIdleClock(t, api) })
	t.Run("AcceleratorPodBoundDuringDrainIsNotLeftToMaintenance", func(t *testing.T) { testOppPodBoundDuringDrain(t, api, kl) })
	t.Run("SliceHostLostToAPodAbandonsTheWholeSlice", func(t *testing.T) { testOppSliceAbandonedAsWhole(t, api) })
	t.Run("WaitingGaugeClearedWhenOpportunisticRemoved", func(t *testing.T) { testOppWaitingAfterReload(t, api) })
	t.Run("ReloadedAcceleratorResourcesKeepNodeBusy", func(t *testing.T) { testOppReloadedResources(t, api) })
	t.Run("ClaimRetryHonoursOptOut", func(t *testing.T) { testOppClaimRetry(t, api, optOut) })
	t.Run("ClaimRetryHonoursCanRescheduleFalse", func(t *testing.T) { testOppClaimRetry(t, api, notReschedulable) })
	t.Run("CanRescheduleFalseDuringDrainIsNotRequested", func(t *testing.T) { testOppChangedDuringDrain(t, api, kl, notReschedulable) })
	t.Run("OptOutDuringDrainIsNotRequested", func(t *testing.T) { testOppChangedDuringDrain(t, api, kl, optOut) })
	t.Run("DryRunSwitchedOnDuringDrainRequestsNothing", func(t *testing.T) { testOppDryRunDuringDrain(t, api, kl) })
	t.Run("PodBeingEvictedIsNotAPodThatLanded", func(t *testing.T) { testOppTerminatingPodIsNotLanded(t, api, kl) })
	t.Run("EmptyAcceleratorResourcesEvictsGPUJobs", func(t *testing.T) { testOppEmptyResources(t, api) })
	t.Run("PodWatchRelistRestartsTheIdleClock", func(t *testing.T) { testOppRelistIdleClock(t, api) })
}

// TestOpportunisticEdgesThatHold covers more of what the world does to opportunistic maintenance mid-work.
func TestOpportunisticEdgesThatHold(t *testing.T) {
	t.Parallel() // its own API server
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	t.Run("NewLeaderWaitsNodeIdleTime", func(t *testing.T) { testOppNewLeaderIdleClock(t, api) })
	t.Run("ConfiguredResourceOnlyAndInitContainerKeepNodeBusy", func(t *testing.T) { testOppConfiguredResource(t, api) })
	t.Run("AnnouncementVanishedDuringDrain", func(t *testing.T) { testOppVanishedDuringDrain(t, api, kl) })
	t.Run("AnnouncementVanishedAfterRequest", func(t *testing.T) { testOppVanishedAfterRequest(t, api) })
	t.Run("OpportunisticRemovedMidWorkCarriesOn", func(t *testing.T) { testOppRemovedMidWork(t, api) })
	t.Run("ClusterCapSharedWithAlerts", func(t *testing.T) { testOppClusterCapWithAlerts(t, api, kl) })
}

// oppPool is a one-pool policy with opportunistic maintenance.
func oppPool(pool, idle string, minNodes int, extra string) string {
	return fmt.Sprintf(`%[4]s
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 4
    opportunistic: {nodeIdleTime: %[2]s, minNodes: %[3]d, window: 336h}
drain: {timeout: 30s, evictionRetryDelay: 200ms}
`, pool, idle, minNodes, extra)
}

func requesting(resourceName string, init bool) podOpt {
	return func(p *corev1.Pod) {
		one := resource.MustParse("1")
		res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(resourceName): one},
			Limits: corev1.ResourceList{corev1.ResourceName(resourceName): one}}
		if init {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10", Resources: res}}
			return
		}
		p.Spec.Containers[0].Resources = res
	}
}

// runningPod reports whether the pod exists and is not being deleted.
func runningPod(t *testing.T, api *testenv.APIServer, ns, name string) bool {
	t.Helper()
	p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p.DeletionTimestamp == nil
}

func acceptedAt(t *testing.T, n *corev1.Node) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, n.Annotations[nodeview.AnnotationAcceptedAt])
	if err != nil {
		t.Fatalf("accepted-at of %s: %v", n.Name, err)
	}
	return at
}

// requestedOrEnded waits until the node's work either asked GKE for maintenance or ended.
func (c *cluster) requestedOrEnded(name string) *corev1.Node {
	c.t.Helper()
	return c.waitNode(name, "perform-maintenance requested or work ended", func(n *corev1.Node) error {
		r := nodeview.Of(n).Record
		if nodeview.Of(n).PerformMaintenanceRequested || r.Phase == nodeview.Done || r.Phase == nodeview.Failed {
			return nil
		}
		return fmt.Errorf("state %q, labels %v", r.Phase, n.Labels)
	})
}

// nodeChange is a change GKE or an operator makes to a node while the service works on it.
type nodeChange struct {
	name   string
	change func(*corev1.Node)
}

var (
	optOut = nodeChange{"operator opts the node out", func(n *corev1.Node) {
		n.Labels[gke.LabelOpportunisticDisable] = "true"
	}}
	// notReschedulable keeps the same window (the same maintenance) and says it can no longer be started on request.
	notReschedulable = nodeChange{"GKE says the maintenance can no longer be rescheduled", func(n *corev1.Node) {
		n.Annotations[gke.AnnotationUpcomingMaintenance] = strings.Replace(n.Annotations[gke.AnnotationUpcomingMaintenance],
			`"can_reschedule":"true"`, `"can_reschedule":"false"`, 1)
	}}
)

// Guards against this: a node that joins the cluster (autoscaler scale-up, or a node re-created under the same name) is taken at
// once when the leader has run longer than nodeIdleTime, though docs/configuration.md says idleness counts from
// the node's creation too. An operator sees a GPU node that the autoscaler just added for a pending pod cordoned
// within a second, and the pod left pending.
func testOppNewNodeIdleClock(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppnew")
	const idle = 6 * time.Second
	r := startReplica(t, api, oppPool(pool, "6s", 0, ""), replicaOpts{})
	r.waitLeading()
	time.Sleep(idle + time.Second) // the leader's pod watch has run longer than nodeIdleTime
	created := c.node(unique("gpu"), map[string]string{"pool": pool}, announced(96*time.Hour))
	n := c.waitNode(created.Name, "taken", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken")
		}
		return nil
	})
	// The creation timestamp has whole seconds: allow one.
	if after := acceptedAt(t, n).Sub(created.CreationTimestamp.Time); after < idle-time.Second {
		t.Errorf("node taken %s after its creation, want at least nodeIdleTime %s", after.Round(time.Millisecond), idle)
	}
}

// Guards against this: the drain lists the node's pods once, right after the cordon; an accelerator pod bound to the cordoned
// node after that (a DaemonSet pod or a directly bound pod tolerates the cordon, and the scheduler's bind can trail
// it) is neither checked nor evicted, and perform-maintenance=true is set with it running. An operator sees a GPU
// job killed by GKE's maintenance that the service started "because the node was idle".
func testOppPodBoundDuringDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c, _, _, ns, node := startSlowOpportunisticDrain(t, api, kl, "oppbound")
	c.pod(ns, "trainer", node, usingGPU())
	kl.setPaused(false)
	n := c.requestedOrEnded(node)
	if nodeview.Of(n).PerformMaintenanceRequested && runningPod(t, api, ns, "trainer") {
		t.Errorf("perform-maintenance=true requested while accelerator pod %s/trainer runs on %s", ns, node)
	}
}

// Guards against this: an accelerator pod on one host of a multi-host TPU slice abandons only that host; the other hosts of the
// claim go on to perform-maintenance, and GKE maintains a slice as a whole. An operator sees the TPU job that
// reached the slice interrupted by maintenance the service said was abandoned for it.
func testOppSliceAbandonedAsWhole(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppsliceab")
	ns := api.Namespace("oppsliceab")
	slice := unique("slice")
	hosts := []string{slice + "-0", slice + "-1"}
	for _, h := range hosts {
		c.node(h, map[string]string{"pool": pool}, announced(96*time.Hour), tpuHost(slice), func(n *corev1.Node) {
			// As a leader leaves the slice when it claimed it and stopped before cordoning.
			n.Annotations[nodeview.AnnotationAction] = string(nodeview.OpportunisticMaintenance)
			n.Annotations[nodeview.AnnotationState] = string(nodeview.Accepted)
			n.Annotations[nodeview.AnnotationOpportunistic] = "true"
			n.Annotations[nodeview.AnnotationGroup] = strings.Join(hosts, ",")
			n.Annotations[nodeview.AnnotationMaintenance] = nodeview.Of(n).Maintenance.Key()
		})
	}
	c.pod(ns, "worker-0", hosts[0], usingTPU())
	r := startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{})
	r.waitLeading()
	c.waitNode(hosts[0], "host with the pod abandoned", inState(nodeview.Done))
	n := c.requestedOrEnded(hosts[1])
	if nodeview.Of(n).PerformMaintenanceRequested {
		t.Errorf("%s asked GKE for maintenance while %s of its slice runs %s/worker-0: a slice is maintained as a whole", hosts[1], hosts[0], ns)
	}
}

// Guards against this: gke_disruption_actions_waiting{action="opportunistic-maintenance"} keeps the count of a pool whose
// opportunistic maintenance was removed by a reload (or a pool renamed) for as long as the replica leads. An
// operator sees a node "waiting" forever for something nothing will do.
func testOppWaitingAfterReload(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppgauge")
	c.node(pool+"-a", map[string]string{"pool": pool}, announced(96*time.Hour))
	c.node(pool+"-b", map[string]string{"pool": pool})
	day := time.Now().UTC().Add(72 * time.Hour).Weekday().String()[:3]
	closed := fmt.Sprintf(`windows: [{days: [%s], start: "00:00", end: "24:00", timezone: UTC}]`, day)
	r := startReplica(t, api, oppPool(pool, "1s", 1, closed), replicaOpts{})
	r.waitLeading()
	waiting := map[string]string{"action": "opportunistic-maintenance", "pool": pool, "reason": "window"}
	r.waitMetric("the idle node waits for a window", "gke_disruption_actions_waiting", waiting, 1)

	cfg, err := config.Parse([]byte(fmt.Sprintf("%s\npools: [{name: %s, nodeSelector: {pool: %[2]s}}]\n", closed, pool)))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	testenv.Eventually(t, 10*time.Second, "nothing waits once the pool has no opportunistic maintenance", func() error {
		if got := r.metric("gke_disruption_actions_waiting", waiting); got != 0 {
			return fmt.Errorf("gke_disruption_actions_waiting%v = %v, want 0", waiting, got)
		}
		return nil
	})
}

// Guards against this: the pod watch keeps the acceleratorResources it started with, while the check after the cordon reads the
// reloaded list. After a reload adds a resource, a node running a pod of it looks idle forever: it is claimed,
// cordoned, found busy, uncordoned, and claimed again every pass. An operator sees the node flap between cordoned and
// not every 30 s, with Events each time, while the job on it cannot place new pods.
func testOppReloadedResources(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppres")
	ns := api.Namespace("oppres")
	node := unique("fpga")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	c.pod(ns, "job", node, requesting("example.com/fpga", false))
	r := startReplica(t, api, oppPool(pool, "1s", 0, "paused: true"), replicaOpts{})
	r.waitLeading()
	r.waitMetric("picked and paused: the pod watch runs", "gke_disruption_actions_waiting",
		map[string]string{"action": "opportunistic-maintenance", "pool": pool, "reason": "paused"}, 1)

	cfg, err := config.Parse([]byte(oppPool(pool, "1s", 0, "acceleratorResources: [nvidia.com/gpu, google.com/tpu, example.com/fpga]")))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	time.Sleep(5 * time.Second) // ten passes
	if got := c.countEvents(node, "DisruptionActionAccepted"); got > 1 {
		t.Errorf("node running an %s pod claimed %d times in 5s after the reload: %q", "example.com/fpga", got, c.events(node))
	}
}

// injectBeforeClaim runs change on the node (through the test's own client) just before the replica's first claim
// patch reaches the API server, as if GKE or an operator had changed the node after the decision read it.
type injectBeforeClaim struct {
	rt     http.RoundTripper
	node   string
	change func()
	mu     sync.Mutex
	done   bool
}

func (i *injectBeforeClaim) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/nodes/"+i.node) && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		i.mu.Lock()
		first := !i.done && bytes.Contains(body, []byte(`"`+nodeview.AnnotationState+`":"accepted"`))
		i.done = i.done || first
		i.mu.Unlock()
		if first {
			i.change()
		}
	}
	return i.rt.RoundTrip(req)
}

func (i *injectBeforeClaim) injected() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.done
}

// Guards against this: when the claim's conditional patch conflicts, the node is read again and claimed if it is merely
// "claimable" (maintenance announced, no work on it): the opportunistic conditions (opt-out label, can_reschedule,
// window, GKE's own opportunistic config, idleness) are not asked again. An operator who labels a node
// opportunistic-disable=true, or GKE turning can_reschedule false, at the moment of the decision, sees the node
// cordoned and drained anyway.
func testOppClaimRetry(t *testing.T, api *testenv.APIServer, ch nodeChange) {
	c := newCluster(t, api)
	pool := unique("oppretry")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	inject := &injectBeforeClaim{node: node, change: func() { c.updateNode(node, ch.name, ch.change) }}
	r := startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{wrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		inject.rt = rt
		return inject
	}})
	r.waitLeading()
	testenv.Eventually(t, waitLong, "the claim reached the API server", func() error {
		if !inject.injected() {
			return fmt.Errorf("no claim yet")
		}
		return nil
	})
	settle()
	if n := c.get(node); taken(n) || n.Spec.Unschedulable {
		t.Errorf("%s just before the claim, yet the node was claimed: unschedulable %v, annotations %v", ch.name, n.Spec.Unschedulable, n.Annotations)
	}
}

// Guards against this: what GKE or the operator changes while the node drains is not asked again before the request: only that
// the maintenance is the same one. With can_reschedule now false GKE ignores the request and the node stays cordoned
// and empty until GKE's own maintenance, up to `window` (14 days) later; an opt-out label is overridden.
func testOppChangedDuringDrain(t *testing.T, api *testenv.APIServer, kl *kubelet, ch nodeChange) {
	c, _, _, _, node := startSlowOpportunisticDrain(t, api, kl, "oppmid")
	c.updateNode(node, ch.name, ch.change)
	kl.setPaused(false)
	n := c.requestedOrEnded(node)
	if nodeview.Of(n).PerformMaintenanceRequested {
		t.Errorf("%s during the drain, yet perform-maintenance=true was requested (node cordoned: %v)", ch.name, n.Spec.Unschedulable)
	}
}

// startSlowOpportunisticDrain takes an idle GPU node into opportunistic maintenance and holds its drain: the
// node's one pod (no accelerator) is being evicted, and the kubelet keeps it until the test lets it go.
func startSlowOpportunisticDrain(t *testing.T, api *testenv.APIServer, kl *kubelet, prefix string) (c *cluster, r *replica, pool, ns, node string) {
	t.Helper()
	c = newCluster(t, api)
	pool, ns, node = unique(prefix), api.Namespace(prefix), unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	c.pod(ns, "web", node, grace(30))
	kl.setPaused(true)
	t.Cleanup(func() { kl.setPaused(false) })
	r = startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{})
	r.waitLeading()
	waitTerminating(t, api, ns, "web") // cordoned, checked for accelerator pods, evicting
	return c, r, pool, ns, node
}

// Guards against this: dryRun: true, switched on by a reload while an opportunistic drain runs, does not stop it: the drain
// finishes and sets perform-maintenance=true; and from then on, in dry run, our cordon is never lifted. An operator who
// flips to dry run to stop all changes sees the service start GKE maintenance anyway.
func testOppDryRunDuringDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c, r, pool, ns, node := startSlowOpportunisticDrain(t, api, kl, "oppdrymid")
	cfg, err := config.Parse([]byte(oppPool(pool, "1s", 0, "dryRun: true")))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	kl.setPaused(false)
	testenv.Eventually(t, waitLong, "evicted pod gone", func() error {
		if _, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	settle()
	if n := c.get(node); nodeview.Of(n).PerformMaintenanceRequested {
		t.Errorf("perform-maintenance=true set after dryRun: true was loaded: labels %v", n.Labels)
	}
}

// Holds: a replica that becomes leader waits a full nodeIdleTime from then, whatever the previous leader saw.
func testOppNewLeaderIdleClock(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppleader")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	const idle = 5 * time.Second
	lease := unique("lease")
	first := startReplica(t, api, oppPool(pool, "5s", 0, "paused: true"), replicaOpts{identity: "first", lease: lease})
	first.waitLeading()
	second := startReplica(t, api, oppPool(pool, "5s", 0, ""), replicaOpts{identity: "second", lease: lease})
	first.waitMetric("the first leader's watch sees the node idle", "gke_disruption_actions_waiting",
		map[string]string{"action": "opportunistic-maintenance", "pool": pool, "reason": "paused"}, 1)
	time.Sleep(idle) // idle for longer than nodeIdleTime on the first leader's watch
	stopped := time.Now()
	first.stop()
	second.waitLeading()
	n := c.waitNode(node, "taken by the new leader", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken")
		}
		return nil
	})
	if after := acceptedAt(t, n).Sub(stopped); after < idle {
		t.Errorf("taken %s after the change of leader, want at least nodeIdleTime %s", after.Round(time.Millisecond), idle)
	}
}

// Holds: a pod requesting only a resource of the configured acceleratorResources list, or an accelerator only in an
// init container, keeps its node busy; the node goes nodeIdleTime after the pod has gone.
func testOppConfiguredResource(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppcustom")
	ns := api.Namespace("oppcustom")
	custom, init := pool+"-custom", pool+"-init"
	befores := []*corev1.Node{
		c.node(custom, map[string]string{"pool": pool}, announced(96*time.Hour)),
		c.node(init, map[string]string{"pool": pool}, announced(97*time.Hour)),
	}
	c.pod(ns, "custom", custom, requesting("example.com/fpga", false))
	c.pod(ns, "init", init, requesting("nvidia.com/gpu", true))
	r := startReplica(t, api, oppPool(pool, "2s", 0, "acceleratorResources: [nvidia.com/gpu, example.com/fpga]"), replicaOpts{})
	r.waitLeading()
	time.Sleep(4 * time.Second) // past nodeIdleTime: a wrong pick would show by now
	for _, b := range befores {
		c.untouched(b, "an accelerator pod runs on it")
	}
	if err := api.Client.CoreV1().Pods(ns).Delete(context.Background(), "custom", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	n := c.waitNode(custom, "taken once the pod has gone", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken")
		}
		return nil
	})
	if after := acceptedAt(t, n).Sub(gone); after < 2*time.Second {
		t.Errorf("taken %s after the pod went, want nodeIdleTime 2s", after)
	}
	c.untouched(befores[1], "its init container requests a GPU")
}

// Holds: GKE withdrawing the announcement while the node drains ends the work and lifts our cordon.
func testOppVanishedDuringDrain(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c, r, _, _, node := startSlowOpportunisticDrain(t, api, kl, "oppvanish")
	c.updateNode(node, "GKE withdrawing the maintenance", func(n *corev1.Node) { delete(n.Annotations, gke.AnnotationUpcomingMaintenance) })
	kl.setPaused(false)
	c.waitNode(node, "abandoned and uncordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable || nodeview.Of(n).PerformMaintenanceRequested {
			return fmt.Errorf("unschedulable %v, labels %v", n.Spec.Unschedulable, n.Labels)
		}
		return nil
	})
	r.waitMetric("counted as skipped", "gke_disruption_actions_total", map[string]string{"action": "opportunistic-maintenance", "result": "skipped"}, 1)
}

// Holds: GKE withdrawing the announcement after the request, before it starts, withdraws our request and cordon.
func testOppVanishedAfterRequest(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppvanreq")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	r := startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{})
	r.waitLeading()
	c.waitNode(node, "requested", func(n *corev1.Node) error {
		if !nodeview.Of(n).PerformMaintenanceRequested {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})
	c.updateNode(node, "GKE withdrawing the maintenance", func(n *corev1.Node) { delete(n.Annotations, gke.AnnotationUpcomingMaintenance) })
	c.waitNode(node, "request withdrawn and uncordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable || nodeview.Of(n).PerformMaintenanceRequested {
			return fmt.Errorf("unschedulable %v, labels %v", n.Spec.Unschedulable, n.Labels)
		}
		return nil
	})
}

// Holds: a reload that removes opportunistic: lets work already started finish, and GKE's finish lifts our cordon.
func testOppRemovedMidWork(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppremoved")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	r := startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{})
	r.waitLeading()
	c.waitNode(node, "requested", func(n *corev1.Node) error {
		if !nodeview.Of(n).PerformMaintenanceRequested {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})
	cfg, err := config.Parse([]byte(fmt.Sprintf("pools: [{name: %s, nodeSelector: {pool: %[1]s}}]\n", pool)))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	c.startMaintenanceAndWaitNoted(node)
	c.updateNode(node, "GKE finishing", func(n *corev1.Node) {
		delete(n.Labels, gke.LabelActiveNodeMaintenance)
		delete(n.Annotations, gke.AnnotationUpcomingMaintenance)
		n.Spec.Taints = nil
	})
	c.waitNode(node, "done and uncordoned", func(n *corev1.Node) error {
		if err := inState(nodeview.Done)(n); err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
}

// Holds: alerts and opportunistic maintenance share maxDisruptedNodes: while an alert's drain holds the only slot,
// the idle node waits (cluster_cap, one Event), and it goes once the slot is free.
func testOppClusterCapWithAlerts(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool, other := unique("oppcap"), unique("oppcapdrain")
	ns := api.Namespace("oppcap")
	idleNode, drained := unique("gpu"), unique("cpu")
	c.node(idleNode, map[string]string{"pool": pool}, announced(96*time.Hour))
	c.node(drained, map[string]string{"pool": other}, withScheduledMaintenance)
	c.pod(ns, "web", drained, grace(30))
	// Count the cap against this test's two nodes only: the API server's other nodes are cordoned or gone by now.
	kl.setPaused(true)
	t.Cleanup(func() { kl.setPaused(false) })
	r := startReplica(t, api, fmt.Sprintf(`pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    opportunistic: {nodeIdleTime: 2s, minNodes: 0, window: 336h}
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
maxDisruptedNodes: %[3]d
drain: {timeout: 30s, evictionRetryDelay: 200ms}
`, pool, other, disruptedNow(t, api)+1), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(drained, nodeview.Drain, false, startsAt))
	waitTerminating(t, api, ns, "web")
	waiting := map[string]string{"action": "opportunistic-maintenance", "pool": pool, "reason": "cluster_cap"}
	r.waitMetric("the idle node waits for the cap", "gke_disruption_actions_waiting", waiting, 1)
	c.waitEvent(idleNode, "opportunistic-maintenance waits: cluster-wide cap")
	if taken(c.get(idleNode)) {
		t.Fatal("taken beyond maxDisruptedNodes")
	}
	// The drain finishes and GKE's maintenance ends: the slot is free.
	kl.setPaused(false)
	c.waitNode(drained, "drained", inState(nodeview.Done))
	c.startMaintenanceAndWaitNoted(drained)
	c.finishMaintenance(drained)
	c.waitNode(drained, "uncordoned", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	c.waitNode(idleNode, "taken once the slot is free", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken")
		}
		return nil
	})
	r.waitMetric("no longer waiting", "gke_disruption_actions_waiting", waiting, 0)
	if got := c.countEvents(idleNode, "DisruptionActionWaiting"); got != 1 {
		t.Errorf("%d wait Events, want 1 per maintenance and reason: %q", got, c.events(idleNode))
	}
}

// Guards against this: the check after the cordon counts a pod that is being evicted (deletionTimestamp set) as an accelerator
// pod that "started using an accelerator before the cordon". A drain resumed by a new leader (or retried after an
// API error) while the GPU pod it evicted is still terminating abandons the work and uncordons: the GPU pod was
// evicted for nothing, and the Event blames the very pod the service evicted.
func testOppTerminatingPodIsNotLanded(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("oppterm")
	ns := api.Namespace("oppterm")
	node := unique("gpu")
	kl.setPaused(true)
	t.Cleanup(func() { kl.setPaused(false) })
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour), func(n *corev1.Node) {
		// As a leader leaves it when it stopped while its drain waited for the evicted pod to terminate.
		n.Spec.Unschedulable = true
		n.Annotations[nodeview.AnnotationAction] = string(nodeview.OpportunisticMaintenance)
		n.Annotations[nodeview.AnnotationState] = string(nodeview.Draining)
		n.Annotations[nodeview.AnnotationOpportunistic] = "true"
		n.Annotations[nodeview.AnnotationClaimedBy] = "previous-leader"
		n.Annotations[nodeview.AnnotationCordonedBy] = "previous-leader"
		n.Annotations[nodeview.AnnotationAcceptedAt] = nodeview.FormatTime(time.Now())
		n.Annotations[nodeview.AnnotationDrainStartedAt] = nodeview.FormatTime(time.Now())
		n.Annotations[nodeview.AnnotationMaintenance] = nodeview.Of(n).Maintenance.Key()
	})
	c.pod(ns, "trainer", node, usingGPU(), grace(30))
	if err := api.Client.CoreV1().Pods(ns).Delete(context.Background(), "trainer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTerminating(t, api, ns, "trainer") // evicted by the previous leader; the kubelet has not finished it
	r := startReplica(t, api, oppPool(pool, "1s", 0, ""), replicaOpts{})
	r.waitLeading()
	settle()
	kl.setPaused(false)
	n := c.requestedOrEnded(node)
	if reason := n.Annotations[nodeview.AnnotationReason]; strings.Contains(reason, "started using an accelerator") {
		t.Errorf("drain abandoned for the pod it evicted itself: %q (unschedulable %v)", reason, n.Spec.Unschedulable)
	}
}

// Guards against this (with config.TestAcceleratorResourcesEmptyIsNotSilent): `acceleratorResources:` left empty is accepted, and
// the node running a GPU job is taken as idle and drained: the job is evicted.
func testOppEmptyResources(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("oppempty")
	ns := api.Namespace("oppempty")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, announced(96*time.Hour))
	c.pod(ns, "trainer", node, usingGPU())
	policy := oppPool(pool, "1s", 0, "acceleratorResources:\n#  - nvidia.com/gpu")
	if _, err := config.Parse([]byte(policy)); err != nil {
		return // refused at start-up, naming the key: right
	}
	r := startReplica(t, api, policy, replicaOpts{})
	r.waitLeading()
	time.Sleep(3 * time.Second) // past nodeIdleTime: a wrong pick would show by now
	if !runningPod(t, api, ns, "trainer") {
		t.Errorf("GPU pod %s/trainer evicted for opportunistic maintenance of a node that was never idle", ns)
	}
}

// podWatchCutter breaks the replica's pod watch: while cut, pod watches fail; the first one after is answered with
// 410 Expired, as the API server answers a watch from a resource version it no longer has, so the informer lists
// pods again and never sees what came and went meanwhile.
type podWatchCutter struct {
	rt      http.RoundTripper
	mu      sync.Mutex
	cut     bool
	expire  bool
	watches int
	open    []io.Closer
}

func (w *podWatchCutter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/api/v1/pods") || req.URL.Query().Get("watch") != "true" {
		return w.rt.RoundTrip(req)
	}
	w.mu.Lock()
	if w.cut {
		w.mu.Unlock()
		return nil, fmt.Errorf("pod watch cut by the test")
	}
	if w.expire {
		w.expire = false
		w.mu.Unlock()
		body := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}` + "\n"
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	w.mu.Unlock()
	resp, err := w.rt.RoundTrip(req)
	if err == nil {
		w.mu.Lock()
		w.watches++
		w.open = append(w.open, resp.Body)
		w.mu.Unlock()
	}
	return resp, err
}

func (w *podWatchCutter) watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watches
}

func (w *podWatchCutter) breakWatch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut = true
	for _, c := range w.open {
		_ = c.Close()
	}
	w.open = nil
}

func (w *podWatchCutter) restore() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut, w.expire = false, true
}

// Guards against this: while the pod watch is away, and after it has had to list pods again (a gap longer than the API server's
// history: 410 Expired), a node keeps the idle time counted before the gap, though a GPU pod may have run on it
// during the gap, which neither the stale cache nor the new list can show. docs/configuration.md: "what ran before the watch is not known, so a new leader waits a
// full nodeIdleTime"; after a relist the same is unknown, yet the node goes at once. An operator sees a node whose
// job finished seconds ago (while the leader's watch was away) cordoned before the job's next pod arrives.
func testOppRelistIdleClock(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("opprelist")
	ns := api.Namespace("opprelist")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}) // no maintenance announced yet: nothing to take during the gap
	const idle = 8 * time.Second
	cutter := &podWatchCutter{}
	r := startReplica(t, api, oppPool(pool, "8s", 0, ""), replicaOpts{wrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		cutter.rt = rt
		return cutter
	}})
	r.waitLeading()
	testenv.Eventually(t, waitLong, "the pod watch runs", func() error {
		if cutter.watching() == 0 {
			return fmt.Errorf("no pod watch yet")
		}
		return nil
	})
	cutter.breakWatch()
	c.pod(ns, "job", node, usingGPU()) // runs and finishes while the watch is away
	if err := api.Client.CoreV1().Pods(ns).Delete(context.Background(), "job", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle) // longer than nodeIdleTime since the watch started
	c.updateNode(node, "GKE announcing maintenance", announced(96*time.Hour))
	relisted := time.Now()
	cutter.restore()
	n := c.waitNode(node, "taken", func(n *corev1.Node) error {
		if !taken(n) {
			return fmt.Errorf("not taken")
		}
		return nil
	})
	testenv.Eventually(t, waitLong, "the pod watch expired and listed pods again", func() error {
		cutter.mu.Lock()
		defer cutter.mu.Unlock()
		if cutter.expire {
			return fmt.Errorf("no pod watch since the gap")
		}
		return nil
	})
	if after := acceptedAt(t, n).Sub(relisted); after < idle {
		t.Errorf("taken %s after the pod watch listed pods again, want nodeIdleTime %s: a GPU pod ran there during the gap", after.Round(time.Millisecond), idle)
	}
}
