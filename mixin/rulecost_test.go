package mixin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
)

// BenchmarkRuleCost evaluates the generated rule files with Prometheus' own rule manager, query engine and TSDB
// over a synthetic fleet, and reports what one evaluation cycle of every group costs: samples read (the engine's
// query statistics), group duration, the slowest group's duration, the CPU time the process spent on it (which,
// unlike the duration, other processes on a shared machine barely change), and the series the recording rules keep
// as a share of the head (sparse rules write a series per node only while the node has something to say). RULE_COST_NODES sets the fleet size (default 5000; the contract's largest
// cluster is 65000), RULE_COST_RULES a comma-separated list of other rule files (to compare with older rules).
// The fleet has 31 minutes of history (the longest range the rules read every cycle), node agents scraped every
// 10s and the cluster exporter every 30s as deploy/ scrapes them, and 1% of the nodes with maintenance announced.
func BenchmarkRuleCost(b *testing.B) {
	nodes := 5000
	if v := os.Getenv("RULE_COST_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("RULE_COST_NODES: %v", err)
		}
		nodes = n
	}
	files := []string{filepath.Join(repoRoot, "rules/rules.yaml"), filepath.Join(repoRoot, "rules/alerts.yaml")}
	if v := os.Getenv("RULE_COST_RULES"); v != "" {
		files = filepath.SplitList(v)
	}

	st := teststorage.New(b)
	end := time.Unix(1767225600, 0).UTC()
	start := end.Add(-31 * time.Minute)
	loadFleet(b, st, nodes, start, end)

	var groups []rulefmt.RuleGroup
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		rgs, errs := rulefmt.Parse(content, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger())
		if errs != nil {
			b.Fatal(errs)
		}
		groups = append(groups, rgs.Groups...)
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 31, Timeout: time.Hour, LookbackDelta: 5 * time.Minute})

	// recorded holds the series the recording rules wrote in the last cycle, by rule.
	recorded := map[string]map[uint64]bool{}

	// evalGroup evaluates a group's rules in order, as the rule manager does, recording rules writing their output
	// before the next rule reads it, and returns the samples read, the time taken and the CPU time spent. logRules
	// logs each rule's.
	evalGroup := func(g rulefmt.RuleGroup, ts time.Time, logRules bool) (int64, time.Duration, time.Duration) {
		var samples int64
		began, cpuBegan := time.Now(), cpuTime(b)
		for _, r := range g.Rules {
			ruleBegan, ruleCPUBegan := time.Now(), cpuTime(b)
			q, err := engine.NewInstantQuery(context.Background(), st, nil, r.Expr, ts)
			if err != nil {
				b.Fatal(err)
			}
			res := q.Exec(context.Background())
			if res.Err != nil {
				b.Fatalf("%s%s: %v", r.Record, r.Alert, res.Err)
			}
			read := q.Stats().Samples.TotalSamples
			samples += read
			if vec, ok := res.Value.(promql.Vector); ok && r.Record != "" {
				recorded[r.Record] = map[uint64]bool{}
				app := st.Appender(context.Background())
				for _, smp := range vec {
					l := labels.NewBuilder(smp.Metric).Set(model.MetricNameLabel, r.Record).Labels()
					recorded[r.Record][l.Hash()] = true
					if _, err := app.Append(0, l, ts.UnixMilli(), smp.F); err != nil {
						b.Fatal(err)
					}
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			q.Close()
			if logRules {
				b.Logf("  %-60s %12d samples %10s %10s CPU", r.Record+r.Alert, read, time.Since(ruleBegan).Round(time.Millisecond),
					(cpuTime(b) - ruleCPUBegan).Round(time.Millisecond))
			}
		}
		return samples, time.Since(began), cpuTime(b) - cpuBegan
	}

	// Two cycles fill the recorded series the rules read back (their memory); the next is measured.
	for ts := end.Add(-2 * time.Minute); ts.Before(end); ts = ts.Add(time.Minute) {
		for _, g := range groups {
			evalGroup(g, ts, false)
		}
	}
	var total int64
	var duration, slowest, cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		total, duration, slowest, cpu = 0, 0, 0, 0
		ts := end.Add(time.Duration(i) * time.Millisecond)
		for _, g := range groups {
			samples, d, c := evalGroup(g, ts, i == 0)
			if i == 0 {
				b.Logf("%-62s %12d samples %10s %10s CPU", g.Name, samples, d.Round(time.Millisecond), c.Round(time.Millisecond))
			}
			total += samples
			duration += d
			slowest = max(slowest, d)
			cpu += c
		}
	}
	b.StopTimer()
	var recordedSeries int
	for _, rule := range sortedKeys(recorded) {
		recordedSeries += len(recorded[rule])
		if len(recorded[rule]) > nodes/100 {
			b.Logf("recorded: %-58s %8d series", rule, len(recorded[rule]))
		}
	}
	head := st.Head().NumSeries()
	b.ReportMetric(float64(total), "samples/cycle")
	b.ReportMetric(float64(total)/float64(nodes), "samples/node")
	b.ReportMetric(float64(duration.Milliseconds()), "ms/cycle")
	b.ReportMetric(float64(cpu.Milliseconds()), "cpu-ms/cycle")
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-group-ms")
	b.ReportMetric(float64(recordedSeries), "recorded-series")
	b.ReportMetric(100*float64(recordedSeries)/float64(head), "recorded-%-of-head")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// loadFleet appends the series of a fleet of n GPU nodes, each with its node agent, from start to end.
func loadFleet(b *testing.B, st *teststorage.TestStorage, n int, start, end time.Time) {
	b.Helper()
	const clusterJob, agentJob = "gke-disruption-exporter-cluster", "gke-disruption-exporter-node"
	cluster := func(name string, kv ...string) labels.Labels {
		return labels.FromStrings(append([]string{"__name__", name, "job", clusterJob, "instance", "10.0.0.1:9842"}, kv...)...)
	}
	maintenance := float64(end.Add(90 * time.Minute).Unix())
	type series struct {
		l     labels.Labels
		v     float64
		every time.Duration
	}
	var all []series
	add := func(every time.Duration, v float64, l labels.Labels) { all = append(all, series{l, v, every}) }
	add(30*time.Second, 1, cluster("up"))
	add(30*time.Second, 1, cluster("gke_disruption_collector_success", "collector", "nodes"))
	add(30*time.Second, float64(end.Unix()), cluster("gke_disruption_cloudmonitoring_last_success_timestamp_seconds"))
	for i := range n {
		node := fmt.Sprintf("gke-a3-%05d", i)
		agent := func(name string, kv ...string) labels.Labels {
			return labels.FromStrings(append([]string{"__name__", name, "job", agentJob, "instance", fmt.Sprintf("10.%d.%d.%d:9843", i>>16, (i>>8)&255, i&255), "node", node}, kv...)...)
		}
		add(30*time.Second, 1, cluster("gke_node_info", "node", node, "node_pool", fmt.Sprintf("a3-pool-%d", i%50), "zone", "us-central1-a",
			"machine_type", "a3-highgpu-8g", "accelerator", "nvidia-h100-80gb", "provisioning", "standard"))
		add(10*time.Second, 1, agent("up"))
		add(10*time.Second, 0, agent("gce_instance_preempted"))
		add(10*time.Second, 1, agent("gce_instance_maintenance_event", "event", "NONE"))
		add(10*time.Second, 1, agent("gke_disruption_collector_success", "collector", "metadata"))
		add(10*time.Second, 1, agent("gke_disruption_metadata_path_supported", "path", "instance/upcoming-maintenance"))
		add(10*time.Second, float64(end.Unix()), agent("gke_disruption_metadata_last_success_timestamp_seconds", "path", "instance/upcoming-maintenance"))
		if i%100 == 0 {
			add(30*time.Second, maintenance, cluster("gke_node_scheduled_maintenance_timestamp_seconds", "node", node))
			add(10*time.Second, maintenance, agent("gce_instance_upcoming_maintenance_window_start_timestamp_seconds"))
			add(10*time.Second, 1, agent("gce_instance_upcoming_maintenance_info", "type", "SCHEDULED", "status", "PENDING",
				"can_reschedule", "true", "reasons", "PLANNED_UPDATE"))
		}
	}
	refs := make([]storage.SeriesRef, len(all))
	for ts := start; !ts.After(end); ts = ts.Add(10 * time.Second) {
		app := st.Appender(context.Background())
		for i, s := range all {
			if ts.Sub(start)%s.every != 0 {
				continue
			}
			ref, err := app.Append(refs[i], s.l, ts.UnixMilli(), s.v)
			if err != nil {
				b.Fatal(err)
			}
			refs[i] = ref
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
