package cloudmonitoring

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

func nodeKey(node, typ, reason string) string {
	return fmt.Sprintf("gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=%s,interruption_type=%s,node=%s}", reason, typ, node)
}

func poolKey(pool, typ, reason string) string {
	return fmt.Sprintf("gke_node_pool_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=%s,interruption_type=%s,node_pool=%s}", reason, typ, pool)
}

func sameValues(t *testing.T, step string, got, want map[string]float64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", step, got, want)
	}
}

// TestStartedWithHistoryCountsIt: an exporter started at noon counts the interruptions of the morning.
func TestStartedWithHistoryCountsIt(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 2 * time.Minute})
	day := t0.Truncate(24 * time.Hour)
	for hour := 1; hour < 12; hour++ {
		h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "T", Reason: "R", Count: 1, Time: day.Add(time.Duration(hour)*time.Hour + 30*time.Second)})
	}
	// Yesterday's interruption is not today's.
	h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "T", Reason: "R", Count: 5, Time: day.Add(-time.Hour)})
	e := h.newExporter(testConfig())
	e.poll()
	sameValues(t, "first listing", e.values(), map[string]float64{nodeKey("n1", "T", "R"): 11, poolKey("a3", "T", "R"): 11})
}

// TestRestartInTheGap: a point visible only after the old process's last poll and before the new one's first is
// counted by the new one, which also counts everything the old one did.
func TestRestartInTheGap(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 2 * time.Minute})
	first := h.newExporter(testConfig())
	first.poll()
	h.record(monsim.Interruption{Node: "n1", NodePool: "a3", Type: "T", Reason: "R", Count: 1, Time: h.clock.Now().Add(10 * time.Second)})
	for range 5 {
		h.clock.Add(time.Minute)
		first.poll()
	}
	sameValues(t, "before the restart", first.values(), map[string]float64{nodeKey("n1", "T", "R"): 1, poolKey("a3", "T", "R"): 1})

	// n2's point ends at 6m and turns up at 8m; the old process last polls at 7m, the new one first at 9m.
	h.record(monsim.Interruption{Node: "n2", NodePool: "a3", Type: "T", Reason: "R", Count: 1, Time: h.clock.Now().Add(10 * time.Second)})
	h.clock.Add(2 * time.Minute)
	first.poll()
	h.clock.Add(2 * time.Minute)
	second := h.newExporter(testConfig())
	second.poll()
	sameValues(t, "after the restart", second.values(),
		map[string]float64{nodeKey("n1", "T", "R"): 1, nodeKey("n2", "T", "R"): 1, poolKey("a3", "T", "R"): 2})
	for range 6 {
		h.clock.Add(time.Minute)
		second.poll()
	}
	sameValues(t, "polls later", second.values(),
		map[string]float64{nodeKey("n1", "T", "R"): 1, nodeKey("n2", "T", "R"): 1, poolKey("a3", "T", "R"): 2})
}

// TestExportersStartedApartAgree: two exporters started seven minutes apart show the same values once a new
// series' zero sample is behind them.
func TestExportersStartedApartAgree(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 90 * time.Second})
	a := h.newExporter(testConfig())
	var b *exporter
	for minute := range 30 {
		if minute%4 == 1 {
			h.record(monsim.Interruption{Node: fmt.Sprintf("n%d", minute%3), NodePool: "a3", Type: "T", Reason: "R", Count: 1,
				Time: h.clock.Now().Add(20 * time.Second)})
		}
		if minute == 7 {
			b = h.newExporter(testConfig())
		}
		a.poll()
		if b != nil {
			b.poll()
		}
		if b != nil && minute >= 10 && minute%4 == 3 { // no series born in the last interval
			sameValues(t, fmt.Sprintf("minute %d", minute), b.values(), a.values())
		}
		h.clock.Add(time.Minute)
	}
	if got := a.values()[poolKey("a3", "T", "R")]; got != 7 {
		t.Errorf("a3 = %v after 7 visible interruptions", got)
	}
}

// TestPartialAnswersDoNotAdvanceTheWindow: while the API answers with execution errors the collector fails and
// keeps its window, so points left out of partial answers for longer than the look-back still count once.
func TestPartialAnswersDoNotAdvanceTheWindow(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())
	e.poll()
	for _, node := range []string{"a", "b", "c", "d"} {
		h.record(monsim.Interruption{Node: node, Type: "T", Reason: "R", Count: 1, Time: h.clock.Now().Add(10 * time.Second)})
	}
	h.sim.Partial(1000)
	for range 10 { // twice the look-back
		h.clock.Add(time.Minute)
		if err := e.c.Poll(t.Context()); err == nil {
			t.Fatal("a partial answer counts as success")
		}
		if err := e.c.Update(make(chan prometheus.Metric, 10)); err == nil {
			t.Error("Update reports success after a partial answer")
		}
	}
	if got := testutil.ToFloat64(e.c.requests.WithLabelValues(MetricNodeInterruptions, codePartial)); got != 10 {
		t.Errorf("requests_total{code=%q} = %v, want 10", codePartial, got)
	}
	h.sim.Partial(0)
	h.clock.Add(time.Minute)
	e.poll()
	h.clock.Add(time.Minute)
	e.poll()
	want := map[string]float64{}
	for _, node := range []string{"a", "b", "c", "d"} {
		want[nodeKey(node, "T", "R")] = 1
	}
	sameValues(t, "after the partial answers", e.values(), want)
}

// TestQuotaErrorsHonourRetryInfo: a quota error is retried no sooner than the server's retry delay.
func TestQuotaErrorsHonourRetryInfo(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	e := h.newExporter(testConfig())
	e.poll()
	h.sim.FailQuota(1, 45*time.Second)
	h.clock.Add(time.Minute)
	_ = e.c.Poll(t.Context())
	q := e.c.queries[0]
	if got := q.due.Sub(h.clock.Now()); got != 45*time.Second {
		t.Errorf("retry after a quota error with a 45s retry delay in %v, want 45s", got)
	}
	if got := e.c.queries[1].due.Sub(h.clock.Now()); got != time.Minute {
		t.Errorf("the next query, answered, polls again in %v, want the interval", got)
	}
	h.sim.FailQuota(1, time.Millisecond) // shorter than the backoff: the backoff wins
	h.clock.Add(time.Minute)
	_ = e.c.Poll(t.Context())
	if got, want := q.due.Sub(h.clock.Now()), backoff(time.Minute, q.failures, 0); got != want {
		t.Errorf("retry after a quota error with a 1ms retry delay in %v, want the backoff %v", got, want)
	}
}

// TestLongOutageHealsWithABoundedCatchUp: after hours without an answer the first window reaches back no further
// than the day, is read page by page, and counts every point of the outage once.
func TestLongOutageHealsWithABoundedCatchUp(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	cfg := testConfig()
	cfg.PageSize = 3
	e := h.newExporter(cfg)
	e.poll()
	h.sim.Fail(codes.Unavailable, -1)
	for minute := range 5 * 60 {
		if minute%30 == 0 {
			h.record(monsim.Interruption{Node: fmt.Sprintf("n%d", minute/30), NodePool: "a3", Type: "T", Reason: "R", Count: 1,
				Time: h.clock.Now().Add(10 * time.Second)})
		}
		h.clock.Add(time.Minute)
	}
	_ = e.c.Poll(t.Context())
	h.sim.Fail(codes.OK, 0)
	e.c.mu.Lock()
	from := e.c.windowStartLocked(e.c.queries[0], h.clock.Now())
	e.c.mu.Unlock()
	if day := h.clock.Now().Truncate(24 * time.Hour); from.Before(day) {
		t.Errorf("catch-up window starts %v, before the day %v", from, day)
	}
	before := h.sim.Calls()
	e.poll()
	if calls := h.sim.Calls() - before; calls != 4+4 {
		t.Errorf("catch-up of 10 node and 10 pool points in pages of 3: %d calls, want 8", calls)
	}
	h.clock.Add(time.Minute)
	e.poll() // the series born in the catch-up show their counts after their zero sample
	want := map[string]float64{poolKey("a3", "T", "R"): 10}
	for n := range 10 {
		want[nodeKey(fmt.Sprintf("n%d", n), "T", "R")] = 1
	}
	sameValues(t, "after the outage", e.values(), want)
}

// TestDaySwitch: at midnight plus the look-back the counters move to the new day. A series counting in the new day
// drops to zero for one interval, so Prometheus reads a reset, then shows the new day's count; late points of the
// old day count in it until the switch; a series with no point in the new day stays at zero until it is idle.
func TestDaySwitch(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 2 * time.Minute})
	midnight := t0.Truncate(24 * time.Hour).Add(24 * time.Hour)
	h.clock.Add(midnight.Add(-30 * time.Minute).Sub(h.clock.Now()))
	h.record(monsim.Interruption{Node: "busy", Type: "T", Reason: "R", Count: 3, Time: midnight.Add(-20 * time.Minute)})
	h.record(monsim.Interruption{Node: "quiet", Type: "T", Reason: "R", Count: 2, Time: midnight.Add(-20 * time.Minute)})
	h.record(monsim.Interruption{Node: "busy", Type: "T", Reason: "R", Count: 1, Time: midnight.Add(-30 * time.Second)}) // visible 00:02
	h.record(monsim.Interruption{Node: "busy", Type: "T", Reason: "R", Count: 4, Time: midnight.Add(30 * time.Second)})  // visible 00:03
	cfg := testConfig()
	cfg.IdleTimeout = 40 * time.Minute
	e := h.newExporter(cfg)
	busy, quiet := nodeKey("busy", "T", "R"), nodeKey("quiet", "T", "R")
	steps := []struct {
		at   time.Duration // from midnight
		want map[string]float64
	}{
		{-10 * time.Minute, map[string]float64{busy: 3, quiet: 2}},
		{3 * time.Minute, map[string]float64{busy: 4, quiet: 2}}, // the old day's late point counts in it
		{5 * time.Minute, map[string]float64{busy: 0, quiet: 0}}, // the switch: a reset for both
		{6 * time.Minute, map[string]float64{busy: 4, quiet: 0}}, // the new day's count
		{21 * time.Minute, map[string]float64{busy: 4}},          // quiet idle for 41 minutes
		{2 * time.Hour, map[string]float64{busy: 4}},             // busy counts in the day, idle or not
	}
	for _, step := range steps {
		h.clock.Add(midnight.Add(step.at).Sub(h.clock.Now()))
		e.poll()
		sameValues(t, fmt.Sprintf("at midnight%+v", step.at), e.values(), step.want)
	}
	// An exporter started now agrees.
	late := h.newExporter(cfg)
	late.poll()
	sameValues(t, "an exporter started after the switch", late.values(), map[string]float64{busy: 4})
}
