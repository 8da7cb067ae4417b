package cloudmonitoring

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// harness is a simulator and a collector reading it through the real client, on one manual clock.
type harness struct {
	t     testing.TB
	clock *testenv.Clock
	sim   *monsim.Server
	addr  string
}

func newHarness(t testing.TB, opts monsim.Options) *harness {
	t.Helper()
	h := &harness{t: t, clock: testenv.NewClock(t0)}
	opts.Now = h.clock.Now
	h.sim = monsim.New(opts)
	addr, err := h.sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.sim.Close)
	h.addr = addr
	return h
}

func testConfig() Config {
	return Config{Projects: []string{"p1"}, Interval: time.Minute, Lookback: 5 * time.Minute, IdleTimeout: time.Hour}
}

// exporter is one collector process: the collector and the registry of its self-monitoring series.
type exporter struct {
	h   *harness
	c   *Collector
	reg *prometheus.Registry
}

func (h *harness) newExporter(cfg Config) *exporter {
	h.t.Helper()
	client, err := NewClient(context.Background(), h.addr, true)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { client.Close() })
	reg := prometheus.NewRegistry()
	c, err := New(slog.New(slog.DiscardHandler), client, cfg, reg)
	if err != nil {
		h.t.Fatal(err)
	}
	c.now = h.clock.Now
	c.jitter = func() float64 { return 0 }
	return &exporter{h: h, c: c, reg: reg}
}

func (h *harness) record(i monsim.Interruption) {
	h.t.Helper()
	if i.Project == "" {
		i.Project = "p1"
	}
	if i.Location == "" {
		i.Location = "us-central1"
	}
	if i.Cluster == "" {
		i.Cluster = "train"
	}
	if i.Time.IsZero() {
		i.Time = h.clock.Now()
	}
	if err := h.sim.Record(i); err != nil {
		h.t.Fatalf("recording %+v: %v", i, err)
	}
}

// poll lists once at the current time and fails the test on an error.
func (e *exporter) poll() {
	e.h.t.Helper()
	if err := e.c.Poll(context.Background()); err != nil {
		e.h.t.Fatalf("poll at %v: %v", e.h.clock.Now().Sub(t0), err)
	}
}

// updater exposes a Collector's Update as a prometheus.Collector, as the /metrics handler calls it.
type updater struct{ c *Collector }

func (u updater) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(u, ch) }
func (u updater) Collect(ch chan<- prometheus.Metric) { _ = u.c.Update(ch) }

// gatherer serves the counters next to the self-monitoring series.
func (e *exporter) gatherer() prometheus.Gatherer {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(updater{e.c})
	return prometheus.Gatherers{e.reg, reg}
}

func (e *exporter) compare(step, want string, names ...string) {
	e.h.t.Helper()
	if err := testutil.GatherAndCompare(e.gatherer(), strings.NewReader(want), names...); err != nil {
		e.h.t.Errorf("%s: %v", step, err)
	}
}

// values maps every interruption series, rendered as name{labels}, to its value.
func (e *exporter) values() map[string]float64 {
	e.h.t.Helper()
	families, err := e.gatherer().Gather()
	if err != nil {
		e.h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "gke_node") {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+seriesName(m)] = m.GetCounter().GetValue()
		}
	}
	return out
}

func seriesName(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

const counterNames = "gke_node_interruptions_total gke_node_pool_interruptions_total"

func names(s string) []string { return strings.Fields(s) }

func TestScriptedHistory(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())

	e.poll() // lists the day so far: nothing
	e.compare("before any interruption", `
# HELP gke_disruption_cloudmonitoring_requests_total Cloud Monitoring ListTimeSeries calls (one per page), by metric type and gRPC code.
# TYPE gke_disruption_cloudmonitoring_requests_total counter
gke_disruption_cloudmonitoring_requests_total{code="OK",metric="kubernetes.io/node/interruption_count"} 1
gke_disruption_cloudmonitoring_requests_total{code="OK",metric="kubernetes.io/node_pool/interruption_count"} 1
# HELP gke_disruption_cloudmonitoring_last_success_timestamp_seconds When the latest listings of every metric and project had all succeeded, in seconds since the epoch.
# TYPE gke_disruption_cloudmonitoring_last_success_timestamp_seconds gauge
gke_disruption_cloudmonitoring_last_success_timestamp_seconds 1.7487792e+09
`, append(names(counterNames), "gke_disruption_cloudmonitoring_requests_total", "gke_disruption_cloudmonitoring_last_success_timestamp_seconds")...)

	// 12:00:30 a GPU node is interrupted for maintenance; the sample ending 12:01 carries it.
	h.clock.Add(30 * time.Second)
	h.record(monsim.Interruption{Node: "gpu-1", NodePool: "a3", Type: "MaintenanceEvent", Reason: "HW/SW Maintenance", Count: 1})
	h.clock.Add(30 * time.Second)
	e.poll() // 12:01: the series appear at zero
	e.compare("new series", `
# HELP gke_node_interruptions_total Node interruptions reported by Cloud Monitoring (kubernetes.io/node/interruption_count).
# TYPE gke_node_interruptions_total counter
gke_node_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="HW/SW Maintenance",interruption_type="MaintenanceEvent",node="gpu-1"} 0
# HELP gke_node_pool_interruptions_total Node pool interruptions reported by Cloud Monitoring (kubernetes.io/node_pool/interruption_count).
# TYPE gke_node_pool_interruptions_total counter
gke_node_pool_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="HW/SW Maintenance",interruption_type="MaintenanceEvent",node_pool="a3"} 0
`, names(counterNames)...)

	// 12:01:10 two more nodes of the pool go, one a Spot preemption; an unknown type and reason pass through.
	h.clock.Add(10 * time.Second)
	h.record(monsim.Interruption{Node: "gpu-2", NodePool: "a3", Type: "MaintenanceEvent", Reason: "HW/SW Maintenance", Count: 1})
	h.record(monsim.Interruption{Node: "spot-1", NodePool: "spot", Type: "PreemptionEvent", Reason: "Other", Count: 1})
	h.record(monsim.Interruption{Node: "tpu-1", NodePool: "v5e", Type: "FutureEvent", Reason: "Solar flare", Count: 3})
	h.clock.Add(50 * time.Second)
	e.poll() // 12:02: gpu-1 and a3 show their first count; the new series appear at zero (a3 is not new)
	h.clock.Add(time.Minute)
	e.poll() // 12:03
	h.clock.Add(time.Minute)
	e.poll() // 12:04
	e.compare("after three more interruptions", `
# HELP gke_node_interruptions_total Node interruptions reported by Cloud Monitoring (kubernetes.io/node/interruption_count).
# TYPE gke_node_interruptions_total counter
gke_node_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="HW/SW Maintenance",interruption_type="MaintenanceEvent",node="gpu-1"} 1
gke_node_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="HW/SW Maintenance",interruption_type="MaintenanceEvent",node="gpu-2"} 1
gke_node_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="Other",interruption_type="PreemptionEvent",node="spot-1"} 1
gke_node_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="Solar flare",interruption_type="FutureEvent",node="tpu-1"} 3
# HELP gke_node_pool_interruptions_total Node pool interruptions reported by Cloud Monitoring (kubernetes.io/node_pool/interruption_count).
# TYPE gke_node_pool_interruptions_total counter
gke_node_pool_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="HW/SW Maintenance",interruption_type="MaintenanceEvent",node_pool="a3"} 2
gke_node_pool_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="Other",interruption_type="PreemptionEvent",node_pool="spot"} 1
gke_node_pool_interruptions_total{cluster_location="us-central1",cluster_name="train",cluster_project_id="p1",interruption_reason="Solar flare",interruption_type="FutureEvent",node_pool="v5e"} 3
`, names(counterNames)...)

	// Ten more polls: every point is in several overlapping windows, and still counted once.
	for range 10 {
		h.clock.Add(time.Minute)
		e.poll()
	}
	want := e.values()
	if got := want[`gke_node_pool_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=HW/SW Maintenance,interruption_type=MaintenanceEvent,node_pool=a3}`]; got != 2 {
		t.Errorf("a3 pool after ten more polls = %v, want 2", got)
	}
	if got := want[`gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=Solar flare,interruption_type=FutureEvent,node=tpu-1}`]; got != 3 {
		t.Errorf("tpu-1 after ten more polls = %v, want 3", got)
	}
	if calls := h.sim.Calls(); calls != 2*15 {
		t.Errorf("%d calls for 15 polls of 2 metrics, want %d", calls, 2*15)
	}
}

func TestLatePointsCountedOnce(t *testing.T) {
	for _, delay := range []time.Duration{0, 90 * time.Second, 150 * time.Second, 5 * time.Minute} {
		t.Run(delay.String(), func(t *testing.T) {
			h := newHarness(t, monsim.Options{Delay: delay})
			e := h.newExporter(testConfig()) // look-back 5m: the longest delay still counted
			e.poll()
			h.clock.Add(10 * time.Second)
			h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "TerminationEvent", Reason: "HostError", Count: 2})
			key := `gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=HostError,interruption_type=TerminationEvent,node=n1}`
			h.clock.Add(50 * time.Second)
			var history []float64
			for range 15 {
				e.poll()
				history = append(history, e.values()[key])
				h.clock.Add(time.Minute)
			}
			// The point ends at 1m and is visible from 1m+delay: the first poll after that sees the series, at
			// zero, and the next one shows the count, which never changes again.
			visibleAt := int((time.Minute + delay + time.Minute - 1) / time.Minute) // polls happen on whole minutes
			for i, v := range history {
				minute := i + 1
				want := 0.0
				if minute > visibleAt {
					want = 2
				}
				if v != want {
					t.Errorf("delay %v: at minute %d the counter is %v, want %v (history %v)", delay, minute, v, want, history)
					break
				}
			}
		})
	}
}

func TestPointsLaterThanTheLookbackAreMissed(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 7 * time.Minute})
	e := h.newExporter(testConfig())
	e.poll()
	h.record(monsim.Interruption{Node: "n1", Type: "T", Reason: "R", Count: 1})
	for range 12 {
		h.clock.Add(time.Minute)
		e.poll()
	}
	if v := e.values(); len(v) != 0 {
		t.Errorf("a point 7m late with a 5m look-back was counted: %v", v)
	}
}

func TestRepeatedPollsAtOneInstant(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())
	e.poll()
	h.record(monsim.Interruption{Node: "n1", Type: "T", Reason: "R", Count: 1})
	h.clock.Add(time.Minute)
	for range 3 {
		e.poll()
	}
	h.clock.Add(time.Minute)
	for range 3 {
		e.poll()
	}
	for k, v := range e.values() {
		if v != 1 {
			t.Errorf("%s = %v after polling the same window repeatedly, want 1", k, v)
		}
	}
}

func TestErrorStormKeepsCountersMonotonic(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())
	e.poll()
	h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "T", Reason: "R", Count: 1})
	for range 3 {
		h.clock.Add(time.Minute)
		e.poll()
	}
	last := e.values()
	lastSuccess := testutil.ToFloat64(e.c.lastSuccess)

	// Ten minutes of failures, twice the look-back, while interruptions keep coming.
	storm := []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable, codes.PermissionDenied}
	for minute := range 10 {
		code := storm[minute%len(storm)]
		h.sim.Fail(code, -1)
		h.clock.Add(time.Minute)
		h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "T", Reason: "R", Count: 1})
		if err := e.c.Poll(context.Background()); err == nil {
			t.Fatalf("minute %d of the storm: poll succeeded", minute)
		}
		if err := e.c.Update(make(chan prometheus.Metric, 100)); err == nil {
			t.Errorf("minute %d of the storm: Update reports success", minute)
		}
		now := e.values()
		for k, v := range last {
			if now[k] != v {
				t.Errorf("minute %d of the storm: %s = %v, want %v kept", minute, k, now[k], v)
			}
		}
		if got := testutil.ToFloat64(e.c.lastSuccess); got != lastSuccess {
			t.Errorf("minute %d of the storm: last success moved to %v", minute, got)
		}
		for _, q := range e.c.queries {
			wantDue := h.clock.Now().Add(time.Minute)
			if retryable(code) {
				wantDue = h.clock.Now().Add(backoff(time.Minute, q.failures, 0))
			}
			if !q.due.Equal(wantDue) {
				t.Errorf("minute %d (%v): next attempt in %v, want %v", minute, code, q.due.Sub(h.clock.Now()), wantDue.Sub(h.clock.Now()))
			}
		}
	}
	for _, code := range []string{"Unavailable", "DeadlineExceeded", "ResourceExhausted", "PermissionDenied"} {
		if v := testutil.ToFloat64(e.c.requests.WithLabelValues(MetricNodeInterruptions, code)); v == 0 {
			t.Errorf("requests_total{code=%q} not counted", code)
		}
	}

	// Recovery: the first window reaches back to the last success, so the storm's ten interruptions all count.
	h.sim.Fail(codes.OK, 0)
	for range 2 {
		h.clock.Add(time.Minute)
		e.poll()
		if err := e.c.Update(make(chan prometheus.Metric, 100)); err != nil {
			t.Errorf("Update after recovery: %v", err)
		}
	}
	for k, v := range e.values() {
		if v != 11 {
			t.Errorf("after the storm %s = %v, want 11", k, v)
		}
	}
	if got := testutil.ToFloat64(e.c.lastSuccess); got != float64(h.clock.Now().Unix()) {
		t.Errorf("last success = %v, want %v", got, h.clock.Now().Unix())
	}
}

func TestPagination(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	cfg := testConfig()
	cfg.PageSize = 2
	e := h.newExporter(cfg)
	e.poll()
	// Five nodes in one pool, one of them interrupted in three different minutes: 7 node points, 3 pool points.
	for m := range 3 {
		for _, node := range []string{"a", "b", "c", "d", "e"} {
			if node == "a" || m == 0 {
				h.record(monsim.Interruption{Node: node, NodePool: "pool", Type: "T", Reason: "R", Count: 1})
			}
		}
		h.clock.Add(time.Minute)
		e.poll()
	}
	h.clock.Add(time.Minute)
	before := h.sim.Calls()
	e.poll()
	if calls := h.sim.Calls() - before; calls != 4+2 {
		t.Errorf("one poll over 7 node and 3 pool points in pages of 2: %d calls, want 6", calls)
	}
	want := map[string]float64{}
	for _, node := range []string{"a", "b", "c", "d", "e"} {
		want["gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node="+node+"}"] = 1
	}
	want["gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node=a}"] = 3
	want["gke_node_pool_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node_pool=pool}"] = 7
	if got := e.values(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counters across pages:\n got %v\nwant %v", got, want)
	}
}

func TestClusterFilter(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	cfg := testConfig()
	cfg.Clusters = []Cluster{{Name: "train"}}
	e := h.newExporter(cfg)
	e.poll()
	h.record(monsim.Interruption{Cluster: "train", Node: "t1", NodePool: "a3", Type: "T", Reason: "R", Count: 1})
	h.record(monsim.Interruption{Cluster: "serve", Node: "s1", NodePool: "l4", Type: "T", Reason: "R", Count: 1})
	h.record(monsim.Interruption{Cluster: "trainer", Node: "x1", NodePool: "a3", Type: "T", Reason: "R", Count: 1})
	for range 2 {
		h.clock.Add(time.Minute)
		e.poll()
	}
	want := map[string]float64{
		"gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node=t1}":           1,
		"gke_node_pool_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node_pool=a3}": 1,
	}
	if got := e.values(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with --cloudmonitoring.cluster=train:\n got %v\nwant %v", got, want)
	}
}

func TestMultipleProjects(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	cfg := testConfig()
	cfg.Projects = []string{"p1", "p2", "p3"}
	e := h.newExporter(cfg)
	e.poll()
	h.record(monsim.Interruption{Project: "p2", Node: "n", Type: "T", Reason: "R", Count: 1})
	h.clock.Add(time.Minute)
	e.poll()
	h.clock.Add(time.Minute)
	before := h.sim.Calls()
	e.poll()
	if calls := h.sim.Calls() - before; calls != 6 {
		t.Errorf("a poll of 2 metrics in 3 projects made %d calls, want 6", calls)
	}
	want := map[string]float64{"gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p2,interruption_reason=R,interruption_type=T,node=n}": 1}
	if got := e.values(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestUpdateBeforeTheFirstPoll(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())
	if err := e.c.Update(make(chan prometheus.Metric, 1)); err == nil {
		t.Error("Update succeeded before any listing")
	}
	e.poll()
	if err := e.c.Update(make(chan prometheus.Metric, 1)); err != nil {
		t.Errorf("Update after a successful poll: %v", err)
	}
}

func TestRunPollsOnItsInterval(t *testing.T) {
	sim := monsim.New(monsim.Options{SamplePeriod: time.Millisecond})
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	client, err := NewClient(context.Background(), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cfg := Config{Projects: []string{"p1"}, Interval: 20 * time.Millisecond, Lookback: time.Minute, IdleTimeout: time.Hour}
	c, err := New(slog.New(slog.DiscardHandler), client, cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()

	waitFor(t, "the first poll", func() error { return c.Update(make(chan prometheus.Metric, 10)) })
	if err := sim.Record(monsim.Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n", Type: "T", Reason: "R", Count: 4}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the interruption counted", func() error {
		ch := make(chan prometheus.Metric, 10)
		if err := c.Update(ch); err != nil {
			return err
		}
		close(ch)
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				return err
			}
			if d.GetCounter().GetValue() == 4 {
				return nil
			}
		}
		return fmt.Errorf("no counter at 4 yet after %d calls", sim.Calls())
	})

	// Throttled: the collector reports the failure, and recovers when the API does.
	sim.Fail(codes.ResourceExhausted, -1)
	waitFor(t, "the failure reported", func() error {
		if c.Update(make(chan prometheus.Metric, 10)) == nil {
			return fmt.Errorf("still healthy")
		}
		return nil
	})
	sim.Fail(codes.OK, 0)
	waitFor(t, "the recovery", func() error { return c.Update(make(chan prometheus.Metric, 10)) })

	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// waitFor polls check until it returns nil, failing with step after a generous bound.
func waitFor(t *testing.T, step string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 30s: %v", step, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(c *Config){
		"no project":          func(c *Config) { c.Projects = nil },
		"project with slash":  func(c *Config) { c.Projects = []string{"projects/p1"} },
		"project twice":       func(c *Config) { c.Projects = []string{"p1", "p2", "p1"} },
		"empty cluster":       func(c *Config) { c.Clusters = []Cluster{{Location: "us-central1"}} },
		"cluster twice":       func(c *Config) { c.Clusters = []Cluster{{Name: "a"}, {Name: "a"}} },
		"negative page limit": func(c *Config) { c.MaxPages = -1 },
		"zero interval":       func(c *Config) { c.Interval = 0 },
		"negative look-back":  func(c *Config) { c.Lookback = -time.Minute },
		"zero idle timeout":   func(c *Config) { c.IdleTimeout = 0 },
		"page size too large": func(c *Config) { c.PageSize = maxPageSize + 1 },
	} {
		cfg := testConfig()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	if err := testConfig().Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	if _, err := NewClient(context.Background(), "", true); err == nil {
		t.Error("NewClient accepted plaintext without an endpoint")
	}
}
