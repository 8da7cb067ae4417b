package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/nodes"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// TestReadersAgree feeds the same odd nodes to every reader of a Node — the node series, the workload series, the
// policy and status -o json — and checks that they agree on what is pending and what is under way.
func TestReadersAgree(t *testing.T) {
	window := now.Add(50 * time.Hour).UTC()
	announce := func(status string, at time.Time) string {
		return `{"type":"SCHEDULED","maintenance_status":"` + status + `","can_reschedule":"true","window_start_time":"` +
			at.Format(time.RFC3339) + `"}`
	}
	for _, tc := range []struct {
		name          string
		labels        map[string]string
		annotation    string
		taint         bool
		start         time.Time // the pending maintenance; zero: none
		inMaintenance bool
	}{
		{name: "label-only", labels: map[string]string{gke.LabelActiveNodeMaintenance: "ONGOING"}, inMaintenance: true},
		{name: "annotation-only", annotation: announce("PENDING", window), start: window},
		{name: "taint-only", taint: true, inMaintenance: true},
		{name: "announced-ongoing", annotation: announce("ONGOING", window), inMaintenance: true},
		{name: "passthrough", labels: map[string]string{gke.LabelActiveNodeMaintenance: "passthrough"}, inMaintenance: true},
		{name: "label-and-window", labels: map[string]string{gke.LabelScheduledMaintenanceTime: epoch(50 * time.Hour)},
			annotation: announce("PENDING", window), start: window},
		{name: "malformed", labels: map[string]string{gke.LabelScheduledMaintenanceTime: "soon"}, annotation: "{not json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := testenv.StartAPIServer(t)
			labels := map[string]string{gke.LabelNodePool: "pool", gke.LabelAccelerator: "nvidia-l4"}
			for k, v := range tc.labels {
				labels[k] = v
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
			if tc.annotation != "" {
				node.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: tc.annotation}
			}
			if tc.taint {
				node.Spec.Taints = []corev1.Taint{{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}}
			}
			createNodes(t, api.Client, []*corev1.Node{node})
			runPod(t, api.Client, "default", "app", "n", nil, nil)

			// Node series.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			nodeCol, err := nodes.New(slog.New(slog.DiscardHandler), api.Client, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			go nodeCol.Run(ctx)
			meta, err := metadata.NewForConfig(api.Config)
			if err != nil {
				t.Fatal(err)
			}
			workCol, err := workloads.New(slog.New(slog.DiscardHandler), api.Client, meta, readiness.Config{}, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			go workCol.Run(ctx)
			var nodeSeries, workSeries map[string]*dto.MetricFamily
			deadline := time.Now().Add(30 * time.Second)
			for {
				// The collectors refuse to render before their first list has synced.
				if nodeCol.HasSynced() && workCol.HasSynced() {
					nodeSeries, workSeries = parseText(t, nodeCol.WriteText), parseText(t, workCol.WriteText)
					if nodeSeries["gke_node_info"] != nil && (hasWorkload(workSeries) || tc.start.IsZero() && !tc.inMaintenance) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("collectors did not show the node and its workload; node series %v, workload series %v", nodeSeries, workSeries)
				}
				time.Sleep(20 * time.Millisecond)
			}

			// The node series show either source of the pending maintenance, and a sign of maintenance under way.
			var starts []float64
			for _, f := range []string{"gke_node_scheduled_maintenance_timestamp_seconds", "gke_node_upcoming_maintenance_window_start_timestamp_seconds"} {
				if fam := nodeSeries[f]; fam != nil {
					starts = append(starts, fam.Metric[0].GetGauge().GetValue())
				}
			}
			for _, s := range starts {
				if tc.start.IsZero() && !tc.inMaintenance || !tc.start.IsZero() && s != float64(tc.start.Unix()) {
					t.Errorf("node series announce maintenance at %v, want %v", s, tc.start)
				}
			}
			underWay := nodeSeries["gke_node_maintenance_state"] != nil || nodeSeries["gke_node_impending_termination"] != nil
			if fam := nodeSeries["gke_node_upcoming_maintenance_info"]; fam != nil {
				for _, l := range fam.Metric[0].Label {
					if l.GetName() == "status" && strings.EqualFold(l.GetValue(), "ONGOING") {
						underWay = true
					}
				}
			}
			if underWay != tc.inMaintenance {
				t.Errorf("node series show maintenance under way %v, want %v", underWay, tc.inMaintenance)
			}

			// Workload series.
			next := workSeries["gke_workload_next_maintenance_timestamp_seconds"]
			if tc.start.IsZero() != (next == nil) || next != nil && next.Metric[0].GetGauge().GetValue() != float64(tc.start.Unix()) {
				t.Errorf("workload next maintenance %v, want %v", next, tc.start)
			}
			if in := workSeries["gke_workload_nodes_in_maintenance"]; (in != nil) != tc.inMaintenance {
				t.Errorf("workload nodes in maintenance %v, want in maintenance %v", in, tc.inMaintenance)
			}

			// Policy: what it refuses a drain for.
			fresh, err := api.Client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse([]byte("pools:\n- name: all\n  strategy: rolling\n  maxUnavailable: 1\n"))
			if err != nil {
				t.Fatal(err)
			}
			v := nodeview.Of(fresh)
			pool, cluster := policy.Survey(cfg, v, []*nodeview.View{v}, (*nodeview.View).Disrupted)
			d := policy.Decide(cfg, policy.Input{Request: policy.Request{Action: nodeview.Drain}, Node: v, Pool: pool,
				Cluster: cluster, Now: now})
			if refusedNone := strings.Contains(d.Reason, "no maintenance is pending"); refusedNone != tc.start.IsZero() {
				t.Errorf("policy: %s (%s), want pending %v", d.Verdict, d.Reason, !tc.start.IsZero())
			}
			if !tc.start.IsZero() && strings.Contains(d.Reason, "already under way") != tc.inMaintenance {
				t.Errorf("policy: %s (%s), want under way %v", d.Verdict, d.Reason, tc.inMaintenance)
			}
			if cluster.Disrupted != 1 && tc.inMaintenance {
				t.Errorf("policy survey: %d disrupted, want the node in maintenance counted", cluster.Disrupted)
			}

			// status -o json.
			out, err := runStatus(t, api, StatusOptions{Output: OutputJSON, All: true})
			if err != nil {
				t.Fatal(err)
			}
			var report Report
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatal(err)
			}
			if len(report.Nodes) != 1 {
				t.Fatalf("status shows %d nodes: %s", len(report.Nodes), out)
			}
			s := report.Nodes[0]
			if start := s.MaintenanceStart; (start == nil) != tc.start.IsZero() || start != nil && !start.Equal(tc.start) {
				t.Errorf("status maintenanceStart %v, want %v", start, tc.start)
			}
			statusUnderWay := false
			for _, g := range s.GKEState {
				if strings.HasPrefix(g, "active-node-maintenance=") || g == "in-maintenance" || g == "impending-termination" {
					statusUnderWay = true
				}
			}
			if statusUnderWay != tc.inMaintenance {
				t.Errorf("status gkeState %v, want in maintenance %v", s.GKEState, tc.inMaintenance)
			}
		})
	}
}

func parseText(t *testing.T, write func(io.Writer) error) map[string]*dto.MetricFamily {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// hasWorkload reports the workload series of the test's pod.
func hasWorkload(fams map[string]*dto.MetricFamily) bool {
	for _, fam := range fams {
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if l.GetName() == "workload" && l.GetValue() == "app" {
					return true
				}
			}
		}
	}
	return false
}
