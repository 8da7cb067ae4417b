package gke

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	controlPlaneVersionDesc = prometheus.NewDesc("gke_cluster_control_plane_version_info",
		"The cluster's control-plane version (Cluster.current_master_version).", []string{"version"}, nil)
	poolVersionDesc = prometheus.NewDesc("gke_node_pool_version_info",
		"A node pool's Kubernetes version (NodePool.version).", []string{"node_pool", "version"}, nil)
	poolStatusDesc = prometheus.NewDesc("gke_node_pool_status",
		"A node pool's status (NodePool.status, lower-cased).", []string{"node_pool", "status"}, nil)
	upgradeSettingsDesc = prometheus.NewDesc("gke_node_pool_upgrade_settings_info",
		"A node pool's upgrade strategy (surge when GKE leaves it unspecified), surge settings and whether auto-upgrade is on.",
		[]string{"node_pool", "strategy", "max_surge", "max_unavailable", "auto_upgrade"}, nil)
	autoUpgradeStartDesc = prometheus.NewDesc("gke_node_pool_auto_upgrade_start_timestamp_seconds",
		"When GKE plans to start the node pool's auto-upgrade (management.upgrade_options.auto_upgrade_start_time); absent when none is planned.",
		[]string{"node_pool"}, nil)
	autoUpgradePausedDesc = prometheus.NewDesc("gke_node_pool_auto_upgrade_paused",
		"A node pool's auto-upgrade is paused, by reason (FetchNodePoolUpgradeInfo paused_reason, lower-cased).",
		[]string{"node_pool", "reason"}, nil)
	targetVersionDesc = prometheus.NewDesc("gke_node_pool_upgrade_target_version_info",
		"The version GKE would upgrade the node pool to (patch target, else minor), when it differs from the pool's.",
		[]string{"node_pool", "version"}, nil)
	upgradeInProgressDesc = prometheus.NewDesc("gke_node_pool_upgrade_in_progress",
		"A pending or running GKE operation on the node pool, by operation type (lower-cased).",
		[]string{"node_pool", "operation_type"}, nil)
	upgradeNodesDesc = prometheus.NewDesc("gke_node_pool_upgrade_nodes",
		"Node counts of the latest running operation on the node pool (progress metrics NODES_DONE, NODES_TOTAL, ... as state done, total, ...).",
		[]string{"node_pool", "state"}, nil)
	windowStartDesc = prometheus.NewDesc("gke_cluster_maintenance_window_next_start_timestamp_seconds",
		"Start of the cluster's maintenance window open now or next; absent without a window.", nil, nil)
	windowEndDesc = prometheus.NewDesc("gke_cluster_maintenance_window_next_end_timestamp_seconds",
		"End of the cluster's maintenance window open now or next; absent without a window.", nil, nil)
	exclusionEndDesc = prometheus.NewDesc("gke_cluster_maintenance_exclusion_end_timestamp_seconds",
		"End of a maintenance exclusion in force now, by name and scope (no_upgrades, no_minor_upgrades, no_minor_or_node_upgrades).",
		[]string{"exclusion", "scope"}, nil)
)

// snapshot is what one poll read.
type snapshot struct {
	cluster     *containerpb.Cluster
	operations  []*containerpb.Operation                    // of the cluster's location
	upgradeInfo map[string]*containerpb.NodePoolUpgradeInfo // by node pool name
}

// render turns a poll's answers into the exported series, as of now. problems are fields it could not read; the
// rest is rendered all the same.
func render(c Cluster, s snapshot, now time.Time) (metrics []prometheus.Metric, problems []string) {
	gauge := func(desc *prometheus.Desc, value float64, labels ...string) {
		metrics = append(metrics, prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, value, labels...))
	}
	if v := s.cluster.GetCurrentMasterVersion(); v != "" {
		gauge(controlPlaneVersionDesc, 1, v)
	}
	for _, np := range s.cluster.GetNodePools() {
		pool := np.GetName()
		if v := np.GetVersion(); v != "" {
			gauge(poolVersionDesc, 1, pool, v)
		}
		gauge(poolStatusDesc, 1, pool, enumName(np.GetStatus().String(), "STATUS_"))
		us := np.GetUpgradeSettings()
		strategy := us.GetStrategy()
		if strategy == containerpb.NodePoolUpdateStrategy_NODE_POOL_UPDATE_STRATEGY_UNSPECIFIED {
			strategy = containerpb.NodePoolUpdateStrategy_SURGE
		}
		gauge(upgradeSettingsDesc, 1, pool, enumName(strategy.String(), ""),
			strconv.Itoa(int(us.GetMaxSurge())), strconv.Itoa(int(us.GetMaxUnavailable())),
			strconv.FormatBool(np.GetManagement().GetAutoUpgrade()))
		if t, ok, err := AutoUpgradeStart(np); err != nil {
			problems = append(problems, "node pool "+pool+" "+err.Error())
		} else if ok {
			gauge(autoUpgradeStartDesc, seconds(t), pool)
		}
		info := s.upgradeInfo[pool]
		if paused(info) {
			reasons := map[string]bool{}
			for _, r := range info.GetPausedReason() {
				reasons[enumName(r.String(), "AUTO_UPGRADE_PAUSED_REASON_")] = true
			}
			if len(reasons) == 0 {
				reasons["unspecified"] = true
			}
			for _, r := range slices.Sorted(maps.Keys(reasons)) {
				gauge(autoUpgradePausedDesc, 1, pool, r)
			}
		}
		target := info.GetPatchTargetVersion()
		if target == "" {
			target = info.GetMinorTargetVersion()
		}
		if target != "" && target != np.GetVersion() {
			gauge(targetVersionDesc, 1, pool, target)
		}
	}
	metrics = append(metrics, renderOperations(c, s.operations)...)

	m, err := MaintenanceAt(s.cluster.GetMaintenancePolicy(), now)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if !m.Start.IsZero() {
		gauge(windowStartDesc, seconds(m.Start))
		gauge(windowEndDesc, seconds(m.End))
	}
	for _, e := range m.ExclusionsAt(now) {
		gauge(exclusionEndDesc, seconds(e.End), e.Name, e.Scope)
	}
	return metrics, problems
}

// renderOperations is the pending and running operations on the cluster's node pools, with the node counts of
// each pool's latest one.
func renderOperations(c Cluster, operations []*containerpb.Operation) []prometheus.Metric {
	var metrics []prometheus.Metric
	latest := map[string]*containerpb.Operation{}
	types := map[string]map[string]bool{}
	for _, op := range operations {
		if op.GetStatus() != containerpb.Operation_PENDING && op.GetStatus() != containerpb.Operation_RUNNING {
			continue
		}
		pool, ok := c.NodePoolOf(op.GetTargetLink())
		if !ok {
			continue
		}
		if types[pool] == nil {
			types[pool] = map[string]bool{}
		}
		types[pool][enumName(op.GetOperationType().String(), "TYPE_")] = true
		if l := latest[pool]; l == nil || startTime(op).After(startTime(l)) {
			latest[pool] = op
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(types)) {
		for _, t := range slices.Sorted(maps.Keys(types[pool])) {
			metrics = append(metrics, prometheus.MustNewConstMetric(upgradeInProgressDesc, prometheus.GaugeValue, 1, pool, t))
		}
		counts := map[string]float64{}
		for _, m := range latest[pool].GetProgress().GetMetrics() {
			state, ok := strings.CutPrefix(m.GetName(), "NODES_")
			if !ok {
				continue
			}
			switch v := m.GetValue().(type) {
			case *containerpb.OperationProgress_Metric_IntValue:
				counts[strings.ToLower(state)] = float64(v.IntValue)
			case *containerpb.OperationProgress_Metric_DoubleValue:
				counts[strings.ToLower(state)] = v.DoubleValue
			}
		}
		for _, state := range slices.Sorted(maps.Keys(counts)) {
			metrics = append(metrics, prometheus.MustNewConstMetric(upgradeNodesDesc, prometheus.GaugeValue, counts[state], pool, state))
		}
	}
	return metrics
}

// startTime is when an operation started; zero when the API does not say.
func startTime(op *containerpb.Operation) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, op.GetStartTime())
	return t
}

func paused(info *containerpb.NodePoolUpgradeInfo) bool {
	return slices.ContainsFunc(info.GetAutoUpgradeStatus(), func(s containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus) bool {
		return s == containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED || s == containerpb.NodePoolUpgradeInfo_MINOR_UPGRADE_PAUSED
	})
}

// enumName is an API enum value as a label value: lower-cased, its unspecified value "unspecified".
func enumName(name, unspecifiedPrefix string) string {
	name = strings.ToLower(name)
	if unspecifiedPrefix != "" && name == strings.ToLower(unspecifiedPrefix)+"unspecified" {
		return "unspecified"
	}
	return name
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
