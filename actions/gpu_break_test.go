package actions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestGPUBreak tries adversarial interleavings against GPU-fault repairs: nodes re-created mid-repair, flapping
// and stale conditions, a leader killed between the ledger write and the claim, breaker resets, a damaged ledger,
// and a correlated storm whose conditions arrive late.
func TestGPUBreak(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("RecreatedAfterReport", func(t *testing.T) { testBreakRecreatedAfterReport(t, api) })
	t.Run("RecreatedBetweenClaimAndLabel", func(t *testing.T) { testBreakRecreatedBetweenClaimAndLabel(t, api) })
	t.Run("FlappingCondition", func(t *testing.T) { testBreakFlapping(t, api) })
	t.Run("UnreadableReason", func(t *testing.T) { testBreakUnreadable(t, api) })
	t.Run("StaleConditionAfterOwnRepair", func(t *testing.T) { testBreakStaleAfterRepair(t, api) })
	t.Run("StaleConditionNeverRepaired", func(t *testing.T) { testBreakStaleNeverRepaired(t, api) })
	t.Run("LeaderKilledBetweenLedgerAndClaim", func(t *testing.T) { testBreakLeaderKilled(t, api) })
	t.Run("ZombieLeaderClaimInFlight", func(t *testing.T) { testBreakZombieLeader(t, api) })
	t.Run("BreakerResetWhileRepeating", func(t *testing.T) { testBreakReset(t, api) })
	t.Run("PoolAndClusterBreakersTripped", func(t *testing.T) { testBreakBothBreakers(t, api) })
	t.Run("LedgerGarbage", func(t *testing.T) { testBreakLedgerGarbage(t, api) })
	t.Run("LedgerDeletedAfterRepair", func(t *testing.T) { testBreakLedgerDeletedAfterRepair(t, api) })
	t.Run("LedgerEmptiedData", func(t *testing.T) { testBreakLedgerEmptied(t, api) })
	t.Run("LedgerDeletedWhileTripped", func(t *testing.T) { testBreakLedgerDeletedWhileTripped(t, api) })
	t.Run("ResetThenDeleted", func(t *testing.T) { testBreakResetThenDeleted(t, api) })
	t.Run("StaleLeaderRestores", func(t *testing.T) { testBreakStaleLeaderRestores(t, api) })
	t.Run("GarbageNotRestored", func(t *testing.T) { testBreakGarbageNotRestored(t, api) })
	t.Run("DryRunPolicySwitchedOff", func(t *testing.T) { testBreakDryRunPolicySwitchedOff(t, api) })
	t.Run("CorrelatedStormLateConditions", func(t *testing.T) { testBreakStormOneByOne(t, api) })
	t.Run("CorrelatedStormOnePayload", func(t *testing.T) { testBreakStormOnePayload(t, api) })
}

// breakPolicy is a pool of A4 nodes with repair.maxConcurrent n and repair settings, top-level extra.
func breakPolicy(pool string, n int, repair, extra string) string {
	return strings.Replace(poolPolicy(pool, extra), "    maxUnavailable: 1\n",
		fmt.Sprintf("    maxUnavailable: 1\n    repair: {maxConcurrent: %d, %s}\n", n, repair), 1)
}

// repeater plays Alertmanager: alerts(i) are posted to every target every 200ms until stopped.
type repeater struct {
	mu      sync.Mutex
	targets []*replica
	alerts  func(i int) []template.Alert
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startRepeater(t *testing.T, alerts func(i int) []template.Alert, targets ...*replica) *repeater {
	ctx, cancel := context.WithCancel(context.Background())
	r := &repeater{targets: targets, alerts: alerts, cancel: cancel}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			r.mu.Lock()
			now := append([]*replica(nil), r.targets...)
			fn := r.alerts
			r.mu.Unlock()
			if a := fn(i); len(a) > 0 {
				body := payload(t, a...)
				for _, tgt := range now {
					send(ctx, tgt.url, body)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *repeater) set(alerts func(int) []template.Alert, targets ...*replica) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if alerts != nil {
		r.alerts = alerts
	}
	if targets != nil {
		r.targets = targets
	}
}

func (r *repeater) stop() { r.cancel(); r.wg.Wait() }

func repeatGPU(node, xid string) func(int) []template.Alert {
	return func(i int) []template.Alert {
		return []template.Alert{gpuAlert(node, xid, startsAt.Add(time.Duration(i%3)*time.Minute))}
	}
}

// gate blocks the first node PATCH whose body matches, until released (or the request's context ends).
type gate struct {
	match   func(path string, body []byte) bool
	once    sync.Once
	hit     chan struct{}
	release chan struct{}
	onHit   func()
}

func newGate(match func(string, []byte) bool) *gate {
	return &gate{match: match, hit: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch && req.Body != nil && strings.Contains(req.URL.Path, "/nodes/") {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			first := false
			if g.match(req.URL.Path, body) {
				g.once.Do(func() { first = true })
			}
			if first {
				if g.onHit != nil {
					g.onHit()
				}
				close(g.hit)
				select {
				case <-req.Context().Done():
					return nil, req.Context().Err()
				case <-g.release:
				}
			}
		}
		return next.RoundTrip(req)
	})
}

func (g *gate) waitHit(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.hit:
	case <-time.After(waitLong):
		t.Fatalf("%s never happened", what)
	}
}

// claimOf matches the claim of a GPU incident on node; reportOf the fault-behavior label on it.
func claimOf(node string) func(string, []byte) bool {
	return func(path string, body []byte) bool {
		return strings.HasSuffix(path, "/nodes/"+node) && bytes.Contains(body, []byte(nodeview.AnnotationIncident))
	}
}

func reportOf(node string) func(string, []byte) bool {
	return func(path string, body []byte) bool {
		return strings.HasSuffix(path, "/nodes/"+node) && bytes.Contains(body, []byte(`"`+gke.LabelFaultBehavior+`":"`))
	}
}

func (c *cluster) deleteNode(name string) {
	c.t.Helper()
	if err := c.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
	testenv.Eventually(c.t, waitLong, "node "+name+" gone", func() error {
		_, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// recreate deletes the node and creates a new VM under its name, booted in bootID with no GPU fault.
func (c *cluster) recreate(name string, labels map[string]string, bootID string) {
	c.t.Helper()
	c.deleteNode(name)
	c.node(name, labels, func(n *corev1.Node) {})
	c.boot(name, bootID, "")
}

// setXidCondition sets (cond non-nil) or removes the XidCriticalError condition.
func (c *cluster) setXidCondition(name string, cond *corev1.NodeCondition) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var conds []corev1.NodeCondition
		for _, x := range n.Status.Conditions {
			if x.Type != gke.ConditionXidCriticalError {
				conds = append(conds, x)
			}
		}
		if cond != nil {
			conds = append(conds, *cond)
		}
		n.Status.Conditions = conds
		_, err = c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatalf("condition on %s: %v", name, err)
	}
}

func xidCond(reason, bootID string) *corev1.NodeCondition {
	return &corev1.NodeCondition{Type: gke.ConditionXidCriticalError, Status: corev1.ConditionTrue, Reason: reason,
		Message: bootID, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}
}

func ledgerStore(api *testenv.APIServer, lease string) repairs.Store {
	return repairs.Store{Client: api.Client, Namespace: metav1.NamespaceDefault, Name: repairs.ConfigMapName(lease)}
}

func readLedger(t *testing.T, api *testenv.APIServer, lease string) repairs.Ledger {
	t.Helper()
	l, err := ledgerStore(api, lease).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// notReported fails if the node has the fault-behavior label or a record of work.
func notActedOn(t *testing.T, c *cluster, name, why string) {
	t.Helper()
	n := c.get(name)
	if n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Phase != "" {
		t.Errorf("%s: %s acted on: labels %v, annotations %v", why, name, n.Labels, n.Annotations)
	}
}

// --- 1. node re-created mid-repair ---

func testBreakRecreatedAfterReport(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-recreate")
	node, other := unique("a4"), unique("a4-o")
	labels := gpuNodeLabels(pool, "blk-1-"+pool)
	c.node(node, labels)
	c.node(other, gpuNodeLabels(pool, "blk-2-"+pool))
	c.boot(node, "boot-1", "79")
	r := startReplica(t, api, breakPolicy(pool, 1, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{})
	r.waitLeading()
	rep := startRepeater(t, repeatGPU(node, "79"), r)
	c.waitNode(node, "host reported", hostReported("XID"))

	// GKE (or a person) deletes the VM and a new one registers under the same name, with the alert still repeating.
	c.recreate(node, labels, "boot-2")
	time.Sleep(3 * time.Second)
	notActedOn(t, c, node, "the re-created node")
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times over both incarnations, want 1: %q", got, c.events(node))
	}
	c.waitEvent(node, "repair held (unconfirmed)")
	if got := repairedCount(ledgerOf(t, api, r), node); got != 1 {
		t.Errorf("ledger repairs of %s: %d, want 1: %+v", node, got, ledgerOf(t, api, r))
	}
	rep.stop()

	// The old node's maxConcurrent slot is free: another node's fault is repaired.
	c.boot(other, "boot-1", "48")
	mustAccept(t, r, gpuAlert(other, "48", time.Now()))
	c.waitNode(other, "the other node reported (slot not wedged)", hostReported("XID"))
}

func testBreakRecreatedBetweenClaimAndLabel(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-recreate2")
	node, other := unique("a4"), unique("a4-o")
	labels := gpuNodeLabels(pool, "blk-1-"+pool)
	c.node(node, labels)
	c.node(other, gpuNodeLabels(pool, "blk-2-"+pool))
	c.boot(node, "boot-1", "79")
	g := newGate(reportOf(node))
	r := startReplica(t, api, breakPolicy(pool, 1, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{wrapTransport: g.wrap})
	r.waitLeading()
	rep := startRepeater(t, repeatGPU(node, "79"), r)
	g.waitHit(t, "the fault-behavior label")
	if n := c.get(node); nodeview.Of(n).Record.Phase != nodeview.Accepted {
		t.Fatalf("claim not made before the label: %v", n.Annotations)
	}
	c.recreate(node, labels, "boot-2")
	close(g.release) // the label lands (or not) on the new node
	time.Sleep(3 * time.Second)
	notActedOn(t, c, node, "the re-created node")
	if got := c.countEvents(node, "DisruptionHostReported"); got != 0 {
		t.Errorf("DisruptionHostReported %d times, want 0 (the label was for the deleted VM): %q", got, c.events(node))
	}
	rep.stop()
	c.boot(other, "boot-1", "48")
	mustAccept(t, r, gpuAlert(other, "48", time.Now()))
	c.waitNode(other, "the other node reported (slot not wedged)", hostReported("XID"))
}

// --- 2. flapping, unreadable and stale conditions ---

func testBreakFlapping(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-flap")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	sets := watchLabelSets(t, c, node)
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{})
	r.waitLeading()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	flapBoot := "boot-1"
	wg.Add(1)
	go func() { // the plugin's condition comes and goes within the boot
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			mu.Lock()
			b := flapBoot
			mu.Unlock()
			if i%2 == 0 {
				c.setXidCondition(node, nil)
			} else {
				c.setXidCondition(node, xidCond(`{"79":true}`, b))
			}
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()
	stopFlap := func() { cancel(); wg.Wait() }
	defer stopFlap()
	rep := startRepeater(t, repeatGPU(node, "79"), r)
	c.waitNode(node, "host reported", hostReported("XID"))
	time.Sleep(2 * time.Second)
	c.replaceHost(node)
	time.Sleep(2 * time.Second) // still boot-1: the same incident
	// The new boot; the stale condition of boot-1 keeps flapping (the plugin has not run yet).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.NodeInfo.BootID = "boot-2"
		_, err = c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	episode := time.Now() // a new episode, after the repair
	rep.set(func(int) []template.Alert { return []template.Alert{gpuAlert(node, "79", episode)} })
	c.waitEvent(node, "repair held (unconfirmed)")
	time.Sleep(2 * time.Second)
	stopFlap()
	rep.stop()
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want 1: %q", got, c.events(node))
	}
	if got := repairedCount(ledgerOf(t, api, r), node); got != 1 {
		t.Errorf("ledger repairs %d, want 1: %+v", got, ledgerOf(t, api, r))
	}
	if got := c.countEvents(node, "DisruptionRepairHeld"); got != 1 {
		t.Errorf("hold evented %d times, want once: %q", got, c.events(node))
	}
}

func testBreakUnreadable(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-unread")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "")
	c.setXidCondition(node, xidCond("not json {", "boot-1"))
	sets := watchLabelSets(t, c, node)
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{})
	r.waitLeading()
	rep := startRepeater(t, repeatGPU(node, "79"), r)
	c.waitNode(node, "host reported (a fault of this boot, its Xids unreadable)", hostReported("XID"))
	c.replaceHost(node)
	// New boot; the unreadable condition of boot-1 is left stale.
	c.boot(node, "boot-2", "")
	episode := time.Now() // a new episode, after the repair
	rep.set(func(int) []template.Alert { return []template.Alert{gpuAlert(node, "79", episode)} })
	c.waitEvent(node, "repair held (unconfirmed)")
	time.Sleep(time.Second)
	rep.stop()
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
}

func testBreakStaleAfterRepair(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-stale")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	c.waitNode(node, "host reported", hostReported("XID"))
	c.replaceHost(node)
	// boot-2; the condition of boot-1 stays (stale), and it is re-stamped (heartbeat/transition) by a plugin restart.
	c.boot(node, "boot-2", "")
	c.setXidCondition(node, xidCond(`{"79":true}`, "boot-1"))
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	c.waitEvent(node, "repair held (unconfirmed)")
	time.Sleep(500 * time.Millisecond)
	if n := c.get(node); n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Phase != nodeview.Done {
		t.Errorf("a second repair on a stale condition: labels %v annotations %v", n.Labels, n.Annotations)
	}
}

// testBreakStaleNeverRepaired: a condition of an earlier boot, never repaired by this service, and a live alert.
// The guard's documented rule: only an Xid this service repaired in an earlier boot is held as unconfirmed; the
// alert alone is evidence of a fault. This pins that (the alert acts), so a change of rule shows.
func testBreakStaleNeverRepaired(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-stale2")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	c.boot(node, "boot-2", "") // rebooted (not by us): the condition of boot-1 stays
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	time.Sleep(2 * time.Second)
	n := c.get(node)
	t.Logf("stale condition, no repair in the ledger: labels %v, record %+v, events %q", n.Labels, nodeview.Of(n).Record, c.events(node))
	if n.Labels[gke.LabelFaultBehavior] == "" {
		t.Logf("not acted")
	} else if rec := nodeview.Of(n).Record; rec.Incident != nodeview.GPUIncidentKey("boot-2", "79") {
		t.Errorf("acted for incident %q, want the current boot's", rec.Incident)
	}
}

// --- 3. leader change during the claim ---

func testBreakLeaderKilled(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-leader")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	sets := watchLabelSets(t, c, node)
	policy := breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n")
	g := newGate(claimOf(node)) // shared: whichever replica leads first is caught
	lease := unique("lease")
	a := startReplica(t, api, policy, replicaOpts{identity: "replica-a", lease: lease, wrapTransport: g.wrap})
	b := startReplica(t, api, policy, replicaOpts{identity: "replica-b", lease: lease, wrapTransport: g.wrap})
	rep := startRepeater(t, repeatGPU(node, "79"), a, b)
	g.waitHit(t, "the claim")
	if got := repairedCount(readLedger(t, api, lease), node); got != 1 {
		t.Fatalf("ledger not written before the claim: %+v", readLedger(t, api, lease))
	}
	stopLeader(t, []*replica{a, b}) // killed with the claim in flight
	close(g.release)
	c.waitNode(node, "host reported by the new leader", hostReported("XID"))
	time.Sleep(2 * time.Second)
	rep.stop()
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want 1: %q", got, c.events(node))
	}
	if got := c.countEvents(node, "DisruptionActionAccepted"); got != 1 {
		t.Errorf("accepted %d times, want 1: %q", got, c.events(node))
	}
	l := readLedger(t, api, lease)
	entries := 0
	for _, e := range l.Entries {
		if e.Node == node {
			entries++
		}
	}
	if entries != 1 || repairedCount(l, node) != 1 {
		t.Errorf("ledger %+v, want one repair of %s", l, node)
	}
}

// testBreakZombieLeader: the leader's claim is delayed in flight while it loses its Lease (renewals fail); the new
// leader repairs; then the old claim lands late.
func testBreakZombieLeader(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-zombie")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	c.boot(node, "boot-1", "79")
	sets := watchLabelSets(t, c, node)
	policy := breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n")
	lease := unique("lease")
	var cutMu sync.Mutex
	cut := false
	g := newGate(claimOf(node))
	g.onHit = func() { cutMu.Lock(); cut = true; cutMu.Unlock() }
	wrapA := func(next http.RoundTripper) http.RoundTripper {
		inner := g.wrap(next)
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			cutMu.Lock()
			off := cut
			cutMu.Unlock()
			if off && strings.Contains(req.URL.Path, "/leases/") {
				return nil, fmt.Errorf("partitioned")
			}
			return inner.RoundTrip(req)
		})
	}
	a := startReplica(t, api, policy, replicaOpts{identity: "replica-a", lease: lease, wrapTransport: wrapA})
	a.waitLeading()
	b := startReplica(t, api, policy, replicaOpts{identity: "replica-b", lease: lease})
	rep := startRepeater(t, repeatGPU(node, "79"), a, b)
	g.waitHit(t, "the claim")
	b.waitLeading()
	c.waitNode(node, "host reported by the new leader", hostReported("XID"))
	close(g.release) // the old leader's claim lands late
	time.Sleep(2 * time.Second)
	rep.stop()
	n := c.get(node)
	if rec := nodeview.Of(n).Record; rec.Phase != nodeview.HostReported {
		t.Errorf("the late claim of the old leader changed the work: %+v", rec)
	}
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want 1: %q", got, c.events(node))
	}
}

// --- 4. breakers and the ledger ---

func testBreakReset(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-reset")
	a, b, d := unique("a4-a"), unique("a4-b"), unique("a4-d")
	for i, n := range []string{a, b, d} {
		c.node(n, gpuNodeLabels(pool, fmt.Sprintf("blk-%d-%s", i, pool)))
	}
	policy := breakPolicy(pool, 5, "maxPerHour: 1", "repair: {maxPerHour: 50}\n")
	lease := unique("lease")
	r := startReplica(t, api, policy, replicaOpts{lease: lease})
	r.waitLeading()
	c.boot(a, "boot-1", "79")
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	c.waitNode(a, "first reported", hostReported("XID"))
	c.boot(b, "boot-1", "79")
	setsB := watchLabelSets(t, c, b)
	rep := startRepeater(t, repeatGPU(b, "79"), r)
	c.waitEvent(b, "DisruptionRepairBreakerTripped")
	reset := func(opts cli.ResetOptions) (string, error) {
		var out strings.Builder
		opts.Lease, opts.Now = "default/"+lease, time.Now()
		err := cli.ResetBreakers(context.Background(), api.Client, &out, opts)
		return out.String(), err
	}
	if _, err := reset(cli.ResetOptions{By: "oncall"}); err != nil {
		t.Fatal(err)
	}
	// Reset again at once, racing the repeats.
	out, err := reset(cli.ResetOptions{By: "oncall2"})
	t.Logf("second reset: %q, %v", out, err)
	c.waitNode(b, "b repaired after the reset", hostReported("XID"))
	time.Sleep(2 * time.Second)
	rep.stop()
	if got := setsB.get(); got != 1 {
		t.Errorf("b labelled %d times, want once", got)
	}
	if got := c.countEvents(b, "DisruptionHostReported"); got != 1 {
		t.Errorf("b reported %d times: %q", got, c.events(b))
	}
	// The next fault in the hour trips it again (one repair since the reset).
	c.boot(d, "boot-1", "79")
	mustAccept(t, r, gpuAlert(d, "79", time.Now()))
	c.waitEvent(d, "DisruptionRepairBreakerTripped")
	// Reset, and restart at once.
	if _, err := reset(cli.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	r.stop()
	r2 := startReplica(t, api, policy, replicaOpts{lease: lease})
	r2.waitLeading()
	r2.waitMetric("reset seen after the restart", "gke_disruption_repair_breaker_tripped", map[string]string{"scope": repairs.PoolScope(pool)}, 0)
	setsD := watchLabelSets(t, c, d)
	rep2 := startRepeater(t, repeatGPU(d, "79"), r2)
	c.waitNode(d, "d repaired after reset and restart", hostReported("XID"))
	time.Sleep(2 * time.Second)
	rep2.stop()
	if got := setsD.get(); got != 1 {
		t.Errorf("d labelled %d times, want once", got)
	}
	l := readLedger(t, api, lease)
	for _, n := range []string{a, b, d} {
		if got := repairedCount(l, n); got != 1 {
			t.Errorf("ledger repairs of %s: %d, want 1: %+v", n, got, l)
		}
	}
}

func testBreakBothBreakers(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	p1, p2 := unique("brk-p1"), unique("brk-p2")
	policy := fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    strategy: rolling
    maxUnavailable: 1
    repair: {maxConcurrent: 5, maxPerHour: 1}
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    strategy: rolling
    maxUnavailable: 1
    repair: {maxConcurrent: 5, maxPerHour: 5}
repair: {maxPerHour: 1}
drain:
  timeout: 20s
  evictionRetryDelay: 200ms
  maxGracePeriod: 10s
`, p1, p2)
	a, b, d := unique("a4-a"), unique("a4-b"), unique("a4-d")
	c.node(a, gpuNodeLabels(p1, "blk-a"+p1))
	c.node(b, gpuNodeLabels(p2, "blk-b"+p2))
	c.node(d, gpuNodeLabels(p1, "blk-d"+p1))
	lease := unique("lease")
	r := startReplica(t, api, policy, replicaOpts{lease: lease})
	r.waitLeading()
	for _, n := range []string{a, b, d} {
		c.boot(n, "boot-1", "79")
	}
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	c.waitNode(a, "a reported", hostReported("XID"))
	mustAccept(t, r, gpuAlert(b, "79", time.Now()))
	c.waitEvent(b, "DisruptionRepairBreakerTripped: repair held (breaker): 1 GPU-fault repairs in the cluster")
	mustAccept(t, r, gpuAlert(d, "79", time.Now()))
	c.waitEvent(d, "DisruptionRepairBreakerTripped: repair held (breaker): 1 GPU-fault repairs in pool "+p1)
	r.waitMetric("cluster tripped", "gke_disruption_repair_breaker_tripped", map[string]string{"scope": repairs.ScopeCluster}, 1)
	r.waitMetric("pool tripped", "gke_disruption_repair_breaker_tripped", map[string]string{"scope": repairs.PoolScope(p1)}, 1)

	var out strings.Builder
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease, Pools: []string{p1}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rep := startRepeater(t, repeatGPU(d, "79"), r)
	c.waitEvent(d, "DisruptionRepairHeld: repair held (breaker): the circuit breaker of the cluster is tripped")
	notActedOn(t, c, d, "pool reset, cluster still tripped")
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease, ClusterWide: true, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c.waitNode(d, "d repaired after both resets", hostReported("XID"))
	time.Sleep(time.Second)
	rep.stop()
	notActedOn(t, c, b, "b (its alert not repeated)")
	if got := c.countEvents(d, "DisruptionHostReported"); got != 1 {
		t.Errorf("d reported %d times", got)
	}
}

func testBreakLedgerGarbage(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-garbage")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, gpuNodeLabels(pool, "blk-a"+pool))
	c.node(b, gpuNodeLabels(pool, "blk-b"+pool))
	lease := unique("lease")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{lease: lease})
	r.waitLeading()
	c.boot(a, "boot-1", "79")
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	c.waitNode(a, "a reported", hostReported("XID"))
	cms := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	cm, err := cms.Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := cm.Data[repairs.DataKey]
	cm.Data[repairs.DataKey] = `{"entries": [garbage`
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.boot(b, "boot-1", "79")
	rep := startRepeater(t, repeatGPU(b, "79"), r)
	time.Sleep(3 * time.Second)
	notActedOn(t, c, b, "with an unreadable ledger")
	var out strings.Builder
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease, Now: time.Now()}); err == nil ||
		!strings.Contains(err.Error(), "not readable") {
		t.Errorf("repairs reset on an unreadable ledger: %v (%q)", err, out.String())
	}
	if got, _ := cms.Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{}); got.Data[repairs.DataKey] != `{"entries": [garbage` {
		t.Errorf("the unreadable ledger was overwritten: %q", got.Data[repairs.DataKey])
	}
	t.Logf("node events while the ledger was unreadable: %q", c.events(b))
	// Repaired by hand: the ledger readable again, the repair goes on, a's entry kept.
	editLedger(t, api, lease, func(cm *corev1.ConfigMap) { cm.Data[repairs.DataKey] = good })
	c.waitNode(b, "b reported once the ledger reads", hostReported("XID"))
	rep.stop()
	l := readLedger(t, api, lease)
	if repairedCount(l, a) != 1 || repairedCount(l, b) != 1 {
		t.Errorf("ledger %+v", l)
	}
}

// afterRepair repairs node once (boot-1, Xid 79) and replaces its host: it then runs boot-2 with no fault.
func afterRepair(t *testing.T, c *cluster, r *replica, node string) {
	t.Helper()
	c.boot(node, "boot-1", "79")
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	c.waitNode(node, "host reported", hostReported("XID"))
	c.replaceHost(node)
	c.boot(node, "boot-2", "")
}

func testBreakLedgerDeletedAfterRepair(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-deleted")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	lease := unique("lease")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{lease: lease})
	r.waitLeading()
	afterRepair(t, c, r, node)
	if err := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Delete(context.Background(), repairs.ConfigMapName(lease), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The sticky gauge's alert, a new episode after the repair.
	time.Sleep(time.Second)
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	time.Sleep(3 * time.Second)
	if n := c.get(node); n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Incident != nodeview.GPUIncidentKey("boot-1", "79") {
		t.Errorf("with the ledger deleted, the replaced host was reported again for the old fault: labels %v, record %+v, events %q",
			n.Labels, nodeview.Of(n).Record, c.events(node))
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want 1", got)
	}
}

func testBreakLedgerEmptied(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-emptied")
	node := unique("a4")
	c.node(node, gpuNodeLabels(pool, "blk-"+pool))
	lease := unique("lease")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{lease: lease})
	r.waitLeading()
	afterRepair(t, c, r, node)
	editLedger(t, api, lease, func(cm *corev1.ConfigMap) { cm.Data = nil }) // e.g. re-applied from a manifest with no data
	time.Sleep(time.Second)
	mustAccept(t, r, gpuAlert(node, "79", time.Now()))
	time.Sleep(3 * time.Second)
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("with the ledger's data emptied, DisruptionHostReported %d times, want 1: %q", got, c.events(node))
	}
}

// testBreakLedgerDeletedWhileTripped: the ledger is deleted while the pool's breaker is tripped. Only an operator's
// reset ends a trip: the leader puts back what it knew, and the next fault is still held.
func testBreakLedgerDeletedWhileTripped(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	r, pool, a, _, d, _ := tripPool(t, api, c, "brk-lost", replicaOpts{}, "")
	lease := leaseOf(t, r)
	deleteLedger(t, api, lease)
	mustAccept(t, r, gpuAlert(d, "79", time.Now()))
	c.waitEvent(d, "DisruptionRepairHeld: repair held (breaker)")
	if n := c.get(d); n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("with the ledger deleted while the breaker was tripped, %s was reported: labels %v", d, n.Labels)
	}
	testenv.Eventually(t, waitLong, "the ledger restored, its breaker tripped", func() error {
		l := readLedger(t, api, lease)
		if !slices.Contains(l.Tripped(), repairs.PoolScope(pool)) || repairedCount(l, a) != 1 {
			return fmt.Errorf("ledger %+v", l)
		}
		return nil
	})
	r.waitMetric("pool still tripped", "gke_disruption_repair_breaker_tripped", map[string]string{"scope": repairs.PoolScope(pool)}, 1)
}

// --- 5. correlated storm, conditions late ---

func testBreakStormOneByOne(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-storm")
	block := "blk-" + pool
	nodes := []string{unique("a4-a"), unique("a4-b"), unique("a4-c"), unique("a4-d")}
	for _, n := range nodes {
		c.node(n, gpuNodeLabels(pool, block))
		c.boot(n, "boot-1", "") // no condition yet
	}
	lease := unique("lease")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{lease: lease})
	r.waitLeading()
	// The first alert is decided before any condition shows.
	mustAccept(t, r, gpuAlert(nodes[0], "79", time.Now()))
	c.waitNode(nodes[0], "first reported", hostReported("XID"))
	// The others' alerts arrive one by one, each just before its node's condition.
	for _, n := range nodes[1:] {
		mustAccept(t, r, gpuAlert(n, "79", time.Now()))
		time.Sleep(300 * time.Millisecond)
		c.boot(n, "boot-1", "79")
	}
	rep := startRepeater(t, func(int) []template.Alert {
		var out []template.Alert
		for _, n := range nodes {
			out = append(out, gpuAlert(n, "79", startsAt))
		}
		return out
	}, r)
	time.Sleep(3 * time.Second)
	rep.stop()
	repaired := 0
	for _, n := range nodes {
		if c.get(n).Labels[gke.LabelFaultBehavior] != "" {
			repaired++
		}
	}
	l := readLedger(t, api, lease)
	if repaired > 2 {
		t.Errorf("%d nodes of one block repaired within the correlation window, want at most correlation.nodes-1 = 2: ledger %+v", repaired, l)
	}
	for _, n := range nodes[2:] {
		if e, ok := l.Find(n, nodeview.GPUIncidentKey("boot-1", "79")); !ok || e.Held != repairs.HoldCorrelated {
			t.Errorf("%s: ledger entry %+v (%v), want held correlated", n, e, ok)
		}
	}
}

func testBreakStormOnePayload(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("brk-storm1")
	block := "blk-" + pool
	nodes := []string{unique("a4-a"), unique("a4-b"), unique("a4-c"), unique("a4-d")}
	for _, n := range nodes {
		c.node(n, gpuNodeLabels(pool, block))
		c.boot(n, "boot-1", "")
	}
	lease := unique("lease")
	r := startReplica(t, api, breakPolicy(pool, 5, "maxPerHour: 10", "repair: {maxPerHour: 50}\n"), replicaOpts{lease: lease})
	r.waitLeading()
	var all []template.Alert
	for _, n := range nodes {
		all = append(all, gpuAlert(n, "79", time.Now()))
	}
	mustAccept(t, r, all...) // the storm at once; no condition shows yet
	time.Sleep(2 * time.Second)
	for _, n := range nodes {
		c.boot(n, "boot-1", "79")
	}
	time.Sleep(2 * time.Second)
	repaired := 0
	for _, n := range nodes {
		if c.get(n).Labels[gke.LabelFaultBehavior] != "" {
			repaired++
		}
	}
	l := readLedger(t, api, lease)
	t.Logf("storm in one payload: %d of %d repaired; ledger %+v", repaired, len(nodes), l)
	if repaired > 2 {
		t.Errorf("%d nodes of one block repaired, want at most 2", repaired)
	}
}

// --- restore probes ---

// tripPool starts a replica on a fresh pool and trips its breaker (a repaired, b held); it returns the nodes (the
// third, d, booted with a fault and never alerted), the policy and the lease.
func tripPool(t *testing.T, api *testenv.APIServer, c *cluster, prefix string, o replicaOpts, extra string) (r *replica, pool, a, b, d, policy string) {
	t.Helper()
	pool = unique(prefix)
	a, b, d = unique("a4-a"), unique("a4-b"), unique("a4-d")
	for _, n := range []string{a, b, d} {
		c.node(n, gpuNodeLabels(pool, "blk-"+n))
		c.boot(n, "boot-1", "79")
	}
	if o.lease == "" {
		o.lease = unique("lease")
	}
	policy = breakPolicy(pool, 5, "maxPerHour: 1", "repair: {maxPerHour: 50}\n"+extra)
	r = startReplica(t, api, policy, o)
	r.waitLeading()
	mustAccept(t, r, gpuAlert(a, "79", time.Now()))
	if !o.dryRun && !strings.Contains(extra, "dryRun: true") {
		c.waitNode(a, "a reported", hostReported("XID"))
		mustAccept(t, r, gpuAlert(b, "79", time.Now()))
		c.waitEvent(b, "DisruptionRepairBreakerTripped: repair held (breaker): 1 GPU-fault repairs in pool "+pool)
	} else {
		c.waitEvent(a, "DisruptionActionDryRun")
		mustAccept(t, r, gpuAlert(b, "79", time.Now()))
		c.waitEvent(b, "DisruptionRepairHeld: repair held (breaker)")
	}
	return r, pool, a, b, d, policy
}

// editLedger changes the ledger's ConfigMap as an operator or a manifest would, retrying on conflicts.
func editLedger(t *testing.T, api *testenv.APIServer, lease string, edit func(*corev1.ConfigMap)) {
	t.Helper()
	cms := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(cm)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func deleteLedger(t *testing.T, api *testenv.APIServer, lease string) {
	t.Helper()
	err := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Delete(context.Background(), repairs.ConfigMapName(lease), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func resetAll(t *testing.T, api *testenv.APIServer, lease string) {
	t.Helper()
	var out strings.Builder
	if err := cli.ResetBreakers(context.Background(), api.Client, &out, cli.ResetOptions{Lease: "default/" + lease, By: "oncall", Now: time.Now()}); err != nil {
		t.Fatalf("reset: %v (%q)", err, out.String())
	}
}

// (1) reset, the leader refreshes, then the ConfigMap is deleted: the restored ledger is the reset one.
func testBreakResetThenDeleted(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	r, pool, _, _, d, _ := tripPool(t, api, c, "brk-rd", replicaOpts{}, "")
	lease := leaseOf(t, r)
	scope := map[string]string{"scope": repairs.PoolScope(pool)}
	r.waitMetric("tripped", "gke_disruption_repair_breaker_tripped", scope, 1)
	resetAll(t, api, lease)
	r.waitMetric("reset seen", "gke_disruption_repair_breaker_tripped", scope, 0)
	time.Sleep(time.Second) // two more refreshes
	deleteLedger(t, api, lease)
	time.Sleep(2 * time.Second)
	if l := readLedger(t, api, lease); len(l.Tripped()) != 0 {
		t.Errorf("after reset then delete, ledger tripped again: %+v", l)
	}
	if got := r.metric("gke_disruption_repair_breaker_tripped", scope); got != 0 {
		t.Errorf("tripped metric %v after reset then delete", got)
	}
	mustAccept(t, r, gpuAlert(d, "79", time.Now()))
	c.waitNode(d, "d repaired after reset (and delete)", hostReported("XID"))
}

// (3) two replicas, one lease: r1 trips the breaker and loses the lease (alive); r2 leads, the operator resets, r2
// sees it; r2 stops, the ledger is deleted, r1 leads again. r1's memory predates the reset.
func testBreakStaleLeaderRestores(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	var cut atomic.Bool
	partition := func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if cut.Load() && strings.Contains(req.URL.Path, "/leases") {
				return nil, fmt.Errorf("partitioned")
			}
			return next.RoundTrip(req)
		})
	}
	lease := unique("lease")
	r1, pool, _, _, _, policy := tripPool(t, api, c, "brk-stale", replicaOpts{lease: lease, wrapTransport: partition}, "")
	scope := map[string]string{"scope": repairs.PoolScope(pool)}
	r1.waitMetric("r1 tripped", "gke_disruption_repair_breaker_tripped", scope, 1)
	r2 := startReplica(t, api, policy, replicaOpts{lease: lease})
	cut.Store(true)
	r2.waitLeading()
	testenv.Eventually(t, waitLong, "r1 not leading", func() error {
		if r1.svc.Leading() {
			return fmt.Errorf("still leading")
		}
		return nil
	})
	r2.waitMetric("r2 tripped", "gke_disruption_repair_breaker_tripped", scope, 1)
	resetAll(t, api, lease)
	r2.waitMetric("r2 sees the reset", "gke_disruption_repair_breaker_tripped", scope, 0)
	r2.stop()
	deleteLedger(t, api, lease)
	cut.Store(false)
	r1.waitLeading()
	time.Sleep(2 * time.Second)
	if l := readLedger(t, api, lease); len(l.Tripped()) != 0 {
		t.Errorf("the new leader restored a breaker reset meanwhile: ledger %+v, r1 metric %v", l, r1.metric("gke_disruption_repair_breaker_tripped", scope))
	}
}

// (4) garbage while the leader knows a tripped ledger: held, never overwritten.
func testBreakGarbageNotRestored(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	r, _, _, _, d, _ := tripPool(t, api, c, "brk-gb", replicaOpts{}, "")
	lease := leaseOf(t, r)
	cms := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	for _, garbage := range []string{`{"entries": [garbage`, `[]`, `"x"`} {
		editLedger(t, api, lease, func(cm *corev1.ConfigMap) { cm.Data[repairs.DataKey] = garbage })
		mustAccept(t, r, gpuAlert(d, "79", time.Now()))
		time.Sleep(2 * time.Second)
		if got, _ := cms.Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{}); got.Data[repairs.DataKey] != garbage {
			t.Errorf("unreadable ledger %q overwritten: %q", garbage, got.Data[repairs.DataKey])
		}
		notActedOn(t, c, d, "unreadable ledger "+garbage)
	}
}

// (5b) the policy's dryRun switched off by a reload: the dry run's simulated ledger must not become the real one.
func testBreakDryRunPolicySwitchedOff(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	r, pool, _, _, _, policy := tripPool(t, api, c, "brk-dryp", replicaOpts{}, "dryRun: true\n")
	lease := leaseOf(t, r)
	time.Sleep(time.Second)
	if _, err := api.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(context.Background(), repairs.ConfigMapName(lease), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry run wrote the ledger: %v", err)
	}
	cfg, err := config.Parse([]byte(strings.Replace(policy, "dryRun: true\n", "", 1)))
	if err != nil || cfg.DryRun {
		t.Fatalf("live policy: %v %v", err, cfg)
	}
	switched := time.Now()
	r.svc.SetConfig(cfg) // the live alerts are decided again, live: entries from now on are real
	time.Sleep(2 * time.Second)
	l, err := ledgerStore(api, lease).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.At.Before(switched) {
			t.Errorf("dry run switched off: the dry run's decision was written as real: %+v (pool %s)", e, pool)
		}
	}
	for scope, b := range l.Breakers {
		if b.Tripped() && b.TrippedAt.Before(switched) {
			t.Errorf("dry run switched off: the dry run's simulated trip of %s was written as real: %+v", scope, b)
		}
	}
}
