package gke

// Adversarial tests of the GKE API collector against the simulator: a misbehaving API, state churn, and
// concurrency. Each asserts the contract of package gke's doc and design.md's GKE API section.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/googleapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// brkRequests is requests_total of method and code.
func (h *harness) brkRequests(method string, code codes.Code) float64 {
	return testutil.ToFloat64(h.c.requests.WithLabelValues(method, code.String()))
}

// brkScrapeErr is what a scrape's Update returns.
func (h *harness) brkScrapeErr() error {
	ch := make(chan prometheus.Metric, 100000)
	err := h.c.Update(ch)
	close(ch)
	return err
}

// brkGatherNoDup gathers and fails on a gather error (duplicates, inconsistent families) or a repeated series.
func (h *harness) brkGatherNoDup() map[string]float64 {
	h.t.Helper()
	families, err := h.gatherer().Gather()
	if err != nil {
		h.t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			k := mf.GetName() + labels(m)
			if _, dup := out[k]; dup {
				h.t.Errorf("duplicate series %s", k)
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

// 1a. PermissionDenied on FetchNodePoolUpgradeInfo only: the poll fails naming that method, the other calls are
// counted OK, the scrape fails with the last series kept, the last success does not move.
func TestBreakPermissionDeniedOnUpgradeInfoOnly(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	h.poll()
	before := h.series()
	last := testutil.ToFloat64(h.c.lastSuccess)

	h.sim.FailWith(gkesim.MethodFetchNodePoolUpgradeInfo, gkesim.PermissionDenied(h.name), -1)
	h.clock.Add(5 * time.Minute)
	err := h.c.Poll(context.Background())
	if googleapi.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), MethodFetchNodePoolUpgradeInfo) {
		t.Fatalf("poll: %v, want PermissionDenied naming %s", err, MethodFetchNodePoolUpgradeInfo)
	}
	for m, want := range map[string]float64{MethodGetCluster: 2, MethodListOperations: 2, MethodFetchNodePoolUpgradeInfo: 3} {
		if got := h.brkRequests(m, codes.OK); got != want {
			t.Errorf("%s OK = %v, want %v", m, got, want)
		}
	}
	if got := h.brkRequests(MethodFetchNodePoolUpgradeInfo, codes.PermissionDenied); got != 1 {
		t.Errorf("FetchNodePoolUpgradeInfo PermissionDenied = %v, want 1 (the poll stops at the first denial)", got)
	}
	if got := h.brkRequests(MethodGetCluster, codes.PermissionDenied); got != 0 {
		t.Errorf("GetCluster PermissionDenied = %v", got)
	}
	if h.brkScrapeErr() == nil {
		t.Error("scrape succeeds while a call is denied")
	}
	if got := h.series(); len(got) != len(before) {
		t.Errorf("%d series while denied, want the %d of the last good poll", len(got), len(before))
	}
	if got := testutil.ToFloat64(h.c.lastSuccess); got != last {
		t.Errorf("last success moved to %v on a failed poll", got)
	}
	if !strings.Contains(h.log.String(), "permission denied (container.clusters.get)") {
		t.Errorf("denial not told with the permission:\n%s", h.log.String())
	}
}

// 1b. Unavailable for the first N polls, then recovery: retried sooner than the interval, each failure counted,
// the scrape failing until the first success, then succeeding with series.
func TestBreakUnavailableFirstNPollsThenRecovers(t *testing.T) {
	const n = 4
	interval := 4 * time.Second
	h := newHarness(t, Config{Interval: interval})
	h.c.now = time.Now
	h.fleet()
	h.sim.Fail(gkesim.MethodGetCluster, codes.Unavailable, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	begin := time.Now()
	go func() { defer close(done); h.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	testenv.Eventually(t, 30*time.Second, "a successful poll", func() error { return h.brkScrapeErr() })
	took := time.Since(begin)
	// Backoff from interval/16 doubling with ±50% jitter: n retries take at most ~1.5*(1+2+4+8)/16 intervals.
	if took > 2*interval {
		t.Errorf("recovered after %v: the %d retries were not sooner than the interval %v", took, n, interval)
	}
	if got := h.brkRequests(MethodGetCluster, codes.Unavailable); got != n {
		t.Errorf("GetCluster Unavailable = %v, want %d", got, n)
	}
	if got := h.brkRequests(MethodGetCluster, codes.OK); got < 1 {
		t.Errorf("GetCluster OK = %v", got)
	}
	if len(h.series()) == 0 {
		t.Error("no series after recovery")
	}
	if testutil.ToFloat64(h.c.lastSuccess) == 0 {
		t.Error("no last success after recovery")
	}
}

// 1c. A server slower than the call deadline: the poll ends within about one deadline (it does not wait out the
// server), the timed-out call is counted, and Run stops promptly when its context ends mid-call.
func TestBreakSlowServerBeyondDeadline(t *testing.T) {
	h := newHarness(t, Config{CallTimeout: 300 * time.Millisecond, Interval: time.Hour})
	h.fleet()
	h.poll()
	before := len(h.series())
	h.sim.SetLatency(time.Hour)
	begin := time.Now()
	err := h.c.Poll(context.Background())
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("poll of a hanging server took %v, deadline 300ms", took)
	}
	if googleapi.Code(err) != codes.DeadlineExceeded {
		t.Errorf("poll: %v, want DeadlineExceeded", err)
	}
	if h.brkScrapeErr() == nil {
		t.Error("scrape succeeds after a timed-out poll")
	}
	if got := len(h.series()); got != before {
		t.Errorf("%d series after the time-out, want the %d kept", got, before)
	}
	if got := h.brkRequests(MethodGetCluster, codes.DeadlineExceeded); got != 1 {
		t.Errorf("GetCluster DeadlineExceeded = %v, want 1", got)
	}

	// Run stops promptly when its context ends in the middle of a slow call (call deadline far away).
	h2 := newHarness(t, Config{CallTimeout: 30 * time.Second, Interval: time.Hour})
	h2.fleet()
	h2.sim.SetLatency(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h2.c.Run(ctx) }()
	testenv.Eventually(t, 10*time.Second, "Run's first call", func() error {
		if h2.sim.Calls(gkesim.MethodGetCluster) < 1 {
			return fmt.Errorf("no GetCluster yet")
		}
		return nil
	})
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not stop within 3s of its context ending")
	}
	if strings.Contains(h2.log.String(), "poll failed") {
		t.Errorf("shutdown logged as a failed poll:\n%s", h2.log.String())
	}
}

// 1d. ListOperations with many operations (other clusters', finished ones): one call, the right pools in progress.
// v1 ListOperations has no page token, so a server repeating next_page_token cannot make the collector loop: this
// test also pins that (if the API grows paging, the collector must be revisited).
func TestBreakManyOperations(t *testing.T) {
	if fd := (&containerpb.ListOperationsResponse{}).ProtoReflect().Descriptor().Fields().ByName("next_page_token"); fd != nil {
		t.Fatalf("ListOperationsResponse now has %s: the collector reads only the first page", fd.FullName())
	}
	h := newHarness(t, Config{})
	h.fleet()
	other := h.sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "serve"})
	const many = 20000 // well over the 4 MiB default gRPC receive limit
	for i := range many {
		cl := other
		if i%2 == 0 {
			cl = h.name
		}
		op := h.sim.StartNodePoolOperation(cl, fmt.Sprintf("pool-%d", i%50), containerpb.Operation_UPGRADE_NODES, 3)
		if i%2 == 0 {
			h.sim.FinishOperation(op)
		}
	}
	live := h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_UPGRADE_NODES, 8)
	h.sim.SetNodesDone(live, 2)
	h.poll()
	if got := h.sim.Calls(gkesim.MethodListOperations); got != 1 {
		t.Errorf("%d ListOperations calls, want 1", got)
	}
	got := h.brkGatherNoDup()
	for k, v := range map[string]float64{
		"gke_node_pool_upgrade_in_progress{node_pool=a3-train,operation_type=upgrade_nodes}": 1,
		"gke_node_pool_upgrade_nodes{node_pool=a3-train,state=done}":                         2,
		"gke_node_pool_upgrade_nodes{node_pool=a3-train,state=total}":                        8,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "pool-") {
			t.Errorf("series of a finished or other cluster's operation: %s", k)
		}
	}
}

// 1e. A node pool deleted between GetCluster and its FetchNodePoolUpgradeInfo (NotFound): the cluster exists, so
// the collector must not tell the operator the cluster is not found, and the churn of one pool must not fail the
// scrape until the next interval.
func TestBreakPoolDeletedMidPoll(t *testing.T) {
	setup := func(t *testing.T) (*harness, error) {
		h := newHarness(t, Config{CallTimeout: 5 * time.Second})
		h.fleet()
		h.poll()
		h.sim.SetLatency(200 * time.Millisecond)
		errc := make(chan error, 1)
		go func() { errc <- h.c.Poll(context.Background()) }()
		// GetCluster has answered once ListOperations is called: delete a pool it listed.
		testenv.Eventually(t, 10*time.Second, "ListOperations called", func() error {
			if h.sim.Calls(gkesim.MethodListOperations) < 2 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		if err := h.sim.DeleteNodePool(h.name, "tpu-v5e"); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		h.sim.SetLatency(0)
		return h, err
	}
	t.Run("diagnosis", func(t *testing.T) {
		h, err := setup(t)
		if googleapi.Code(err) == codes.NotFound && strings.Contains(h.log.String(), "check --gke.cluster") {
			t.Errorf("a deleted node pool is told as a missing cluster: %v\n%s", err, h.log.String())
		}
	})
	t.Run("poll and scrape survive", func(t *testing.T) {
		h, err := setup(t)
		if err != nil {
			t.Errorf("poll failed because one pool went between calls: %v", err)
		}
		if err := h.brkScrapeErr(); err != nil {
			t.Errorf("scrape fails (until the next interval, NotFound is not retried sooner): %v", err)
		}
		got := h.series()
		if _, ok := got["gke_node_pool_version_info{node_pool=a3-train,version=1.32.9-gke.1000000}"]; !ok {
			t.Error("series of the surviving pools missing")
		}
	})
}

// 2a. Pools added and removed between polls: a removed pool's series go, an added one's come, a re-added pool
// carries only its new settings.
func TestBreakPoolChurn(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	h.poll()
	h.sim.DeleteNodePool(h.name, "l4-serve")
	h.sim.SetNodePool(h.name, &containerpb.NodePool{Name: "h100", Version: "1.33.5-gke.1080000", Status: containerpb.NodePool_PROVISIONING})
	h.clock.Add(5 * time.Minute)
	h.poll()
	got := h.brkGatherNoDup()
	for k := range got {
		if strings.Contains(k, "l4-serve") {
			t.Errorf("removed pool's series lingers: %s", k)
		}
	}
	if got["gke_node_pool_status{node_pool=h100,status=provisioning}"] != 1 {
		t.Errorf("added pool's status missing")
	}
	// Re-added with other settings: only the new ones.
	h.sim.SetNodePool(h.name, &containerpb.NodePool{Name: "l4-serve", Version: "1.34.0-gke.1", Status: containerpb.NodePool_RUNNING,
		UpgradeSettings: &containerpb.NodePool_UpgradeSettings{MaxSurge: 3, MaxUnavailable: 1}})
	h.clock.Add(5 * time.Minute)
	h.poll()
	got = h.brkGatherNoDup()
	var l4 []string
	for k := range got {
		if strings.Contains(k, "node_pool=l4-serve") {
			l4 = append(l4, k)
		}
	}
	if len(l4) != 3 {
		t.Errorf("re-added pool has %d series, want version, status, settings: %v", len(l4), l4)
	}
	if got["gke_node_pool_upgrade_settings_info{auto_upgrade=false,max_surge=3,max_unavailable=1,node_pool=l4-serve,strategy=surge}"] != 1 {
		t.Errorf("re-added pool's settings: %v", l4)
	}
}

// 2b. An operation going DONE (and one ABORTING's sibling going DONE): in-progress and node counts go.
func TestBreakOperationGoesDone(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	op := h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_UPGRADE_NODES, 8)
	pending := h.sim.StartNodePoolOperation(h.name, "l4-serve", containerpb.Operation_UPGRADE_NODES, 4)
	h.sim.UpdateOperation(pending, func(o *containerpb.Operation) { o.Status = containerpb.Operation_PENDING; o.Progress = nil })
	h.poll()
	got := h.brkGatherNoDup()
	if got["gke_node_pool_upgrade_in_progress{node_pool=a3-train,operation_type=upgrade_nodes}"] != 1 ||
		got["gke_node_pool_upgrade_in_progress{node_pool=l4-serve,operation_type=upgrade_nodes}"] != 1 {
		t.Fatalf("operations not in progress: %v", got)
	}
	h.sim.FinishOperation(op)
	h.sim.FinishOperation(pending)
	h.clock.Add(5 * time.Minute)
	h.poll()
	for k := range h.brkGatherNoDup() {
		if strings.HasPrefix(k, "gke_node_pool_upgrade_in_progress") || strings.HasPrefix(k, "gke_node_pool_upgrade_nodes") {
			t.Errorf("series of a DONE operation lingers: %s", k)
		}
	}
}

// 2c. Odd and empty versions: nothing panics or duplicates; an empty version is left out as the control plane's is
// (version="" means "no version label" to Prometheus).
func TestBreakOddVersions(t *testing.T) {
	h := newHarness(t, Config{})
	h.sim.SetCluster("p1", "us-central1", &containerpb.Cluster{
		Name: "train", CurrentMasterVersion: "",
		NodePools: []*containerpb.NodePool{
			{Name: "empty", Version: ""},
			{Name: "odd", Version: "1.33.5-gke.1080000+build/äöü \"quoted\"\n"},
			{Name: "same", Version: "1.30.0"},
		},
	})
	h.sim.SetUpgradeInfo(h.name, "empty", &containerpb.NodePoolUpgradeInfo{PatchTargetVersion: ptr(""), MinorTargetVersion: ptr("")})
	h.sim.SetUpgradeInfo(h.name, "odd", &containerpb.NodePoolUpgradeInfo{PatchTargetVersion: ptr("1.33.5-gke.1080000+build/äöü \"quoted\"\n")})
	h.sim.SetUpgradeInfo(h.name, "same", &containerpb.NodePoolUpgradeInfo{PatchTargetVersion: ptr(""), MinorTargetVersion: ptr("1.31.0")})
	h.poll()
	got := h.brkGatherNoDup()
	for k := range got {
		if strings.HasPrefix(k, "gke_cluster_control_plane_version_info") {
			t.Errorf("empty control-plane version exported: %s", k)
		}
		if strings.Contains(k, "node_pool=odd") && strings.HasPrefix(k, "gke_node_pool_upgrade_target_version_info") {
			t.Errorf("target equal to the version exported: %s", k)
		}
	}
	if got["gke_node_pool_upgrade_target_version_info{node_pool=same,version=1.31.0}"] != 1 {
		t.Error("minor target not exported when patch target is empty")
	}
	if _, ok := got["gke_node_pool_version_info{node_pool=empty,version=}"]; ok {
		t.Error(`pool with an empty version exported as gke_node_pool_version_info{version=""} (control plane's empty version is left out)`)
	}
	if problems, err := testutil.GatherAndLint(h.gatherer()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// 2d. Maintenance policy: a malformed RRULE is told once and leaves the other series; exclusions in the past or
// inverted are not exported; an exclusion in force until end of support (no end time) is; a pathological but
// parseable RRULE does not stall the poll.
func TestBreakMaintenancePolicy(t *testing.T) {
	set := func(h *harness, w *containerpb.MaintenanceWindow) {
		h.sim.UpdateCluster(h.name, func(c *containerpb.Cluster) { c.MaintenancePolicy = &containerpb.MaintenancePolicy{Window: w} })
	}
	recurring := func(start, end, rule string) *containerpb.MaintenanceWindow {
		return &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_RecurringWindow{RecurringWindow: &containerpb.RecurringTimeWindow{
			Window: &containerpb.TimeWindow{StartTime: ts(start), EndTime: ts(end)}, Recurrence: rule}}}
	}
	t.Run("malformed RRULE", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.fleet()
		set(h, recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=FORTNIGHTLY;BYDAY=XX"))
		for range 3 {
			h.poll()
			h.clock.Add(5 * time.Minute)
		}
		got := h.brkGatherNoDup()
		if _, ok := got["gke_cluster_maintenance_window_next_start_timestamp_seconds{}"]; ok {
			t.Error("window series from a malformed RRULE")
		}
		if _, ok := got["gke_node_pool_version_info{node_pool=a3-train,version=1.32.9-gke.1000000}"]; !ok {
			t.Error("other series lost to a malformed RRULE")
		}
		if n := strings.Count(h.log.String(), "cannot read"); n != 1 {
			t.Errorf("malformed RRULE told %d times in 3 polls, want once:\n%s", n, h.log.String())
		}
		if h.brkScrapeErr() != nil {
			t.Error("a malformed RRULE fails the scrape")
		}
	})
	t.Run("exclusions past or inverted", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.fleet()
		w := recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=WEEKLY;BYDAY=SA")
		w.MaintenanceExclusions = map[string]*containerpb.TimeWindow{
			"past":     {StartTime: ts("2025-01-01T00:00:00Z"), EndTime: ts("2025-02-01T00:00:00Z")},
			"inverted": {StartTime: ts("2026-07-01T00:00:00Z"), EndTime: ts("2026-05-01T00:00:00Z")},
		}
		set(h, w)
		h.poll()
		got := h.brkGatherNoDup()
		for k := range got {
			if strings.Contains(k, "exclusion=past") || strings.Contains(k, "exclusion=inverted") {
				t.Errorf("exclusion not in force exported: %s", k)
			}
		}
	})
}

// 2e. Huge numbers of pools: one upgrade-info call per pool, every pool's series, no duplicates.
func TestBreakHugePools(t *testing.T) {
	const pools = 1000
	h := newHarness(t, Config{})
	c := &containerpb.Cluster{Name: "train", CurrentMasterVersion: "1.33.5-gke.1"}
	for i := range pools {
		c.NodePools = append(c.NodePools, &containerpb.NodePool{Name: fmt.Sprintf("p%04d", i), Version: "1.33.5-gke.1", Status: containerpb.NodePool_RUNNING})
	}
	h.sim.SetCluster("p1", "us-central1", c)
	begin := time.Now()
	h.poll()
	t.Logf("poll of %d pools took %v", pools, time.Since(begin))
	if got := h.sim.Calls(gkesim.MethodFetchNodePoolUpgradeInfo); got != pools {
		t.Errorf("%d upgrade-info calls, want %d", got, pools)
	}
	got := h.brkGatherNoDup()
	var versions int
	for k := range got {
		if strings.HasPrefix(k, "gke_node_pool_version_info") {
			versions++
		}
	}
	if versions != pools {
		t.Errorf("%d pools' versions, want %d", versions, pools)
	}
}

// 3a. Scrapes concurrent with polls (Run) and state churn, under -race: each scrape is one poll's whole answer
// (every pool with a version has its status and settings), no gather error, no duplicate.
func TestBreakConcurrentScrapesAndPolls(t *testing.T) {
	h := newHarness(t, Config{Interval: 20 * time.Millisecond, CallTimeout: 5 * time.Second})
	h.c.now = time.Now
	h.fleet()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.c.Run(ctx) }()
	wg.Add(1)
	go func() { // churn
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("churn-%d", i%7)
			if i%2 == 0 {
				h.sim.SetNodePool(h.name, &containerpb.NodePool{Name: name, Version: fmt.Sprintf("1.33.%d", i), Status: containerpb.NodePool_RUNNING})
				op := h.sim.StartNodePoolOperation(h.name, name, containerpb.Operation_UPGRADE_NODES, int64(i))
				if i%4 == 0 {
					h.sim.FinishOperation(op)
				}
			} else {
				h.sim.DeleteNodePool(h.name, name)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	testenv.Eventually(t, 30*time.Second, "first poll", func() error { return h.brkScrapeErr() })
	errs := make(chan error, 1000)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				families, err := h.gatherer().Gather()
				if err != nil {
					errs <- err
					continue
				}
				pools := map[string][]string{}
				for _, mf := range families {
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							if l.GetName() == "node_pool" {
								pools[l.GetValue()] = append(pools[l.GetValue()], mf.GetName())
							}
						}
					}
				}
				for p, names := range pools {
					n := strings.Join(names, ",")
					if strings.Contains(n, "gke_node_pool_version_info") &&
						(!strings.Contains(n, "gke_node_pool_status") || !strings.Contains(n, "gke_node_pool_upgrade_settings_info")) {
						errs <- fmt.Errorf("scrape mixes polls: pool %s has %s", p, n)
					}
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := h.brkRequests(MethodGetCluster, codes.OK); got < 5 {
		t.Errorf("only %v polls in 2s at a 20ms interval", got)
	}
	t.Logf("%v polls", h.brkRequests(MethodGetCluster, codes.OK))
}

// 3b. Describe/Collect consistency and lint, of the series and of the self-monitoring the collector registers.
func TestBreakDescribeCollectLint(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	h.sim.SetNodesDone(h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_UPGRADE_NODES, 8), 3)
	h.poll()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(updater{h.c}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic gather: %v", err)
	}
	for name, c := range map[string]prometheus.Collector{"series": updater{h.c}, "requests": h.c.requests, "last success": h.c.lastSuccess} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil || len(problems) > 0 {
			t.Errorf("%s: lint %v %v", name, problems, err)
		}
	}
	if problems, err := testutil.GatherAndLint(h.gatherer()); err != nil || len(problems) > 0 {
		t.Errorf("gather lint: %v %v", problems, err)
	}
	h.brkGatherNoDup()
	if n := testutil.CollectAndCount(updater{h.c}); n == 0 {
		t.Error("no series")
	}
}
