package cloudmonitoring

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

// TestSeedQueries scrapes the exporter's /metrics once a minute over a scripted half hour, loads the scraped series
// into promqltest, and checks that the breakdowns operators ask for are plain PromQL over them.
func TestSeedQueries(t *testing.T) {
	h := newHarness(t, monsim.Options{Delay: 90 * time.Second})
	e := h.newExporter(testConfig())
	handler := collector.NewSet(slog.New(slog.DiscardHandler), e.reg, map[string]collector.Collector{"cloudmonitoring": e.c})

	maintenance := func(node, pool string) monsim.Interruption {
		return monsim.Interruption{Node: node, NodePool: pool, Type: "MaintenanceEvent", Reason: "HW/SW Maintenance", Count: 1}
	}
	script := map[int][]monsim.Interruption{
		1: {maintenance("gpu-1", "a3")},
		2: {maintenance("gpu-2", "a3"), {Node: "spot-1", NodePool: "spot", Type: "PreemptionEvent", Reason: "Other", Count: 1}},
		4: {
			{Node: "gpu-3", NodePool: "a3", Type: "TerminationEvent", Reason: "HostError", Count: 1},
			{Node: "serve-1", NodePool: "l4", Type: "MaintenanceEvent", Reason: "Migrate on HW/SW Maintenance", Count: 1},
		},
		6:  {maintenance("tpu-1", "v5e"), maintenance("tpu-2", "v5e"), maintenance("tpu-3", "v5e"), maintenance("tpu-4", "v5e")},
		10: {maintenance("gpu-1", "a3")},
		12: {{Node: "spot-2", NodePool: "spot", Type: "PreemptionEvent", Reason: "Other", Count: 1}},
		15: {{Cluster: "serve", Node: "serve-9", NodePool: "l4b", Type: "MaintenanceEvent", Reason: "HW/SW Maintenance", Count: 1}},
	}

	const minutes = 30
	samples := map[string][]string{} // series -> value per minute, "_" where absent
	for minute := 0; minute <= minutes; minute++ {
		e.poll()
		for series, value := range scrape(t, handler) {
			if samples[series] == nil {
				samples[series] = make([]string, minutes+1)
				for i := range samples[series] {
					samples[series][i] = "_"
				}
			}
			samples[series][minute] = value
		}
		h.clock.Add(20 * time.Second)
		for _, i := range script[minute] {
			h.record(i)
		}
		h.clock.Add(40 * time.Second)
	}

	var load strings.Builder
	load.WriteString("load 1m\n")
	series := make([]string, 0, len(samples))
	for s := range samples {
		series = append(series, s)
	}
	sort.Strings(series)
	for _, s := range series {
		fmt.Fprintf(&load, "  %s %s\n", s, strings.Join(samples[s], " "))
	}
	t.Logf("scraped series:\n%s", load.String())

	promqltest.RunTest(t, load.String()+`
# By type and reason.
eval instant at 30m sum by (interruption_type, interruption_reason) (increase(gke_node_interruptions_total[30m]))
  {interruption_type="MaintenanceEvent", interruption_reason="HW/SW Maintenance"} 8
  {interruption_type="MaintenanceEvent", interruption_reason="Migrate on HW/SW Maintenance"} 1
  {interruption_type="PreemptionEvent", interruption_reason="Other"} 2
  {interruption_type="TerminationEvent", interruption_reason="HostError"} 1

# By pool.
eval instant at 30m sum by (cluster_name, node_pool) (increase(gke_node_pool_interruptions_total[30m]))
  {cluster_name="train", node_pool="a3"} 4
  {cluster_name="train", node_pool="spot"} 2
  {cluster_name="train", node_pool="l4"} 1
  {cluster_name="train", node_pool="v5e"} 4
  {cluster_name="serve", node_pool="l4b"} 1

# Only host maintenance.
eval instant at 30m sum by (cluster_name) (increase(gke_node_interruptions_total{interruption_reason="HW/SW Maintenance"}[30m]))
  {cluster_name="train"} 7
  {cluster_name="serve"} 1

# The counters themselves started at zero, so they agree with the increases.
eval instant at 30m sum by (node_pool) (gke_node_pool_interruptions_total{interruption_reason="HW/SW Maintenance"})
  {node_pool="a3"} 3
  {node_pool="v5e"} 4
  {node_pool="l4b"} 1
`, promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery))
}

// scrape reads the interruption counters from one scrape of handler, as PromQL series selectors with values.
func scrape(t *testing.T, handler *collector.Set) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	out := map[string]string{}
	for name, mf := range families {
		if name != "gke_node_interruptions_total" && name != "gke_node_pool_interruptions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = fmt.Sprint(m.GetCounter().GetValue())
		}
	}
	return out
}
