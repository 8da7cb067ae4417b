// Recording rules. Names follow level:metric:operation; every rule keeps the cluster label.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local byPool = utils.labelList(c, ['node_pool']),
    local byPoolTypeReason = utils.labelList(c, ['node_pool', 'interruption_type', 'interruption_reason']),

    // scheduledWithin counts, per pool, the nodes whose maintenance starts within the given seconds (or already
    // started and is not done).
    local scheduledWithin(name, seconds) = {
      record: 'node_pool:gke_node_maintenance_scheduled:count_next%s' % name,
      expr: |||
        count by (%(by)s) (
          node:gke_node_maintenance_start_timestamp_seconds:min < time() + %(seconds)d
        )
      ||| % { by: byPool, seconds: seconds },
    },

    local interruptions(window) = {
      record: 'node_pool_type_reason:gke_node_pool_interruptions:increase%s' % window,
      // The exporter exposes a new series at zero before its first count, so increase() sees every interruption.
      expr: |||
        sum by (%(by)s) (
          increase(gke_node_pool_interruptions_total{%(selector)s}[%(window)s])
        )
      ||| % { by: byPoolTypeReason, selector: c.clusterExporterSelector, window: window },
    },

    groups+: [
      {
        name: 'gke-disruption-maintenance.rules',
        rules: [
          {
            // The earliest known start of each node's next maintenance, from the node label (cluster exporter) or
            // the metadata server's window (node agent), with the node's pool and accelerator labels.
            record: 'node:gke_node_maintenance_start_timestamp_seconds:min',
            expr: promql.withNodeInfo(c, |||
              min by (%(by)s) (
                gke_node_scheduled_maintenance_timestamp_seconds{%(cluster)s}
                or
                gce_instance_upcoming_maintenance_window_start_timestamp_seconds{%(node)s}
              )
            ||| % { by: byNode, cluster: c.clusterExporterSelector, node: c.nodeAgentSelector }),
          },
          scheduledWithin('24h', 24 * 3600),
          scheduledWithin('7d', 7 * 24 * 3600),
          {
            record: 'node_pool:gke_nodes_in_maintenance:count',
            expr: |||
              count by (%(byPool)s) (
              %(nodes)s
              )
            ||| % {
              byPool: byPool,
              nodes: utils.indent(promql.withNodeInfo(c, 'group by (%s) (gke_node_maintenance_state{%s})' % [byNode, c.clusterExporterSelector]), 2),
            },
          },
        ],
      },
      {
        name: 'gke-disruption-interruptions.rules',
        rules: [interruptions(w) for w in ['1h', '1d', '7d']],
      },
    ],
  },
}
