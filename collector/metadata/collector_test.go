package metadata

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

const testNode = "gke-a3-pool-1a2b"

var testInstance = gkesim.Instance{
	Name:             testNode,
	ID:               "4520031799277581759",
	Zone:             "us-central1-a",
	ProjectID:        "demo-project",
	NumericProjectID: "123456789012",
}

// testConfig keeps waits short; the hanging GETs still hang for seconds, as on GCE.
var testConfig = Config{
	TimeoutSec:         5,
	MinBackoff:         10 * time.Millisecond,
	MaxBackoff:         200 * time.Millisecond,
	MaxIdlePoll:        200 * time.Millisecond,
	UnsupportedRecheck: 100 * time.Millisecond,
}

// startSim serves sim on loopback and points the metadata library at it.
func startSim(t testing.TB, sim *gkesim.Server) {
	t.Helper()
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		ts.Close()
	})
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
}

type agent struct {
	*Collector
	reg  *prometheus.Registry
	stop func()
}

// startAgent runs a collector until the test ends (or stop is called) and waits until it is ready.
func startAgent(t testing.TB, cfg Config) *agent {
	t.Helper()
	a := startAgentUnready(t, cfg)
	select {
	case <-a.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not become ready: not every path answered")
	}
	return a
}

func startAgentUnready(t testing.TB, cfg Config) *agent {
	t.Helper()
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := New(logger, testNode, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	a := &agent{Collector: c, reg: reg}
	a.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(a.stop)
	return a
}

// series adapts the collector to a prometheus.Collector for testutil.
type series struct{ c *Collector }

func (s series) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{maintenanceEventDesc, preemptedDesc, upcomingInfoDesc, windowStartDesc, windowEndDesc, latestWindowStartDesc} {
		ch <- d
	}
}

// Collect sends the series even while Update reports a failing path: they are the last known state.
func (s series) Collect(ch chan<- prometheus.Metric) { _ = s.c.Update(ch) }

func golden(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join("testdata", name+".prom")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file: %v", err)
	}
	return string(b)
}

// expectGolden waits, on the agent's change signal, until its series are those of testdata/<name>.prom.
func expectGolden(t *testing.T, a *agent, name string) {
	t.Helper()
	want := golden(t, name)
	var err error
	waitFor(t, a.Collector, "series of "+name, func() bool {
		err = testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(want))
		return err == nil
	}, func() string { return err.Error() })
}

// waitFor re-checks cond on every change the collector signals, up to a bound; detail explains a failure.
func waitFor(t testing.TB, c *Collector, what string, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := c.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s did not happen: %s", what, detail())
		}
	}
}

// poll re-checks cond, for conditions no change signal announces (request counts).
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitParked(t testing.TB, sim *gkesim.Server, key string) {
	t.Helper()
	poll(t, "a hanging GET parked on "+key, func() bool { return sim.Waiting(key) == 1 })
}

var window = time.Date(2025, 3, 4, 1, 0, 0, 0, time.UTC)

// plannedUpdate is the common case: a reschedulable planned update with a two-hour window.
var plannedUpdate = gkesim.Maintenance{
	Type: "SCHEDULED", Status: "PENDING", CanReschedule: true,
	WindowStart: window, WindowEnd: window.Add(2 * time.Hour), LatestWindowStart: window.Add(24 * time.Hour),
	Reasons: []string{"PLANNED_UPDATE"},
}

// TestDocumentedValues walks a node through its documented metadata values and compares the series with golden
// files after each step.
func TestDocumentedValues(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	a := startAgent(t, testConfig)

	steps := []struct {
		golden string
		script func()
	}{
		{"healthy", func() {}},
		{"scheduled", func() {
			sim.ScheduleMaintenance(plannedUpdate)
		}},
		{"ongoing", sim.StartMaintenance},
		{"healthy", sim.FinishMaintenance},
		{"migrate", func() { sim.Set(gkesim.KeyMaintenanceEvent, gkesim.EventMigrate) }},
		{"healthy", func() { sim.Set(gkesim.KeyMaintenanceEvent, gkesim.EventNone) }},
		{"unscheduled_gpu_failure", func() {
			sim.Set(gkesim.KeyUpcomingMaintenance, `{"type":"UNSCHEDULED","maintenance_status":"ONGOING","can_reschedule":false,`+
				`"window_start_time":"2025-03-04T01:00:00Z","maintenance_reasons":["FAILURE_NVLINK","FAILURE_GPU","FAILURE_GPU"]}`)
		}},
		{"unknown_enums", func() {
			sim.Set(gkesim.KeyMaintenanceEvent, "SOME_FUTURE_EVENT")
			sim.Set(gkesim.KeyUpcomingMaintenance, `{"type":"NEW_KIND","maintenance_status":"UNKNOWN","can_reschedule":"TRUE"}`)
		}},
		{"preempted", func() {
			sim.Reset()
			sim.Preempt()
		}},
	}
	for i, step := range steps {
		step.script()
		expectGolden(t, a, step.golden)
		if t.Failed() {
			t.Fatalf("step %d (%s) failed", i, step.golden)
		}
	}
	if got := testutil.ToFloat64(a.parseErrors.WithLabelValues(pathUpcomingMaintenance)); got != 0 {
		t.Errorf("parse errors on documented values: %v", got)
	}
}

// TestGarbage: a value that cannot be read drops what it cannot say, counts a parse error, and fails its path
// (success 0, last success held) for as long as the server gives it; a readable value heals it.
func TestGarbage(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	cfg := testConfig
	cfg.TimeoutSec = 1 // the same value answered again within a second
	a := startAgent(t, cfg)
	sim.ScheduleMaintenance(plannedUpdate)
	expectGolden(t, a, "scheduled")

	parseErrors := func(path string) float64 { return testutil.ToFloat64(a.parseErrors.WithLabelValues(path)) }
	for _, tc := range []struct {
		name, key, value, golden string
	}{
		{"malformed JSON drops the maintenance", gkesim.KeyUpcomingMaintenance, `{"type":"SCHEDULED",`, "healthy"},
		{"bad timestamp drops only that series", gkesim.KeyUpcomingMaintenance,
			`{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true","window_start_time":"soon",` +
				`"window_end_time":"2025-03-04T03:00:00Z","maintenance_reasons":["PLANNED_UPDATE"]}`, "bad_timestamp"},
		{"garbage can_reschedule reads false", gkesim.KeyUpcomingMaintenance,
			`{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"yes please"}`, "garbage_can_reschedule"},
		{"HTML maintenance event", gkesim.KeyMaintenanceEvent, "<html><body>oops</body></html>", "no_event"},
		{"garbage preempted", gkesim.KeyPreempted, "PERHAPS", "no_event_no_preempted"},
		{"oversized maintenance event", gkesim.KeyMaintenanceEvent, strings.Repeat("TERMINATE_", maxBodyBytes), "no_event_no_preempted"},
	} {
		before := parseErrors(tc.key)
		sim.Set(tc.key, tc.value)
		expectGolden(t, a, tc.golden)
		poll(t, tc.name+": parse error counted", func() bool { return parseErrors(tc.key) == before+1 })
		poll(t, tc.name+": reported as a failure", func() bool { err := updateErr(a); return err != nil && strings.Contains(err.Error(), tc.key) })
		held, answered := lastSuccess(a, tc.key), testutil.ToFloat64(a.requests.WithLabelValues(tc.key, "200"))
		poll(t, tc.name+": the value answered again", func() bool {
			return testutil.ToFloat64(a.requests.WithLabelValues(tc.key, "200")) > answered
		})
		if err := updateErr(a); err == nil {
			t.Errorf("%s: success while the value cannot be read", tc.name)
		}
		if got := lastSuccess(a, tc.key); got != held {
			t.Errorf("%s: last success moved from %v to %v on an unreadable value", tc.name, held, got)
		}
		if t.Failed() {
			t.Fatalf("%s failed", tc.name)
		}
	}

	sim.Reset()
	expectGolden(t, a, "healthy")
	poll(t, "success again", func() bool { return updateErr(a) == nil })
}

// TestChangeWithinOneRoundTrip checks that a change is delivered by the hanging GET already parked on the server,
// not by a later poll.
func TestChangeWithinOneRoundTrip(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	a := startAgent(t, testConfig)
	for _, step := range []struct {
		key    string
		script func()
		golden string
	}{
		{gkesim.KeyMaintenanceEvent, sim.StartMaintenance, "terminate"},
		{gkesim.KeyPreempted, sim.Preempt, "terminate_preempted"},
	} {
		waitParked(t, sim, step.key)
		requests := sim.Requests(step.key)
		step.script()
		expectGolden(t, a, step.golden)
		// The parked request answered; at most the next hanging GET has been sent since.
		if n := sim.Requests(step.key) - requests; n > 1 {
			t.Errorf("%s: %d requests after the change, want at most 1 (the next hanging GET)", step.key, n)
		}
	}
}

func TestNothingScheduled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		style     gkesim.NothingScheduled
		supported float64
	}{
		{"empty object", gkesim.NothingScheduledEmptyObject, 1},
		{"NONE", gkesim.NothingScheduledNone, 1},
		{"503 no notifications", gkesim.NothingScheduledUnavailable, 1},
		{"404 unsupported", gkesim.NothingScheduledUnsupported, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := testInstance
			inst.NothingScheduled = tc.style
			sim := gkesim.New(inst)
			startSim(t, sim)
			a := startAgent(t, testConfig)
			expectGolden(t, a, "healthy")
			if got := testutil.ToFloat64(a.supported.WithLabelValues(pathUpcomingMaintenance)); got != tc.supported {
				t.Errorf("path_supported = %v, want %v", got, tc.supported)
			}

			// A 503 answers at once, without parking; the agent asks again after a pause.
			if tc.style == gkesim.NothingScheduledEmptyObject || tc.style == gkesim.NothingScheduledNone {
				waitParked(t, sim, gkesim.KeyUpcomingMaintenance)
			}
			if err := a.Update(make(chan prometheus.Metric, 10)); err != nil {
				t.Errorf("nothing scheduled reads as a failure: %v", err)
			}
			sim.ScheduleMaintenance(plannedUpdate)
			expectGolden(t, a, "scheduled")
			if got := testutil.ToFloat64(a.supported.WithLabelValues(pathUpcomingMaintenance)); got != 1 {
				t.Errorf("path_supported after a value = %v, want 1", got)
			}
			sim.FinishMaintenance()
			expectGolden(t, a, "healthy")
			if got := testutil.ToFloat64(a.parseErrors.WithLabelValues(pathUpcomingMaintenance)); got != 0 {
				t.Errorf("parse errors = %v, want 0", got)
			}
		})
	}
}

func TestServiceUnavailableStorm(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	a := startAgent(t, testConfig)
	sim.ScheduleMaintenance(plannedUpdate)
	expectGolden(t, a, "scheduled")

	// The storm hits every request after the parked one, which the next change releases.
	const storm = 14
	waitParked(t, sim, gkesim.KeyUpcomingMaintenance)
	sim.Fail(gkesim.KeyUpcomingMaintenance, http.StatusServiceUnavailable, storm)
	sim.StartMaintenance()
	expectGolden(t, a, "ongoing")
	failed := func() float64 {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathUpcomingMaintenance, "503"))
	}
	poll(t, "the storm's 503s reaching the agent", func() bool { return failed() == storm })
	waitParked(t, sim, gkesim.KeyUpcomingMaintenance)
	if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "ongoing"))); err != nil {
		t.Errorf("series after the storm: %v", err)
	}
	sim.FinishMaintenance()
	expectGolden(t, a, "healthy")
}

func TestNotReadyUntilEveryPathAnswers(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	const storm = 12
	sim.Fail(gkesim.KeyUpcomingMaintenance, http.StatusServiceUnavailable, storm)
	a := startAgentUnready(t, testConfig)
	poll(t, "the first failed call on upcoming-maintenance", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathUpcomingMaintenance, "503")) >= 6
	})
	waitFor(t, a.Collector, "the other paths answering", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, event := a.lastAnswer[pathMaintenanceEvent]
		_, preempted := a.lastAnswer[pathPreempted]
		return event && preempted
	}, func() string { return "no answer recorded" })
	select {
	case <-a.Ready():
		if testutil.ToFloat64(a.requests.WithLabelValues(pathUpcomingMaintenance, "503")) < storm {
			t.Fatal("ready before upcoming-maintenance answered")
		}
	default:
	}
	select {
	case <-a.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("not ready after the storm ended")
	}
	expectGolden(t, a, "healthy")
}

func TestServerThatHangs(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	cfg := testConfig
	cfg.TimeoutSec = 1
	cfg.Slack = 500 * time.Millisecond
	a := startAgent(t, cfg)

	waitParked(t, sim, gkesim.KeyMaintenanceEvent)
	sim.Delay(gkesim.KeyMaintenanceEvent, time.Hour)
	sim.StartMaintenance()
	expectGolden(t, a, "terminate")
	poll(t, "a request abandoned by the client timeout", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "error")) >= 1
	})
	if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "terminate"))); err != nil {
		t.Errorf("series while the server hangs: %v", err)
	}
	sim.Delay(gkesim.KeyMaintenanceEvent, 0)
	sim.FinishMaintenance()
	expectGolden(t, a, "healthy")
}

func TestAgentRestart(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	first := startAgent(t, testConfig)
	sim.ScheduleMaintenance(plannedUpdate)
	expectGolden(t, first, "scheduled")
	first.stop()

	sim.StartMaintenance() // while no agent runs
	second := startAgent(t, testConfig)
	expectGolden(t, second, "ongoing")
}

func TestMetadataServerRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	t.Setenv("GCE_METADATA_HOST", addr)
	serve := func(l net.Listener) (*gkesim.Server, func()) {
		sim := gkesim.New(testInstance)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sim.Serve(ctx, l) }()
		return sim, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("simulator: %v", err)
			}
		}
	}
	_, stop := serve(l)
	a := startAgent(t, testConfig)
	expectGolden(t, a, "healthy")
	stop()

	poll(t, "requests failing while the server is down", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "error")) >= 1
	})
	if l, err = net.Listen("tcp", addr); err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	sim, stop := serve(l)
	defer stop()
	sim.StartMaintenance()
	expectGolden(t, a, "terminate")
}

func TestSelfMonitoringSeries(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	a := startAgent(t, testConfig)
	expectGolden(t, a, "healthy")
	names := []string{
		"gke_disruption_metadata_last_change_timestamp_seconds",
		"gke_disruption_metadata_last_success_timestamp_seconds",
		"gke_disruption_metadata_path_supported",
		"gke_disruption_metadata_parse_errors_total",
	}
	if n, err := testutil.GatherAndCount(a.reg, names...); err != nil || n != 12 {
		t.Errorf("self-monitoring series: %d, %v; want 4 per path", n, err)
	}
	for _, p := range watchedPaths {
		if got := testutil.ToFloat64(a.requests.WithLabelValues(p.name, "200")); got < 1 {
			t.Errorf("requests_total{path=%q,code=\"200\"} = %v, want at least 1", p.name, got)
		}
	}
	want := fmt.Sprintf(`
# HELP gke_disruption_metadata_path_supported Whether the metadata server serves a path (0 after a 404); absent before its first answer.
# TYPE gke_disruption_metadata_path_supported gauge
gke_disruption_metadata_path_supported{path=%q} 1
gke_disruption_metadata_path_supported{path=%q} 1
gke_disruption_metadata_path_supported{path=%q} 1
`, pathMaintenanceEvent, pathPreempted, pathUpcomingMaintenance)
	if err := testutil.GatherAndCompare(a.reg, strings.NewReader(want), "gke_disruption_metadata_path_supported"); err != nil {
		t.Error(err)
	}
}

func TestNewRejectsBadNodeName(t *testing.T) {
	for _, name := range []string{"", "\xff"} {
		if _, err := New(slog.New(slog.DiscardHandler), name, prometheus.NewRegistry(), Config{}); err == nil {
			t.Errorf("New(%q) accepted the node name", name)
		}
	}
}
