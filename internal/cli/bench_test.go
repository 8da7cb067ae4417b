package cli

import (
	"io"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// benchFleet is 65,000 nodes in 50 pools with 1% of them scheduled for maintenance.
func benchFleet() []*corev1.Node {
	nodes := make([]*corev1.Node, 65000)
	for i := range nodes {
		labels := map[string]string{gke.LabelNodePool: "pool-" + strconv.Itoa(i%50), gke.LabelAccelerator: "nvidia-l4"}
		if i%100 == 0 {
			labels[gke.LabelScheduledMaintenanceTime] = epoch(time.Duration(i) * time.Second)
		}
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-node-" + strconv.Itoa(i), Labels: labels},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	return nodes
}

// BenchmarkRenderStatus renders the fleet without policy or workloads: the cost of one status, or of one --watch
// redraw, in nodes alone.
func BenchmarkRenderStatus(b *testing.B) {
	nodes := benchFleet()
	opts := StatusOptions{Output: OutputTable, Now: clock}
	b.ReportAllocs()
	for b.Loop() {
		if err := Render(io.Discard, Snapshot{Nodes: nodes, PolicyUnknown: "not read", WorkloadsUnknown: "not read"}, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderStatusBudgets adds a policy of 50 pools and a cluster cap, counted over every node, and two
// workloads on each row's node.
func BenchmarkRenderStatusBudgets(b *testing.B) {
	nodes := benchFleet()
	cfg := &config.Config{MaxDisruptedNodes: &config.IntOrPercent{Value: 5, Percent: true}}
	for i := range 50 {
		cfg.Pools = append(cfg.Pools, config.Pool{Name: "p" + strconv.Itoa(i), Strategy: config.Rolling,
			NodeSelector: map[string]string{gke.LabelNodePool: "pool-" + strconv.Itoa(i)}, MaxUnavailable: config.IntOrPercent{Value: 10, Percent: true}})
	}
	on := func(string) ([]workloads.Workload, bool) {
		return []workloads.Workload{{Namespace: "serving", Kind: "Deployment", Name: "web"}, {Namespace: "batch", Kind: "Job", Name: "nightly"}}, true
	}
	snap := Snapshot{Nodes: nodes, Policy: &Policy{Config: cfg, Source: "file policy.yaml"}, Workloads: on}
	opts := StatusOptions{Output: OutputTable, Now: clock}
	b.ReportAllocs()
	for b.Loop() {
		if err := Render(io.Discard, snap, opts); err != nil {
			b.Fatal(err)
		}
	}
}
