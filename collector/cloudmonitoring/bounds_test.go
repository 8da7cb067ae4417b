package cloudmonitoring

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

// TestListingsEnd: whatever the API answers, one listing ends; an abandoned one counts its last call under its own
// code, fails the collector until a clean listing, and keeps the points it read.
func TestListingsEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  string
		fault func(h *harness, cfg *Config) (heal func())
	}{
		{"page token repeats", codeRepeatedPageToken, func(h *harness, _ *Config) func() {
			h.sim.LoopPages(true)
			return func() { h.sim.LoopPages(false) }
		}},
		{"more pages than the limit", codeTooManyPages, func(_ *harness, cfg *Config) func() {
			cfg.MaxPages = 2
			return func() {}
		}},
		{"listing slower than its deadline", "DeadlineExceeded", func(h *harness, cfg *Config) func() {
			cfg.ListingTimeout = time.Second
			h.sim.SetLatency(300 * time.Millisecond)
			return func() { h.sim.SetLatency(0) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, monsim.Options{})
			cfg := testConfig()
			cfg.PageSize = 1
			for _, node := range []string{"a", "b", "c", "d", "e"} {
				h.record(monsim.Interruption{Node: node, Type: "T", Reason: "R", Count: 1, Time: t0.Add(-10 * time.Minute)})
			}
			heal := tc.fault(h, &cfg)
			e := h.newExporter(cfg)

			// A listing that did not end by itself would run until this deadline and count thousands of calls.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := e.c.Poll(ctx)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("poll: %v (context: %v), want the listing to end by itself with an error", err, ctx.Err())
			}
			if calls := h.sim.Calls(); calls > 2*5 {
				t.Errorf("%d calls for two listings of at most 5 pages", calls)
			}
			if got := testutil.ToFloat64(e.c.requests.WithLabelValues(MetricNodeInterruptions, tc.code)); got != 1 {
				t.Errorf("requests_total{code=%q} = %v, want 1", tc.code, got)
			}
			if err := e.c.Update(make(chan prometheus.Metric, 100)); err == nil {
				t.Error("Update succeeded after an abandoned listing")
			}
			if got := testutil.ToFloat64(e.c.lastSuccess); got != 0 {
				t.Errorf("last success %v after an abandoned listing", got)
			}

			heal()
			e.c.cfg.MaxPages, e.c.cfg.ListingTimeout = 0, 0
			h.clock.Add(time.Minute)
			if err := e.c.Poll(context.Background()); err != nil {
				t.Fatalf("poll after the fault: %v", err)
			}
			if err := e.c.Update(make(chan prometheus.Metric, 100)); err != nil {
				t.Errorf("Update after a clean listing: %v", err)
			}
			want := map[string]float64{}
			for _, node := range []string{"a", "b", "c", "d", "e"} {
				want["gke_node_interruptions_total{cluster_location=us-central1,cluster_name=train,cluster_project_id=p1,interruption_reason=R,interruption_type=T,node="+node+"}"] = 1
			}
			if got := e.values(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("counters after the fault healed:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestClusterFilterByLocation: location/name keeps that cluster only, not a same-named one in another location; a
// plain name keeps both.
func TestClusterFilterByLocation(t *testing.T) {
	h := newHarness(t, monsim.Options{})
	h.record(monsim.Interruption{Location: "us-central1", Cluster: "train", Node: "us", Type: "T", Reason: "R", Count: 1, Time: t0.Add(-5 * time.Minute)})
	h.record(monsim.Interruption{Location: "europe-west4", Cluster: "train", Node: "eu", Type: "T", Reason: "R", Count: 1, Time: t0.Add(-5 * time.Minute)})
	for _, tc := range []struct {
		clusters []Cluster
		want     []string
	}{
		{[]Cluster{{Location: "europe-west4", Name: "train"}}, []string{"eu"}},
		{[]Cluster{{Name: "train"}}, []string{"eu", "us"}},
		{[]Cluster{{Location: "us-central1", Name: "train"}, {Location: "asia-east1", Name: "train"}}, []string{"us"}},
	} {
		cfg := testConfig()
		cfg.Clusters = tc.clusters
		e := h.newExporter(cfg)
		e.poll()
		var nodes []string
		for _, node := range []string{"eu", "us"} {
			for series := range e.values() {
				if strings.HasSuffix(series, ",node="+node+"}") {
					nodes = append(nodes, node)
				}
			}
		}
		if fmt.Sprint(nodes) != fmt.Sprint(tc.want) {
			t.Errorf("clusters %v: nodes %v, want %v", tc.clusters, nodes, tc.want)
		}
	}
}
