package workloads

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/nodes"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// startSharing runs the workloads collector on the nodes collector's node watch, as the cluster command does, both
// serving one registry.
func startSharing(t *testing.T, api *testenv.APIServer) *exporter {
	t.Helper()
	logger := promslog.NewNopLogger()
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	nc, err := nodes.New(logger, api.Client, reg)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := New(logger, api.Client, meta, testConfig, reg, WithNodeWatch(nc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { wc.Run(ctx); done <- struct{}{} }()
	go func() { nc.Run(ctx); done <- struct{}{} }()
	srv := httptest.NewServer(collector.NewSet(logger, reg, map[string]collector.Collector{"nodes": nc, "workloads": wc}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done; <-done })
	testenv.Eventually(t, 30*time.Second, "initial lists synced", func() error {
		if !wc.HasSynced() || !nc.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return &exporter{t: t, url: srv.URL}
}

// TestSharedNodeWatch: on the nodes collector's node watch the workloads collector sees the nodes of the initial
// list, and then nodes changed, added and deleted, as on a watch of its own; both collectors serve their series.
func TestSharedNodeWatch(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	f.node("gpu-1", newVersion, with(gpuLabels, gke.LabelScheduledMaintenanceTime, "1764550000"))
	f.namespace("serve")
	owner := f.deployment("serve", "inference", map[string]string{"app": "inference"})
	for i := range 3 {
		f.pod(podSpec{namespace: "serve", name: fmt.Sprintf("inference-%d", i), node: fmt.Sprintf("gpu-%d", i), owner: owner, grace: 120})
	}
	e := startSharing(t, api)
	names := append(allFamilies[:2:2], "gke_node_scheduled_maintenance_timestamp_seconds", "gke_disruption_collector_success")
	// want is the exposition with count nodes under the workload, its next maintenance (none when 0), and the nodes'
	// scheduled-maintenance samples.
	want := func(count, next int, scheduled ...string) string {
		s := fmt.Sprintf(`# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
gke_workload_nodes{namespace="serve",workload="inference",workload_kind="Deployment"} %d
# HELP gke_disruption_collector_success Whether a collector's part of the scrape succeeded.
# TYPE gke_disruption_collector_success gauge
gke_disruption_collector_success{collector="nodes"} 1
gke_disruption_collector_success{collector="workloads"} 1
`, count)
		if next != 0 {
			s += fmt.Sprintf(`# HELP gke_workload_next_maintenance_timestamp_seconds Earliest scheduled maintenance among the workload's GPU, TPU and Spot nodes.
# TYPE gke_workload_next_maintenance_timestamp_seconds gauge
gke_workload_next_maintenance_timestamp_seconds{namespace="serve",workload="inference",workload_kind="Deployment"} %d
`, next)
		}
		if len(scheduled) > 0 {
			s += `# HELP gke_node_scheduled_maintenance_timestamp_seconds When host maintenance is scheduled to start, from the node label cloud.google.com/scheduled-maintenance-time.
# TYPE gke_node_scheduled_maintenance_timestamp_seconds gauge
`
			for _, line := range scheduled {
				s += "gke_node_scheduled_maintenance_timestamp_seconds" + line + "\n"
			}
		}
		return s
	}
	e.waitFor("the initial list: two of the three pods' nodes known", want(2, 1764550000, `{node="gpu-1"} 1.76455e+09`), names...)

	f.node("gpu-2", newVersion, with(gpuLabels, gke.LabelScheduledMaintenanceTime, "1764540000"))
	e.waitFor("a node added", want(3, 1764540000, `{node="gpu-1"} 1.76455e+09`, `{node="gpu-2"} 1.76454e+09`), names...)

	f.patchNode("gpu-1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":null}}}`)
	f.check(api.Client.CoreV1().Nodes().Delete(f.ctx, "gpu-2", metav1.DeleteOptions{}), "deleting node gpu-2")
	e.waitFor("a node changed and one deleted", want(2, 0), names...)
}
