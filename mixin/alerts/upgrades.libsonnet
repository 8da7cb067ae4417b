// Alerts on the other planned disruptions of a node pool: GKE's node pool upgrades (from the GKE API collector)
// and the planned end of VMs with a maximum run duration (flex-start, queued provisioning; from the node).
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local on = utils.clusterRef(c),
    local byPool = utils.labelList(c, ['node_pool']),
    local byNode = utils.labelList(c, ['node']),
    local alert(name, rule) = utils.alertRule(c, name, rule),
    local api(metric, matchers='') = '%s{%s%s}' % [metric, c.clusterExporterSelector, if matchers == '' then '' else ', ' + matchers],
    // The GKE API is polled every few minutes: a poll that fails leaves its series missing until the next.
    local bridged(metric) = promql.bridged(c, api(metric)),
    local collision = utils.seconds(c.upgradeCollisionWindow),

    groups+: [
      {
        name: 'gke-disruption-upgrades',
        rules: [
          alert('GKENodePoolUpgradeCollidesWithMaintenance', {
            // The pool's earliest host maintenance, valued with the upgrade's start where GKE says when
            // (auto-upgrade start time), else with the cluster's next maintenance window where a target version
            // waits for an auto-upgrade.
            expr: |||
              (
                min by (%(byPool)s) (%(autoStart)s) < time() + %(collision)d
                or on (%(byPool)s)
                (
                  group by (%(byPool)s) (%(target)s)
                  and on (%(byPool)s) %(settings)s
                )
                * on (%(cluster)s) group_left ()
                  (max by (%(cluster)s) (%(window)s) < time() + %(collision)d)
              )
              and on (%(byPool)s)
              min by (%(byPool)s) (%(start)s)
            ||| % {
              byPool: byPool,
              cluster: c.clusterLabel,
              collision: collision,
              autoStart: bridged('gke_node_pool_auto_upgrade_start_timestamp_seconds'),
              target: bridged('gke_node_pool_upgrade_target_version_info'),
              settings: promql.bridged(c, api('gke_node_pool_upgrade_settings_info', 'auto_upgrade="true"')),
              window: bridged('gke_cluster_maintenance_window_next_start_timestamp_seconds'),
              start: promql.maintenanceStart,
            },
            annotations: {
              summary: 'A node pool with host maintenance scheduled is also about to be upgraded.',
              description: 'Node pool {{ $labels.node_pool }}%s has host maintenance scheduled and an upgrade due at {{ $value | humanizeTimestamp }}: its nodes and their workloads would be disrupted twice where once would do.' % on,
            },
          }),
          alert('GKENodePoolUpgradeStuck', {
            // An upgrade in progress whose done-node count has not moved for the threshold (and that ran as long).
            expr: |||
              %(done)s
              unless on (%(byPool)s) changes(%(done)s[%(threshold)s]) > 0
              and on (%(byPool)s) %(doneBefore)s
              and on (%(byPool)s) %(inProgress)s
            ||| % {
              byPool: byPool,
              threshold: c.upgradeStuckThreshold,
              done: api('gke_node_pool_upgrade_nodes', 'state="done"'),
              doneBefore: '%s offset %s' % [api('gke_node_pool_upgrade_nodes', 'state="done"'), c.upgradeStuckThreshold],
              inProgress: bridged('gke_node_pool_upgrade_in_progress'),
            },
            annotations: {
              summary: 'A node pool upgrade has not moved on.',
              description: 'The upgrade of node pool {{ $labels.node_pool }}%s has upgraded no further node for %s ({{ printf "%%.0f" $value }} done). A PodDisruptionBudget that allows no eviction, a node that does not become ready, or a stockout may hold it.' % [on, c.upgradeStuckThreshold],
            },
          }),
          alert('GKENodeTerminationApproaching', {
            // Remembered only through a gap of the cluster exporter: a node that is gone has ended.
            local termination = api('gke_node_termination_timestamp_seconds'),
            expr: promql.withNodeInfo(c, |||
              min by (%(by)s) %(termination)s < time() + %(lead)d
            ||| % {
              by: byNode,
              termination: promql.remembered(c, termination, 'cluster'),
              lead: utils.seconds(c.terminationLeadTime),
            }, promql.signalsOf(c, [termination])),
            annotations: {
              summary: 'A node reaches the end of its maximum run duration soon.',
              description: 'Node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}%s is a VM with a maximum run duration (flex-start or queued provisioning): it is deleted at {{ $value | humanizeTimestamp }}, with its pods.' % on,
            },
          }),
        ],
      },
    ],
  },
}
