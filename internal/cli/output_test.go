package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// TestOutputFormats renders a status and an audit in each of kubectl's formats.
func TestOutputFormats(t *testing.T) {
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	report := Report{Pools: []PoolCounts{{Pool: "a3", Nodes: 2, Scheduled: 1}}, Nodes: []NodeStatus{
		{Node: "gke-prod-a3-pool-4f2c1a9b-x7kq", Pool: "a3", MaintenanceStart: &start, GKEState: []string{"cordoned"}},
		{Node: "gke-prod-a3-pool-4f2c1a9b-q2wz", Pool: "a3", GKEState: []string{}},
	}}
	rows := []any{report.Nodes[0], report.Nodes[1]}
	for _, tc := range []struct{ format, want string }{
		{"name", "node/gke-prod-a3-pool-4f2c1a9b-x7kq\nnode/gke-prod-a3-pool-4f2c1a9b-q2wz\n"},
		{"jsonpath={.nodes[*].node}", "gke-prod-a3-pool-4f2c1a9b-x7kq gke-prod-a3-pool-4f2c1a9b-q2wz"},
		{"go-template={{range .nodes}}{{.node}};{{end}}", "gke-prod-a3-pool-4f2c1a9b-x7kq;gke-prod-a3-pool-4f2c1a9b-q2wz;"},
		{"custom-columns=NODE:.node,STATE:.gkeState", "NODE                             STATE\ngke-prod-a3-pool-4f2c1a9b-x7kq   [cordoned]\ngke-prod-a3-pool-4f2c1a9b-q2wz   []\n"},
		{"yaml", "budgets: null\nnodes:\n- gkeState:\n  - cordoned\n  maintenanceStart: \"2026-12-01T20:00:00Z\"\n  node: gke-prod-a3-pool-4f2c1a9b-x7kq\n  pool: a3\n  workloads: null\n- gkeState: []\n  node: gke-prod-a3-pool-4f2c1a9b-q2wz\n  pool: a3\n  workloads: null\npools:\n- actions: 0\n  cordoned: 0\n  inMaintenance: 0\n  nodes: 2\n  pool: a3\n  scheduled: 1\n"},
	} {
		if err := CheckOutput(tc.format, true); err != nil {
			t.Errorf("CheckOutput(%q): %v", tc.format, err)
		}
		var out bytes.Buffer
		objs := namedNodes(report.Nodes)
		if err := printDocument(&out, tc.format, false, report, report, rows, objs); err != nil {
			t.Errorf("-o %s: %v", tc.format, err)
			continue
		}
		if out.String() != tc.want {
			t.Errorf("-o %s:\n%s\nwant:\n%s", tc.format, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := printDocument(&out, "custom-columns=NODE:.node", true, report, report, rows, nil); err != nil || out.String() != "gke-prod-a3-pool-4f2c1a9b-x7kq\ngke-prod-a3-pool-4f2c1a9b-q2wz\n" {
		t.Errorf("custom-columns with no headers: %v, %q", err, out.String())
	}
	for _, bad := range []string{"xml", "jsonpath", "jsonpath=", "wide"} {
		if err := CheckOutput(bad, false); err == nil {
			t.Errorf("CheckOutput(%q) accepted it", bad)
		}
	}
	if err := printDocument(&out, "jsonpath={.nodes[", false, report, report, rows, nil); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a bad jsonpath: %v, want one line", err)
	}

	results := []CheckResult{{Check: "grace_period_short", Severity: readiness.Warning, Workloads: []WorkloadFinding{
		{Namespace: "ml", Kind: "StatefulSet", Workload: "trainer", Pods: 4}, {Namespace: "ml", Kind: "Pod", Workload: "debug", Pods: 1}}}}
	for format, want := range map[string]string{
		"name":                       "statefulset.apps/trainer\npod/debug\n",
		"jsonpath={.items[0].check}": "grace_period_short",
		"custom-columns=CHECK:.check,NS:.namespace,WORKLOAD:.workload,PODS:.pods": "CHECK                NS    WORKLOAD   PODS\ngrace_period_short   ml    trainer    4\ngrace_period_short   ml    debug      1\n",
	} {
		out.Reset()
		if err := RenderAudit(&out, results, format, false); err != nil || out.String() != want {
			t.Errorf("audit -o %s: %v\n%s\nwant:\n%s", format, err, out.String(), want)
		}
	}
	out.Reset()
	if err := RenderAudit(&out, results, OutputTable, true); err != nil || out.String() != "warning  grace_period_short  ml  StatefulSet  trainer  4\nwarning  grace_period_short  ml  Pod          debug    1\n" {
		t.Errorf("audit --no-headers: %v\n%q", err, out.String())
	}
}

func namedNodes(rows []NodeStatus) []runtime.Object {
	out := make([]runtime.Object, len(rows))
	for i, r := range rows {
		out[i] = named("", "Node", r.Node)
	}
	return out
}
