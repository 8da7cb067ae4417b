package mixin

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// producedMetrics are the series of the exporter's metric contract: besides the mixin's own recording rules, the
// only metrics its rules and dashboards may use.
var producedMetrics = []string{
	// cluster command, from Node objects
	"gke_node_info",
	"gke_node_scheduled_maintenance_timestamp_seconds",
	"gke_node_maintenance_state",
	"gke_node_impending_termination",
	"gke_node_perform_maintenance_requested",
	"gke_node_unschedulable",
	"gke_node_opportunistic_maintenance_triggered",
	"gke_node_opportunistic_maintenance_disabled",
	"gke_node_maintenance_window_started",
	"gke_node_upcoming_maintenance_info",
	"gke_node_upcoming_maintenance_window_start_timestamp_seconds",
	"gke_node_upcoming_maintenance_window_end_timestamp_seconds",
	"gke_node_upcoming_maintenance_latest_window_start_timestamp_seconds",
	"gke_node_tpu_slice_hosts",
	"gke_node_report_and_replace_status",
	"gke_node_gpu_xid_critical",
	"gke_node_gpu_xid_critical_since_timestamp_seconds",
	"gke_node_gpus_unhealthy",
	"gke_node_gke_operation",
	"gke_node_termination_timestamp_seconds",
	// GKE API collector
	"gke_cluster_control_plane_version_info",
	"gke_node_pool_version_info",
	"gke_node_pool_status",
	"gke_node_pool_upgrade_settings_info",
	"gke_node_pool_auto_upgrade_start_timestamp_seconds",
	"gke_node_pool_auto_upgrade_paused",
	"gke_node_pool_upgrade_target_version_info",
	"gke_node_pool_upgrade_in_progress",
	"gke_node_pool_upgrade_nodes",
	"gke_cluster_maintenance_window_next_start_timestamp_seconds",
	"gke_cluster_maintenance_window_next_end_timestamp_seconds",
	"gke_cluster_maintenance_exclusion_end_timestamp_seconds",
	"gke_disruption_gke_api_requests_total",
	"gke_disruption_gke_api_last_success_timestamp_seconds",
	// node command, from the metadata server
	"gce_instance_maintenance_event",
	"gce_instance_preempted",
	"gce_instance_upcoming_maintenance_info",
	"gce_instance_upcoming_maintenance_window_start_timestamp_seconds",
	"gce_instance_upcoming_maintenance_window_end_timestamp_seconds",
	"gce_instance_upcoming_maintenance_latest_window_start_timestamp_seconds",
	// cluster command, from Cloud Monitoring
	"gke_node_interruptions_total",
	"gke_node_pool_interruptions_total",
	// cluster command, from pods
	"gke_workload_nodes",
	"gke_workload_next_maintenance_timestamp_seconds",
	"gke_workload_nodes_in_maintenance",
	"gke_readiness_findings",
	// self-monitoring
	"gke_disruption_collector_success",
	"gke_disruption_collector_duration_seconds",
	"gke_disruption_cloudmonitoring_requests_total",
	"gke_disruption_cloudmonitoring_last_success_timestamp_seconds",
	"gke_disruption_metadata_requests_total",
	"gke_disruption_metadata_last_change_timestamp_seconds",
	"gke_disruption_metadata_last_success_timestamp_seconds",
	"gke_disruption_metadata_path_supported",
	"gke_disruption_metadata_parse_errors_total",
	"gke_disruption_node_label_parse_errors_total",
	"gke_disruption_watch_errors_total",
	"gke_disruption_exporter_build_info",
	// actions command
	"gke_disruption_webhook_requests_total",
	"gke_disruption_actions_total",
	"gke_disruption_action_duration_seconds_bucket",
	"gke_disruption_action_duration_seconds_sum",
	"gke_disruption_action_duration_seconds_count",
	"gke_disruption_actions_in_progress",
	"gke_disruption_actions_waiting",
	"gke_disruption_action_state",
	"gke_disruption_actions_leader",
	"gke_disruption_actions_config_last_reload_successful",
}

// prometheusMetrics are series Prometheus itself writes: target health and the state of alerts.
var prometheusMetrics = []string{"up", "ALERTS"}

// usedMetrics parses expr and returns the metric names of its selectors.
func usedMetrics(expr string) ([]string, error) {
	node, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

func TestExpressionsUseOnlyProducedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, m := range append(producedMetrics, prometheusMetrics...) {
		known[m] = true
	}
	recorded := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Record != "" {
			known[r.Record], recorded[r.Record] = true, true
		}
	}

	used := map[string]bool{}
	for _, e := range allExpressions(t) {
		names, err := usedMetrics(e.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", e.where, err, e.expr)
			continue
		}
		for _, name := range names {
			used[name] = true
			switch {
			case name == "":
				t.Errorf("%s: a selector without a metric name", e.where)
			case !known[name]:
				t.Errorf("%s uses %s, which neither the exporter nor a recording rule produces", e.where, name)
			}
		}
	}
	for _, name := range sortedKeys(recorded) {
		if !used[name] {
			t.Errorf("recording rule %s is used by no alert or dashboard", name)
		}
	}
}

// TestRecordingRuleNames checks the level:metric:operation convention.
func TestRecordingRuleNames(t *testing.T) {
	for _, r := range allRules(t) {
		if r.Record == "" {
			continue
		}
		if parts := strings.Split(r.Record, ":"); len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			t.Errorf("recording rule %s is not named level:metric:operation", r.Record)
		}
	}
}

// Sanity check of the checker itself: an unknown metric and a broken expression are caught.
func TestUsedMetrics(t *testing.T) {
	names, err := usedMetrics(`sum by (node_pool) (rate(foo_total{job="x"}[5m])) / on () group_left bar`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "foo_total,bar" {
		t.Errorf("usedMetrics = %v, want [foo_total bar]", names)
	}
	if _, err := usedMetrics(`sum by (node_pool (foo)`); err == nil {
		t.Error("a broken expression parsed")
	}
}
