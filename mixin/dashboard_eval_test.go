package mixin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// fleetFixture is a small fleet as Prometheus would hold it, recorded series included: two pools, a node whose
// agent restarted (two instances), a window known from the agent and from GKE's annotation at once, two workloads,
// two actions replicas.
const fleetFixture = `
load 1m
  gke_node_info{job="gke-disruption-exporter-cluster", instance="c:9842", node="a3-1", node_pool="a3", zone="z", machine_type="a3-highgpu-8g", accelerator="h100", provisioning="standard"} 1x40
  gke_node_info{job="gke-disruption-exporter-cluster", instance="c:9842", node="a3-2", node_pool="a3", zone="z", machine_type="a3-highgpu-8g", accelerator="h100", provisioning="standard"} 1x40
  gke_node_info{job="gke-disruption-exporter-cluster", instance="c:9842", node="l4-1", node_pool="l4", zone="z", machine_type="g2-standard-8", accelerator="l4", provisioning="spot"} 1x40
  node:gke_node_maintenance_start_timestamp_seconds:min{node="a3-1", node_pool="a3", zone="z", machine_type="a3-highgpu-8g", accelerator="h100", provisioning="standard"} 36000x40
  node:gke_node_maintenance_can_reschedule:info{node="a3-1", can_reschedule="true"} 1x40
  node_xid:gke_node_gpu_xid:since{node="a3-1", xid="79"} 600x40
  topology:gke_node_gpu_xid_repair:correlated{block="b1"} 3x40
  node_pool:gke_node_maintenance_scheduled:count_next24h{node_pool="a3"} 1x40
  node_pool:gke_node_maintenance_scheduled:count_next7d{node_pool="a3"} 1x40
  node_pool:gke_nodes_in_maintenance:count{node_pool="a3"} 1x40
  node_pool_type_reason:gke_node_pool_interruptions:increase1h{cluster_name="c1", node_pool="a3", interruption_type="MaintenanceEvent", interruption_reason="HostError"} 1x40
  node_pool_type_reason:gke_node_pool_interruptions:increase1d{cluster_name="c1", node_pool="a3", interruption_type="MaintenanceEvent", interruption_reason="HostError"} 1x40
  node_pool_type_reason:gke_node_pool_interruptions:increase7d{cluster_name="c1", node_pool="a3", interruption_type="MaintenanceEvent", interruption_reason="HostError"} 1x40
  gce_instance_upcoming_maintenance_info{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1", type="SCHEDULED", status="PENDING", can_reschedule="true", reasons="PLANNED_UPDATE"} 1x40
  gce_instance_upcoming_maintenance_info{job="gke-disruption-exporter-node", instance="n2:9843", node="a3-1", type="SCHEDULED", status="PENDING", can_reschedule="true", reasons="PLANNED_UPDATE"} 1x40
  gce_instance_upcoming_maintenance_window_end_timestamp_seconds{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1"} 39600x40
  gke_node_upcoming_maintenance_window_end_timestamp_seconds{job="gke-disruption-exporter-cluster", instance="c:9842", node="a3-1"} 39600x40
  gce_instance_upcoming_maintenance_latest_window_start_timestamp_seconds{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1"} 37800x40
  gke_node_maintenance_state{job="gke-disruption-exporter-cluster", instance="c:9842", node="a3-2", state="ongoing"} 1x40
  gke_node_unschedulable{job="gke-disruption-exporter-cluster", instance="c:9842", node="a3-2"} 1x40
  gce_instance_maintenance_event{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1", event="NONE"} 1x40
  gce_instance_preempted{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1"} 0x40
  gke_node_interruptions_total{job="gke-disruption-exporter-cluster", instance="c:9842", cluster_name="c1", node="a3-1", interruption_type="MaintenanceEvent", interruption_reason="HostError"} 0+1x40
  gke_workload_next_maintenance_timestamp_seconds{job="gke-disruption-exporter-cluster", instance="c:9842", namespace="ml", workload_kind="JobSet", workload="train"} 36000x40
  gke_workload_next_maintenance_timestamp_seconds{job="gke-disruption-exporter-cluster", instance="c:9842", namespace="ml", workload_kind="Deployment", workload="serve"} 36000x40
  gke_workload_nodes{job="gke-disruption-exporter-cluster", instance="c:9842", namespace="ml", workload_kind="JobSet", workload="train"} 4x40
  gke_workload_nodes_in_maintenance{job="gke-disruption-exporter-cluster", instance="c:9842", namespace="ml", workload_kind="JobSet", workload="train"} 1x40
  gke_readiness_findings{job="gke-disruption-exporter-cluster", instance="c:9842", check="grace_period_short", namespace="ml", workload_kind="JobSet", workload="train"} 2x40
  up{job="gke-disruption-exporter-cluster", instance="c:9842"} 1x40
  up{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1"} 1x40
  up{job="gke-disruption-exporter-actions", instance="a1:9844"} 1x40
  gke_disruption_collector_success{job="gke-disruption-exporter-cluster", instance="c:9842", collector="nodes"} 1x40
  gke_disruption_collector_duration_seconds{job="gke-disruption-exporter-cluster", instance="c:9842", collector="nodes"} 0.1x40
  gke_disruption_cloudmonitoring_last_success_timestamp_seconds{job="gke-disruption-exporter-cluster", instance="c:9842"} 0+60x40
  gke_disruption_cloudmonitoring_requests_total{job="gke-disruption-exporter-cluster", instance="c:9842", metric="node_pool", code="OK"} 0+1x40
  gke_disruption_watch_errors_total{job="gke-disruption-exporter-cluster", instance="c:9842", resource="nodes"} 0x40
  gke_disruption_metadata_last_success_timestamp_seconds{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1", path="instance/maintenance-event"} 0+60x40
  gke_disruption_metadata_path_supported{job="gke-disruption-exporter-node", instance="n1:9843", node="a3-1", path="instance/upcoming-maintenance"} 1x40
  gke_disruption_metadata_requests_total{job="gke-disruption-exporter-node", instance="n1:9843", path="instance/maintenance-event", code="200"} 0+1x40
  gke_disruption_actions_total{job="gke-disruption-exporter-actions", instance="a1:9844", action="drain", result="succeeded"} 0+1x40
  gke_disruption_actions_in_progress{job="gke-disruption-exporter-actions", instance="a1:9844", action="drain"} 1x40
  gke_disruption_action_duration_seconds_bucket{job="gke-disruption-exporter-actions", instance="a1:9844", action="drain", le="60"} 0+1x40
  gke_disruption_action_duration_seconds_bucket{job="gke-disruption-exporter-actions", instance="a1:9844", action="drain", le="+Inf"} 0+1x40
  gke_disruption_webhook_requests_total{job="gke-disruption-exporter-actions", instance="a1:9844", code="200"} 0+1x40
  gke_disruption_webhook_requests_total{job="gke-disruption-exporter-actions", instance="a2:9844", code="503"} 0+1x40
  gke_disruption_action_state{job="gke-disruption-exporter-actions", instance="a1:9844", node="a3-2", action="drain", state="done"} 1x40
  gke_disruption_actions_waiting{job="gke-disruption-exporter-actions", instance="a1:9844", action="drain", pool="a3", reason="window"} 1x40
  gke_disruption_actions_leader{job="gke-disruption-exporter-actions", instance="a1:9844"} 1x40
  gke_disruption_actions_leader{job="gke-disruption-exporter-actions", instance="a2:9844"} 0x40
  gke_disruption_actions_config_last_reload_successful{job="gke-disruption-exporter-actions", instance="a1:9844"} 1x40
`

// dashboardVariables stand in for the dashboards' variables at their "All" values.
var dashboardVariables = strings.NewReplacer("$cluster", ".*", "$node_pool", ".*", "$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// TestDashboardQueriesEvaluate runs every dashboard query over the fixture: none may fail (a join that finds
// duplicates fails the whole panel), and the panels that join several sources show what the fixture holds.
func TestDashboardQueriesEvaluate(t *testing.T) {
	storage := promqltest.LoadedStorage(t, fleetFixture)
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 10_000_000)
	at := time.Unix(0, 0).Add(30 * time.Minute)
	results := map[string]promql.Vector{}
	dashboards, _ := loadDashboards(t)
	for _, name := range sortedKeys(dashboards) {
		for _, p := range dashboards[name].Panels {
			for _, target := range p.Targets {
				where := name + ": " + p.Title + " (" + target.RefID + ")"
				q, err := engine.NewInstantQuery(context.Background(), storage, nil, dashboardVariables.Replace(target.Expr), at)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				res := q.Exec(context.Background())
				if res.Err != nil {
					t.Errorf("%s: %v\n%s", where, res.Err, target.Expr)
					continue
				}
				if v, err := res.Vector(); err == nil {
					results[where] = v
				}
				q.Close()
			}
		}
	}
	for where, want := range map[string]map[string]float64{
		// One row per node, the restarted agent's two instances and the two sources of the window end merged.
		"gke-disruption-fleet.json: Upcoming maintenance (C)": {"a3-1": 39600e3},
		"gke-disruption-fleet.json: Upcoming maintenance (D)": {"a3-1": 37800e3},
		"gke-disruption-fleet.json: Upcoming maintenance (E)": {"a3-1": 1},
		// Both workloads have their earliest maintenance at a3-1's window start.
		"gke-disruption-fleet.json: Upcoming maintenance (F)":           {"a3-1": 2},
		"gke-disruption-fleet.json: Capacity at risk, by node pool (A)": {"a3": 0.5},
		// The fault of a node of the selected pools, joined with gke_node_info to filter by pool.
		"gke-disruption-fleet.json: GPU faults now (A)":   {"a3-1": 600e3},
		"gke-disruption-actions.json: Follower 503s (A)":  {"": 30},
		"gke-disruption-actions.json: Webhook errors (A)": {"": 0},
		"gke-disruption-actions.json: Leaders (A)":        {"": 1},
	} {
		got := map[string]float64{}
		for _, s := range results[where] {
			key := s.Metric.Get("node")
			if key == "" {
				key = s.Metric.Get("node_pool")
			}
			got[key] = s.F
		}
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", where, got, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", where, k, got[k], v)
			}
		}
	}
}
