package cli

import (
	"io"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// BenchmarkRenderStatus renders a 65,000-node fleet with 1% of its nodes scheduled for maintenance: the cost of one
// status, or of one --watch redraw.
func BenchmarkRenderStatus(b *testing.B) {
	nodes := make([]*corev1.Node, 65000)
	for i := range nodes {
		labels := map[string]string{gke.LabelNodePool: "pool-" + strconv.Itoa(i%50), gke.LabelAccelerator: "nvidia-l4"}
		if i%100 == 0 {
			labels[gke.LabelScheduledMaintenanceTime] = epoch(time.Duration(i) * time.Second)
		}
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-node-" + strconv.Itoa(i), Labels: labels}}
	}
	opts := StatusOptions{Output: OutputTable, Now: clock}
	b.ReportAllocs()
	for b.Loop() {
		if err := Render(io.Discard, Snapshot{Nodes: nodes, PolicyUnknown: "not read", WorkloadsUnknown: "not read"}, opts); err != nil {
			b.Fatal(err)
		}
	}
}
