package actions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/gkeapi"
	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// calendarSim is the GKE API simulator with one cluster, and a client of it for the actions service.
type calendarSim struct {
	t      *testing.T
	sim    *container.Server
	name   string
	client *gkeapi.Client
}

func startCalendarSim(t *testing.T, p *containerpb.MaintenancePolicy) *calendarSim {
	t.Helper()
	sim := container.New()
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	name := sim.SetCluster("p", "europe-west4", &containerpb.Cluster{Name: "c", MaintenancePolicy: p})
	cm, err := gkecollector.NewClient(context.Background(), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Close() })
	resource, err := gkecollector.ParseCluster(name)
	if err != nil {
		t.Fatal(err)
	}
	return &calendarSim{t: t, sim: sim, name: name, client: gkeapi.New(cm, resource)}
}

func (s *calendarSim) setPolicy(p *containerpb.MaintenancePolicy) {
	s.t.Helper()
	if err := s.sim.UpdateCluster(s.name, func(c *containerpb.Cluster) { c.MaintenancePolicy = p }); err != nil {
		s.t.Fatal(err)
	}
}

func (s *calendarSim) calls() int { return s.sim.Calls(container.MethodGetCluster) }

const breakTTL = 300 * time.Millisecond

func closedWindow() *containerpb.MaintenancePolicy {
	return dailyWindow(time.Now(), 6*time.Hour, 10*time.Hour, nil)
}

func openWindow() *containerpb.MaintenancePolicy {
	return dailyWindow(time.Now(), -time.Hour, 3*time.Hour, nil)
}

func clusterPolicy(pool string) string {
	return fmt.Sprintf(`
windows: {fromCluster: true}
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 2
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, pool)
}

func waitingLabels(pool, reason string) map[string]string {
	return map[string]string{"action": "drain", "pool": pool, "reason": reason}
}

// partitionable cuts a replica off the API server while on, as a paused or partitioned process is.
type partitionable struct {
	on atomic.Bool
	rt http.RoundTripper
}

func (p *partitionable) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.on.Load() {
		return nil, errors.New("partitioned")
	}
	return p.rt.RoundTrip(req)
}

// TestClusterWindowBreakLeaderPartitioned: the leader holding a waiting alert is cut off (paused) while the cluster's
// window is closed; the new leader keeps waiting on the cluster's calendar, acts once it opens, and the old leader,
// healed, never acts a second time.
func TestClusterWindowBreakLeaderPartitioned(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, closedWindow())
	c := newCluster(t, api)
	pool := unique("calha")
	lease := unique("lease")
	parts := map[string]*partitionable{}
	var replicas []*replica
	for _, id := range []string{"replica-a", "replica-b"} {
		p := &partitionable{}
		parts[id] = p
		replicas = append(replicas, startReplica(t, api, clusterPolicy(pool), replicaOpts{identity: id, lease: lease,
			gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL),
			wrapTransport: func(rt http.RoundTripper) http.RoundTripper { p.rt = rt; return p }}))
	}
	var leader, follower *replica
	testenv.Eventually(t, waitLong, "a leader", func() error {
		for i, r := range replicas {
			if r.svc.Leading() {
				leader, follower = r, replicas[1-i]
				return nil
			}
		}
		return fmt.Errorf("no leader")
	})
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, leader, alert(node, nodeview.Drain, false, startsAt))
	leader.waitMetric("the leader waits for the cluster's window", "gke_disruption_actions_waiting", waitingLabels(pool, "window"), 1)

	parts[leader.identity].on.Store(true)
	follower.waitLeading()
	// Alertmanager sends again, now to the only ready replica.
	mustAccept(t, follower, alert(node, nodeview.Drain, false, startsAt))
	follower.waitMetric("the new leader waits for the cluster's window", "gke_disruption_actions_waiting", waitingLabels(pool, "window"), 1)
	settle()
	c.untouched(before, "the new leader, window closed")

	gs.setPolicy(openWindow())
	n := c.waitNode(node, "drained by the new leader once the window opens", drainedAndCordoned)
	if got := n.Annotations[nodeview.AnnotationCordonedBy]; got != follower.identity {
		t.Errorf("cordoned by %q, want the new leader %s", got, follower.identity)
	}
	parts[leader.identity].on.Store(false) // the old leader comes back, its alert still in memory
	time.Sleep(2 * time.Second)
	settle()
	if got := c.countEvents(node, "DisruptionDrainStarted"); got != 1 {
		t.Errorf("drain started %d times: %q", got, c.events(node))
	}
	c.acceptedAtMostOnce([]string{node})
	if leader.svc.Leading() && follower.svc.Leading() {
		t.Errorf("both replicas leading")
	}
}

// TestClusterWindowBreakRestart: the service restarts while an alert waits for the cluster's window; the new process
// waits too and acts only once the window opens, exactly once.
func TestClusterWindowBreakRestart(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, closedWindow())
	c := newCluster(t, api)
	pool := unique("calrestart")
	lease := unique("lease")
	opts := func() replicaOpts {
		return replicaOpts{lease: lease, gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)}
	}
	first := startReplica(t, api, clusterPolicy(pool), opts())
	first.waitLeading()
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, first, alert(node, nodeview.Drain, false, startsAt))
	first.waitMetric("waiting for the window", "gke_disruption_actions_waiting", waitingLabels(pool, "window"), 1)
	first.stop()

	second := startReplica(t, api, clusterPolicy(pool), opts())
	second.waitLeading()
	mustAccept(t, second, alert(node, nodeview.Drain, false, startsAt))
	second.waitMetric("the restarted service waits for the window", "gke_disruption_actions_waiting", waitingLabels(pool, "window"), 1)
	settle()
	c.untouched(before, "restarted, window closed")

	gs.setPolicy(openWindow())
	c.waitNode(node, "drained once the window opens", drainedAndCordoned)
	settle()
	if got := c.countEvents(node, "DisruptionDrainStarted"); got != 1 {
		t.Errorf("drain started %d times: %q", got, c.events(node))
	}
}

// TestClusterWindowBreakUnavailableAtStart: the GKE API is Unavailable from the start: the alert waits (gke_api),
// the outage costs few calls, and once the API answers again the work starts within about a TTL.
func TestClusterWindowBreakUnavailableAtStart(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, openWindow())
	gs.sim.Fail(container.MethodGetCluster, codes.Unavailable, -1)
	c := newCluster(t, api)
	pool := unique("calunavail")
	const ttl = 2 * time.Second
	r := startReplica(t, api, clusterPolicy(pool), replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, ttl)})
	r.waitLeading()
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	start := time.Now()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitEvent(node, "its maintenance policy could not be read from the GKE API")
	r.waitMetric("waits for the GKE API", "gke_disruption_actions_waiting", waitingLabels(pool, "gke_api"), 1)
	t.Logf("first gke_api wait seen after %v, %d GetCluster calls", time.Since(start), gs.calls())
	c.untouched(before, "GKE API unavailable")

	// The documented bound: at most one read per TTL, a failed read kept as long as a good one.
	calls, since := gs.calls(), time.Now()
	time.Sleep(3 * ttl)
	if got, reads := gs.calls()-calls, int(time.Since(since)/ttl)+1; got > reads {
		t.Errorf("%d GetCluster calls in %v of outage with a TTL of %v: want at most %d (one read per TTL)", got, time.Since(since).Round(time.Millisecond), ttl, reads)
	}

	gs.sim.Fail(container.MethodGetCluster, codes.OK, 0)
	recovered := time.Now()
	c.waitNode(node, "drained once the GKE API answers", drainedAndCordoned)
	if d := time.Since(recovered); d > ttl+3*time.Second {
		t.Errorf("drained %v after the GKE API recovered, want within about a TTL (%v)", d.Round(time.Millisecond), ttl)
	}
	r.waitMetric("nothing waits for the GKE API", "gke_disruption_actions_waiting", waitingLabels(pool, "gke_api"), 0)
}

// TestClusterWindowBreakSlowAPIOtherPool: the GKE API is slow; a pool whose windows are not the cluster's decides
// without waiting on GetCluster.
func TestClusterWindowBreakSlowAPIOtherPool(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, closedWindow())
	c := newCluster(t, api)
	fromCluster, plain := unique("calslow"), unique("plain")
	policy := fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 2
    windows: {fromCluster: true}
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    maxUnavailable: 2
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, fromCluster, plain)
	r := startReplica(t, api, policy, replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)})
	r.waitLeading()
	waiter, other := unique("gpu"), unique("gpu")
	c.node(waiter, map[string]string{"pool": fromCluster}, withScheduledMaintenance)
	c.node(other, map[string]string{"pool": plain}, withScheduledMaintenance)

	const latency = 6 * time.Second
	gs.sim.SetLatency(latency)
	t.Cleanup(func() { gs.sim.SetLatency(0) })
	mustAccept(t, r, alert(waiter, nodeview.Drain, false, startsAt))
	time.Sleep(200 * time.Millisecond) // the fromCluster pool's read is under way
	start := time.Now()
	mustAccept(t, r, alert(other, nodeview.Drain, false, startsAt))
	c.waitNode(other, "the plain pool's node drained", drainedAndCordoned)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a pool without fromCluster took %v to drain with GetCluster taking %v: it waited on the GKE API", d.Round(time.Millisecond), latency)
	}
}

// TestClusterWindowBreakServiceDisabled: the Kubernetes Engine API disabled in the project is a PermissionDenied
// too; the Event must say to enable the API, not to grant a role that would not help.
func TestClusterWindowBreakServiceDisabled(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, openWindow())
	gs.sim.FailWith(container.MethodGetCluster, container.ServiceDisabled("p"), -1)
	c := newCluster(t, api)
	pool := unique("caldisabled")
	r := startReplica(t, api, clusterPolicy(pool), replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)})
	r.waitLeading()
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitEvent(node, "its maintenance policy could not be read from the GKE API")
	var msg string
	for _, e := range c.events(node) {
		if strings.Contains(e, "GKE API") {
			msg = e
		}
	}
	if strings.Contains(msg, "roles/container.clusterViewer") || !strings.Contains(strings.ToLower(msg), "enable") {
		t.Errorf("API disabled in the project, told: %q; want how to enable container.googleapis.com, not a role to grant", msg)
	}
}

// TestClusterWindowBreakExclusionEnds: an exclusion in force ends while work waits; the work starts soon after.
func TestClusterWindowBreakExclusionEnds(t *testing.T) {
	api := testenv.StartAPIServer(t)
	now := time.Now()
	end := now.Add(4 * time.Second)
	gs := startCalendarSim(t, dailyWindow(now, -time.Hour, 3*time.Hour, map[string]*containerpb.TimeWindow{
		"short-freeze": {StartTime: timestamppb.New(now.Add(-time.Hour)), EndTime: timestamppb.New(end)},
	}))
	c := newCluster(t, api)
	pool := unique("calexcl")
	r := startReplica(t, api, clusterPolicy(pool), replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)})
	r.waitLeading()
	node := unique("gpu")
	before := c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitEvent(node, `maintenance exclusion "short-freeze"`)
	if time.Now().Before(end) {
		c.untouched(before, "exclusion in force")
	}
	n := c.waitNode(node, "drained after the exclusion ends", drainedAndCordoned)
	_ = n
	if d := time.Since(end); d > breakTTL+3*time.Second {
		t.Errorf("drained %v after the exclusion ended, want within about a TTL", d.Round(time.Millisecond))
	}
	if time.Now().Before(end) {
		t.Errorf("drained before the exclusion ended")
	}
}

// clock is HH:MM in UTC of now+d.
func clock(d time.Duration) string { return time.Now().UTC().Add(d).Format("15:04") }

// TestClusterWindowBreakPoolReplacesTopLevel: a pool's windows from the cluster replace the top-level weekly ones,
// both ways: open cluster window under a closed top-level window acts; closed cluster window under an open top-level
// window waits; a pool without windows keeps the top-level ones and never reads the cluster for them.
func TestClusterWindowBreakPoolReplacesTopLevel(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, openWindow())
	c := newCluster(t, api)
	own, inherits := unique("calown"), unique("inherit")
	closedTop := fmt.Sprintf(`
windows:
  - start: "%[3]s"
    end: "%[4]s"
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 2
    windows: {fromCluster: true}
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    maxUnavailable: 2
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, own, inherits, clock(2*time.Hour), clock(3*time.Hour))
	r := startReplica(t, api, closedTop, replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)})
	r.waitLeading()
	a, b := unique("gpu"), unique("gpu")
	c.node(a, map[string]string{"pool": own}, withScheduledMaintenance)
	beforeB := c.node(b, map[string]string{"pool": inherits}, withScheduledMaintenance)
	mustAccept(t, r, alert(a, nodeview.Drain, false, startsAt), alert(b, nodeview.Drain, false, startsAt))
	c.waitNode(a, "the pool's cluster window open: drained whatever the top-level window", drainedAndCordoned)
	r.waitMetric("the other pool waits for the top-level window", "gke_disruption_actions_waiting", waitingLabels(inherits, "window"), 1)
	c.untouched(beforeB, "top-level window closed")
	c.waitEvent(b, "outside every maintenance window")

	// Now the other way round: the top-level window open, the cluster's closed.
	gs.setPolicy(closedWindow())
	openTop := strings.Replace(strings.Replace(closedTop, clock(2*time.Hour), clock(-time.Hour), 1), clock(3*time.Hour), clock(time.Hour), 1)
	cfg, err := config.Parse([]byte(openTop))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	c.waitNode(b, "the top-level window open: the other pool drained", drainedAndCordoned)
	a2 := unique("gpu")
	beforeA2 := c.node(a2, map[string]string{"pool": own}, withScheduledMaintenance)
	mustAccept(t, r, alert(a2, nodeview.Drain, false, startsAt))
	c.waitEvent(a2, "outside the cluster's maintenance window")
	settle()
	c.untouched(beforeA2, "the pool's cluster window closed, top-level open")
}

// TestClusterWindowBreakNoGetClusterWithoutKey: with no key from the cluster (the GKE client and calendar present),
// decisions never call GetCluster, windows listed or none; after a reload to fromCluster and back, calls stop.
func TestClusterWindowBreakNoGetClusterWithoutKey(t *testing.T) {
	api := testenv.StartAPIServer(t)
	gs := startCalendarSim(t, closedWindow())
	c := newCluster(t, api)
	p1, p2 := unique("nocal"), unique("nocalw")
	plain := fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 2
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    maxUnavailable: 2
    windows:
      - start: "%[3]s"
        end: "%[4]s"
    repair:
      windows:
        - start: "%[3]s"
          end: "%[4]s"
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, p1, p2, clock(-time.Hour), clock(time.Hour))
	r := startReplica(t, api, plain, replicaOpts{gke: gs.client, calendar: gkeapi.NewCalendar(gs.client, breakTTL)})
	r.waitLeading()
	a, b := unique("gpu"), unique("gpu")
	c.node(a, map[string]string{"pool": p1}, withScheduledMaintenance)
	c.node(b, map[string]string{"pool": p2}, withScheduledMaintenance)
	mustAccept(t, r, alert(a, nodeview.Drain, false, startsAt), alert(b, nodeview.Drain, false, startsAt))
	c.waitNode(a, "drained", drainedAndCordoned)
	c.waitNode(b, "drained", drainedAndCordoned)
	settle()
	if n := gs.calls(); n != 0 {
		t.Errorf("%d GetCluster calls with no key from the cluster, want 0", n)
	}

	// Reload to windows from the cluster: a new alert waits on it, then reload back.
	withKey, err := config.Parse([]byte(strings.Replace(plain, "pools:\n", "windows: {fromCluster: true}\npools:\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.SetConfig(withKey); err != nil {
		t.Fatal(err)
	}
	d := unique("gpu")
	c.node(d, map[string]string{"pool": p1}, withScheduledMaintenance)
	mustAccept(t, r, alert(d, nodeview.Drain, false, startsAt))
	c.waitEvent(d, "outside the cluster's maintenance window")
	if gs.calls() == 0 {
		t.Fatalf("no GetCluster under windows from the cluster")
	}
	back, err := config.Parse([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.SetConfig(back); err != nil {
		t.Fatal(err)
	}
	c.waitNode(d, "drained once the policy no longer reads the cluster", drainedAndCordoned)
	settle()
	calls := gs.calls()
	time.Sleep(3 * breakTTL)
	settle()
	if n := gs.calls(); n != calls {
		t.Errorf("%d GetCluster calls after the reload away from fromCluster, want none", n-calls)
	}
}

// TestClusterWindowBreakReloadWithoutGKE: a reload to a policy that needs the GKE API is refused, naming the key,
// when the service has no GKE client; the policy in force stays.
func TestClusterWindowBreakReloadWithoutGKE(t *testing.T) {
	api := testenv.StartAPIServer(t)
	c := newCluster(t, api)
	pool := unique("nogke")
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	for key, policy := range map[string]string{
		"windows.fromCluster": clusterPolicy(pool),
		"pools[0].windows.fromCluster": fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    windows: {fromCluster: true}
`, pool),
		"pools[1].repair.windows.fromCluster": fmt.Sprintf(`
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
  - name: other
    nodeSelector: {pool: other}
    repair:
      windows: {fromCluster: true}
`, pool),
	} {
		cfg, err := config.Parse([]byte(policy))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		err = r.svc.SetConfig(cfg)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("reload with %s and no GKE API: %v, want refused naming %s", key, err, key)
		}
	}
	// The policy in force stays: an alert is acted on at once.
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drained under the policy in force", func(n *corev1.Node) error { return drainedAndCordoned(n) })
}

// TestClusterWindowBreakBadInput: malformed windows are refused with an error that names the key and what to write.
func TestClusterWindowBreakBadInput(t *testing.T) {
	const pool = "\npools:\n  - name: p\n    nodeSelector: {pool: p}\n"
	for _, tc := range []struct {
		name, policy string
		want         []string // all in the error
	}{
		{"quoted yes", "windows: {fromCluster: \"yes\"}" + pool, []string{"fromCluster"}},
		{"plain yes", "windows: {fromCluster: yes}" + pool, []string{"fromCluster"}},
		{"number", "windows: {fromCluster: 1}" + pool, []string{"fromCluster"}},
		{"days mapping", "windows: {days: [Mon]}" + pool, []string{"windows", "list"}},
		{"extra key", "windows: {fromCluster: true, extra: 1}" + pool, []string{"extra"}},
		{"empty mapping", "windows: {}" + pool, []string{"fromCluster"}},
		{"mixed", "windows: {fromCluster: true, start: \"01:00\"}" + pool, []string{"windows"}},
		{"scalar", "windows: fromCluster" + pool, []string{"windows"}},
		{"pool quoted yes", "pools:\n  - name: p\n    nodeSelector: {pool: p}\n    windows: {fromCluster: \"yes\"}\n", []string{"pools[0].windows", "fromCluster"}},
		{"repair extra", "pools:\n  - name: p\n    nodeSelector: {pool: p}\n    repair:\n      windows: {fromCluster: true, extra: 1}\n", []string{"repair", "extra"}},
		{"list item fromCluster", "windows:\n  - fromCluster: true\n" + pool, []string{"fromCluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.policy))
			if err == nil {
				t.Fatalf("accepted: windows %+v, pools %+v", cfg.Windows, cfg.Pools)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			t.Logf("%v", err)
		})
	}
	// And the good forms are accepted.
	for _, good := range []string{"windows: {fromCluster: true}" + pool, "windows: {fromCluster: false}" + pool, "windows: []" + pool} {
		if _, err := config.Parse([]byte(good)); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}
