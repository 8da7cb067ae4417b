package cli

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func edgeNode(name string, labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func renderEdge(t *testing.T, nodes []*corev1.Node, opts StatusOptions) (string, error) {
	t.Helper()
	opts.Now = clock
	var out bytes.Buffer
	err := Render(&out, Snapshot{Nodes: nodes, PolicyUnknown: "not read", WorkloadsUnknown: "not read"}, opts)
	return out.String(), err
}

// TestEdgeStatusJSONFarFutureMaintenance: one node whose scheduled-maintenance-time is a far-future epoch (a
// garbage value that still reads as non-negative whole seconds: 14 digits, year ~3.2 million) makes
// `status -o json` fail for the whole fleet with "Time.MarshalJSON: year outside of range [0,9999]", exit 2 and no
// output; under `--watch -o json` the watch ends when the label appears. The table prints the same node.
func TestEdgeStatusJSONFarFutureMaintenance(t *testing.T) {
	nodes := []*corev1.Node{
		edgeNode("gke-a3-0", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: "99999999999999"}, nil),
		edgeNode("gke-a3-1", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: epoch(time.Hour)}, nil),
	}
	if _, err := renderEdge(t, nodes, StatusOptions{Output: OutputTable}); err != nil {
		t.Fatalf("table: %v", err)
	}
	out, err := renderEdge(t, nodes, StatusOptions{Output: OutputJSON})
	if err != nil {
		t.Fatalf("-o json fails for the whole fleet over one node's label: %v", err)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	found := false
	for _, n := range r.Nodes {
		found = found || n.Node == "gke-a3-1"
	}
	if !found {
		t.Errorf("the well-formed node is missing from\n%s", out)
	}
}

// TestEdgeStatusPoolWithComma: `--pool=l4-serve,a3-train` (an operator asking for two pools, or pasting a list) is
// spliced into a selector string, so it reads as "pool=l4-serve AND a label named a3-train exists": status prints
// an empty header and "No nodes with maintenance pending or in progress." and exits 0 — a false all-clear —
// instead of one line and exit 2 for a value that is no node pool name.
func TestEdgeStatusPoolWithComma(t *testing.T) {
	nodes := []*corev1.Node{
		edgeNode("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: epoch(time.Hour)}, nil),
		edgeNode("gke-a3-0", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: epoch(time.Hour)}, nil),
	}
	for _, pool := range []string{"l4-serve,a3-train", "l4-serve,!" + gke.LabelScheduledMaintenanceTime} {
		out, err := renderEdge(t, nodes, StatusOptions{Output: OutputTable, Pool: pool})
		if exitCode(err) != ExitAPI || strings.Contains(err.Error(), "\n") {
			t.Errorf("--pool=%q: exit %d (%v), want one exit-2 line; printed:\n%s", pool, exitCode(err), err, out)
		}
	}
}

// TestEdgeStatusFinishedActionIsNotPending: the actions service leaves its state annotation "done" on a node for
// good. Once GKE has finished (nothing scheduled, not cordoned, Ready), the node has nothing pending or in progress,
// yet status lists it; in a fleet that has been through a maintenance round every node is a row and "No nodes with
// maintenance pending or in progress." never prints again.
func TestEdgeStatusFinishedActionIsNotPending(t *testing.T) {
	finished := edgeNode("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve"}, map[string]string{
		nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "done",
		nodeview.AnnotationMaintenance: nodeview.LabelKey(epoch(-72 * time.Hour)),
		nodeview.AnnotationFinishedAt:  now.Add(-70 * time.Hour).Format(time.RFC3339)})
	if rows := Statuses([]*nodeview.View{nodeview.Of(finished)}, false); len(rows) != 0 {
		t.Errorf("a node whose work finished days ago, with nothing pending, is a row: %+v", rows[0])
	}
}

// TestEdgeStatusReasonBreaksTable: the REASON column is the actions service's reason annotation verbatim; a drain
// failure's message (an admission webhook's denial, up to 1024 characters) with a newline or a tab splits the row,
// so the table shows a line that is no node and shifts the columns after it.
func TestEdgeStatusReasonBreaksTable(t *testing.T) {
	failed := edgeNode("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: epoch(time.Hour)},
		map[string]string{nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "failed",
			nodeview.AnnotationReason: "evicting serving/web-1: admission webhook \"guard\" denied the request:\n\tpod is protected"})
	other := edgeNode("gke-l4-1", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: epoch(2 * time.Hour)}, nil)
	out, err := renderEdge(t, []*corev1.Node{failed, other}, StatusOptions{Output: OutputTable})
	if err != nil {
		t.Fatal(err)
	}
	_, rows, _ := strings.Cut(out, "\n\nNODE ")
	lines := strings.Split(strings.TrimSuffix(rows, "\n"), "\n")[1:]
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "gke-l4-0 ") || !strings.HasPrefix(lines[1], "gke-l4-1 ") {
		t.Errorf("want two rows, one per node; got %d lines:\n%s", len(lines), rows)
	}
}

// TestEdgeStatusSortsThousands (passes): 3,000 nodes in random order, many sharing a start time, come out sorted by
// start then name with the unscheduled ones last, and the header's per-pool counts add up to the rows.
func TestEdgeStatusSortsThousands(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var nodes []*corev1.Node
	scheduled := map[string]int{}
	for i := range 3000 {
		pool := "pool-" + strconv.Itoa(i%7)
		labels := map[string]string{gke.LabelNodePool: pool}
		if i%3 != 0 {
			labels[gke.LabelScheduledMaintenanceTime] = epoch(time.Duration(rng.IntN(50)) * time.Hour)
			scheduled[pool]++
		} else if i%9 == 0 {
			labels[gke.LabelActiveNodeMaintenance] = "ONGOING"
		}
		nodes = append(nodes, edgeNode("gke-n-"+strconv.Itoa(rng.IntN(1_000_000))+"-"+strconv.Itoa(i), labels, nil))
	}
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	out, err := renderEdge(t, nodes, StatusOptions{Output: OutputJSON})
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(r.Nodes); i++ {
		a, b := r.Nodes[i-1], r.Nodes[i]
		switch {
		case a.MaintenanceStart == nil && b.MaintenanceStart != nil:
			t.Fatalf("row %d (%s) unscheduled before a scheduled one (%s)", i-1, a.Node, b.Node)
		case a.MaintenanceStart != nil && b.MaintenanceStart != nil && a.MaintenanceStart.After(*b.MaintenanceStart):
			t.Fatalf("row %d (%s) starts after row %d (%s)", i-1, a.Node, i, b.Node)
		case (a.MaintenanceStart == nil) == (b.MaintenanceStart == nil) &&
			(a.MaintenanceStart == nil || a.MaintenanceStart.Equal(*b.MaintenanceStart)) && a.Node > b.Node:
			t.Fatalf("rows %d and %d (%s, %s) with the same start are not by name", i-1, i, a.Node, b.Node)
		}
	}
	total := 0
	for _, p := range r.Pools {
		if p.Scheduled != scheduled[p.Pool] {
			t.Errorf("pool %s: header says %d scheduled, %d are", p.Pool, p.Scheduled, scheduled[p.Pool])
		}
		total += p.Nodes
	}
	if total != 3000 || len(r.Nodes) != 2000+334 {
		t.Errorf("header counts %d nodes, %d rows; want 3000 and %d", total, len(r.Nodes), 2000+334)
	}
}

// TestEdgeStatusEmptyClusterJSON (passes): with no nodes at all, -o json is still one object whose lists are [],
// never null, so `jq '.nodes | length'` works.
func TestEdgeStatusEmptyClusterJSON(t *testing.T) {
	out, err := renderEdge(t, nil, StatusOptions{Output: OutputJSON})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["nodes"]) != "[]" || string(raw["pools"]) != "[]" || string(raw["budgets"]) != "null" {
		t.Errorf("empty cluster: %s", out)
	}
}

// TestEdgeStatusDoneForAnEarlierMaintenance: the actions service drained the node for last week's maintenance
// (state "done", keyed scheduled/<last week>); GKE has now scheduled a new one. The row shows the new time next to
// ACTION-STATE "done", which reads as "handled", while the actions service has done nothing for this maintenance
// (its work is keyed on the maintenance, nodestate.Serves says no). Wide does not show the record's key either.
func TestEdgeStatusDoneForAnEarlierMaintenance(t *testing.T) {
	n := edgeNode("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: epoch(4 * time.Hour)},
		map[string]string{nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "done",
			nodeview.AnnotationMaintenance: nodeview.LabelKey(epoch(-7 * 24 * time.Hour))})
	for _, output := range []string{OutputTable, OutputWide} {
		out, err := renderEdge(t, []*corev1.Node{n}, StatusOptions{Output: output})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "gke-l4-0 ") {
				continue
			}
			for _, cell := range strings.Fields(line) {
				if cell == "done" {
					t.Errorf("%s: the new maintenance's row says its work is done:\n%s", output, out)
				}
			}
		}
	}
}

// TestEdgeStatusBudgetsCountReservedGroup: a parallel pool (one group) is claimed half-way: the first node is
// accepted with the group annotation naming all three, the other two not claimed yet. The actions service counts the
// whole group against the cluster cap (disruptedWithReserved: the room the group reserved stays reserved), so with
// maxDisruptedNodes 3 it makes any other node wait (cluster_cap). status counts only the claimed node and prints
// "Cluster cap: 1/3 disrupted": the operator sees room the service will not use.
func TestEdgeStatusBudgetsCountReservedGroup(t *testing.T) {
	cfg, err := config.Parse([]byte(`maxDisruptedNodes: 3
pools:
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
    maxUnavailable: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	at := epoch(time.Hour)
	group := "gke-a3-0,gke-a3-1,gke-a3-2"
	nodes := []*corev1.Node{
		edgeNode("gke-a3-0", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: at}, map[string]string{
			nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "accepted", nodeview.AnnotationGroup: group,
			nodeview.AnnotationMaintenance: nodeview.LabelKey(at)}),
		edgeNode("gke-a3-1", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: at}, nil),
		edgeNode("gke-a3-2", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelScheduledMaintenanceTime: at}, nil),
		edgeNode("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: at}, nil),
		edgeNode("gke-l4-1", map[string]string{gke.LabelNodePool: "l4-serve"}, nil),
	}
	var out bytes.Buffer
	if err := Render(&out, Snapshot{Nodes: nodes, Policy: &Policy{Config: cfg, Source: "file policy.yaml"}, WorkloadsUnknown: "not read"},
		StatusOptions{Output: OutputJSON, Now: clock}); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Budgets.Cluster.Disrupted; got != 3 {
		t.Errorf("cluster cap counts %d disrupted; the actions service counts the reserved group, 3", got)
	}
	for _, p := range r.Budgets.Pools {
		if p.Name == "training" && p.Disrupted != 3 {
			t.Errorf("pool training: %d disrupted, the service reserves the whole group (3)", p.Disrupted)
		}
	}
}
