package actions

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/alertmanager/template"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestFleet runs the fleet-scale properties against one real kube-apiserver: what waiting alerts and drains cost
// in API requests, and instances that share a cluster.
func TestFleet(t *testing.T) {
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	t.Run("WaitingAndDrainingCostNoReads", func(t *testing.T) { testWaitingCostsNoReads(t, api, kl) })
	t.Run("InstancesKeepToTheirOwnWork", func(t *testing.T) { testInstancesKeepToTheirOwn(t, api) })
	t.Run("RequestNotStartedEnds", func(t *testing.T) { testRequestNotStarted(t, api) })
	t.Run("EmptyDirPodsKept", func(t *testing.T) { testEmptyDirKept(t, api) })
	t.Run("NodeGoneMidDrainCounted", func(t *testing.T) { testNodeGoneCounted(t, api, kl) })
}

// testRequestNotStarted: a perform-maintenance request GKE never takes up ends after
// performMaintenance.startDeadline: failed with reason not_started, the request withdrawn, our cordon lifted.
func testRequestNotStarted(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("notstarted")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, "performMaintenance: {drainFirst: true, startDeadline: 2s}\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.PerformMaintenance, true, startsAt))
	c.waitNode(node, "perform-maintenance requested", inState(nodeview.MaintenanceRequested))
	n := c.waitNode(node, "the request GKE did not take up ended", inState(nodeview.Failed))
	rec := nodeview.Of(n).Record
	if !strings.HasPrefix(rec.Reason, "not_started") || n.Spec.Unschedulable || rec.CordonedBy != "" || nodeview.Of(n).PerformMaintenanceRequested {
		t.Errorf("reason %q, unschedulable %v, cordoned-by %q, labels %v", rec.Reason, n.Spec.Unschedulable, rec.CordonedBy, n.Labels)
	}
	r.waitMetric("counted as failed", "gke_disruption_actions_total", map[string]string{"action": "perform-maintenance", "result": "failed"}, 1)
	r.waitMetric("the slot is free", "gke_disruption_actions_in_progress", map[string]string{"action": "perform-maintenance"}, 0)
	c.waitEvent(node, "not_started")
}

// testEmptyDirKept: with deleteEmptyDirData: false, pods with emptyDir volumes stay and the rest are evicted; the
// node's record says which stayed.
func testEmptyDirKept(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("emptydir")
	ns := api.Namespace("emptydir")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "web", node, grace(1))
	c.pod(ns, "cache", node, grace(1), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	})
	policy := fmt.Sprintf("pools: [{name: %[1]s, nodeSelector: {pool: %[1]s}}]\ndrain: {timeout: 20s, evictionRetryDelay: 200ms, deleteEmptyDirData: false}\n", pool)
	r := startReplica(t, api, policy, replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	n := c.waitNode(node, "drained", inState(nodeview.Done))
	if reason := nodeview.Of(n).Record.Reason; !strings.Contains(reason, ns+"/cache") || strings.Contains(reason, "/web") {
		t.Errorf("the record should name the pod left in place, and only it: %q", reason)
	}
	if _, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "web", metav1.GetOptions{}); err == nil {
		t.Error("pod web, without emptyDir, was not evicted")
	}
	if p, err := api.Client.CoreV1().Pods(ns).Get(context.Background(), "cache", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod cache, with emptyDir data, should stay: %v", err)
	}
}

// testNodeGoneCounted: a node deleted mid-drain (a Spot VM preempted) ends its work, counted as skipped.
func testNodeGoneCounted(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("gone")
	ns := api.Namespace("gone")
	node := unique("spot")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	c.pod(ns, "web", node, grace(1))
	kl.setPaused(true)
	defer kl.setPaused(false)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "draining", inState(nodeview.Draining))
	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("counted as skipped", "gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}, 1)
	r.waitMetric("no longer in progress", "gke_disruption_actions_in_progress", map[string]string{"action": "drain"}, 0)
}

// requestCounter counts a replica's GET requests by path.
type requestCounter struct {
	mu   sync.Mutex
	gets map[string]int
}

func (c *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && !strings.Contains(req.URL.RawQuery, "watch=") {
			c.mu.Lock()
			c.gets[req.URL.Path]++
			c.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

func (c *requestCounter) count(match func(path string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for p, k := range c.gets {
		if match(p) {
			n += k
		}
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// testWaitingCostsNoReads: alerts waiting for a pool's budget are decided again from the watch cache, not read from
// the API on a timer; and a drain follows its pods with one list per node, not a read of each pod every second.
func testWaitingCostsNoReads(t *testing.T, api *testenv.APIServer, kl *kubelet) {
	c := newCluster(t, api)
	pool := unique("budget")
	ns := api.Namespace("budget")
	var names []string
	var alerts []template.Alert
	for i := range 6 {
		name := fmt.Sprintf("%s-node-%d", pool, i)
		c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
		names = append(names, name)
		alerts = append(alerts, alert(name, nodeview.Drain, false, startsAt))
	}
	for i := range 3 {
		c.pod(ns, fmt.Sprintf("work-%d", i), names[0], grace(1))
	}
	kl.setPaused(true)
	defer kl.setPaused(false)
	counter := &requestCounter{gets: map[string]int{}}
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{wrapTransport: counter.wrap})
	r.waitLeading()
	mustAccept(t, r, alerts[0])
	c.waitNode(names[0], "draining", inState(nodeview.Draining))
	mustAccept(t, r, alerts[1:]...)
	r.waitMetric("five alerts waiting for the pool's budget", "gke_disruption_actions_waiting",
		map[string]string{"action": "drain", "pool": pool, "reason": "pool_budget"}, 5)
	waitingReads := func() int {
		return counter.count(func(p string) bool {
			for _, n := range names[1:] {
				if strings.HasSuffix(p, "/nodes/"+n) {
					return true
				}
			}
			return false
		})
	}
	podReads := func() int {
		return counter.count(func(p string) bool { return strings.Contains(p, "/namespaces/"+ns+"/pods/") })
	}
	before := waitingReads()
	settle() // several requeue intervals of the test replica, with the evicted pods held by the kubelet
	if got := waitingReads() - before; got > 0 {
		t.Errorf("waiting alerts read their nodes from the API %d times while nothing changed", got)
	}
	if got := podReads(); got > 0 {
		t.Errorf("the drain read single pods %d times; it should follow them with one list per node", got)
	}
	kl.setPaused(false)
	c.waitNode(names[0], "drained", inState(nodeview.Done))
}

// testInstancesKeepToTheirOwn: three actions instances share a cluster and a pool, each with its own Lease in its
// own namespace: a live one that gets the alerts, a dry-run shadow that gets the same alerts, and a second live one
// whose pools overlap. Only the first writes anything on the nodes; the group ends as one record; the second
// reports the overlap.
func testInstancesKeepToTheirOwn(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("owned")
	var names []string
	var alerts []template.Alert
	for i := range 3 {
		name := fmt.Sprintf("%s-node-%d", pool, i)
		c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
		names = append(names, name)
		alerts = append(alerts, alert(name, nodeview.Drain, false, startsAt))
	}
	// Every version of every node, as the API server saw it.
	ctx, cancel := context.WithCancel(context.Background())
	w, err := api.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		writers  = map[string]bool{}
		reasons  []string
		versions atomic.Int64
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				versions.Add(1)
				r := nodeview.Of(n).Record
				mu.Lock()
				for _, who := range []string{r.ClaimedBy, r.CordonedBy, r.Owner} {
					if who != "" {
						writers[who] = true
					}
				}
				if r.Reason != "" {
					reasons = append(reasons, n.Name+": "+r.Reason)
				}
				mu.Unlock()
			}
		}
	}()
	defer func() { cancel(); w.Stop(); <-done }()

	policy := parallelPolicy(pool, 100)
	liveNS, shadowNS, otherNS := api.Namespace("live"), api.Namespace("shadow"), api.Namespace("other")
	live := startReplica(t, api, policy, replicaOpts{identity: "live-0", lease: "actions", leaseNamespace: liveNS})
	shadow := startReplica(t, api, policy, replicaOpts{identity: "shadow-0", lease: "actions", leaseNamespace: shadowNS, dryRun: true})
	other := startReplica(t, api, policy, replicaOpts{identity: "other-0", lease: "actions", leaseNamespace: otherNS})
	for _, r := range []*replica{live, shadow, other} {
		r.waitLeading()
	}
	// Alertmanager sends the same notification to the shadow and to the live instance.
	body := payload(t, alerts...)
	mustAccept(t, shadow, alerts...)
	shadow.waitMetric("the shadow decided the group", "gke_disruption_actions_total",
		map[string]string{"action": "drain", "result": "dry_run"}, 3)
	mustAccept(t, live, alerts...)
	owner := liveNS + "/actions"
	group := strings.Join(names, ",")
	for _, name := range names {
		c.waitNode(name, name+" drained by the live instance", func(n *corev1.Node) error {
			r := nodeview.Of(n).Record
			if r.Phase != nodeview.Done || r.Owner != owner || r.ClaimedBy != "live-0" || strings.Join(r.Group, ",") != group {
				return fmt.Errorf("state %q, owner %q, claimed by %q, group %v", r.Phase, r.Owner, r.ClaimedBy, r.Group)
			}
			return nil
		})
	}
	other.waitMetric("the overlapping live instance reports the other's work", "gke_disruption_actions_overlaps_total",
		map[string]string{"owner": owner}, 3)
	c.waitEvent(names[0], "DisruptionActionOverlap")
	// Repeats keep coming; the shadow and the other instance keep looking.
	send(context.Background(), shadow.url, body)
	send(context.Background(), live.url, body)
	settle()

	mu.Lock()
	defer mu.Unlock()
	for who := range writers {
		if who != "live-0" && who != owner {
			t.Errorf("%s wrote on a node the live instance owns", who)
		}
	}
	for _, reason := range reasons {
		t.Errorf("work ended early: %s", reason)
	}
	c.acceptedAtMostOnce(names)
	for _, name := range names {
		if got := c.countEvents(name, "DisruptionActionAccepted"); got != 1 {
			t.Errorf("node %s accepted %d times", name, got)
		}
	}
}
