// Node pool drill-down: one pool's nodes, their disruption signals now, and the pool's interruptions.
local g = import '../lib/grafana.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local cluster = common.clusterMatcher(c),
    local by = utils.labelList(c, ['node']),
    local sel = '%s, node_pool="$node_pool"' % cluster,
    // poolNodes is one series per node of the chosen pool, to restrict per-node series to the pool.
    local poolNodes = 'group by (%s, node_pool) (gke_node_info{%s, %s})' % [by, c.clusterExporterSelector, sel],
    local inPool(expr) = '%s\n* on (%s) group_left (node_pool)\n  %s' % [expr, by, poolNodes],
    local clusterSeries(metric) = '%s{%s, %s}' % [metric, c.clusterExporterSelector, cluster],
    local nodeSeries(metric, extra='') = '%s{%s, %s%s}' % [metric, c.nodeAgentSelector, cluster, extra],
    // signal names each disruption signal of a node as one label value.
    local signal(expr, text, label='') = 'label_replace(%s, "signal", "%s", "%s", "(.*)")' % [expr, text, label],

    'gke-disruption-node-pool.json': g.dashboard(
      c,
      'node-pool',
      'Node pool',
      'Host maintenance, disruption signals and interruptions of one GKE node pool.',
      [common.clusterVariable(c), common.nodePoolVariable(c, multi=false)],
      [
        g.row('Node pool'),
        {
          height: 4,
          panels: [
            g.stat('Nodes', 'Nodes in the node pool.', 'count(gke_node_info{%s, %s}) or vector(0)' % [c.clusterExporterSelector, sel]),
            g.stat('Maintenance within 24h', 'Nodes whose host maintenance starts within 24 hours, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next24h{%s}) or vector(0)' % sel),
            g.stat('Maintenance within 7d', 'Nodes whose host maintenance starts within 7 days, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next7d{%s}) or vector(0)' % sel),
            g.stat('In maintenance', 'Nodes in host maintenance now.', 'sum(node_pool:gke_nodes_in_maintenance:count{%s}) or vector(0)' % sel),
            g.stat('Cordoned', 'Nodes marked unschedulable, by anyone.', 'count(\n%s\n) or vector(0)' % inPool(clusterSeries('gke_node_unschedulable'))),
            g.stat('Interruptions (7d)', 'Interruptions of the pool within 7 days, as Cloud Monitoring counts them.', 'sum(node_pool_type_reason:gke_node_pool_interruptions:increase7d{%s}) or vector(0)' % sel),
          ],
        },
        {
          height: 9,
          widths: [14, 10],
          panels: [
            common.upcomingMaintenance(c, 'node_pool="$node_pool"'),
            g.table(
              'Disruption signals',
              'Every disruption signal the nodes of the pool show now: node labels and taints, and what the metadata server reports.',
              [g.target(|||
                group by (%(by)s, signal) (
                %(signals)s
                )
                * on (%(by)s) group_left (node_pool)
                  %(poolNodes)s
              ||| % {
                by: by,
                poolNodes: poolNodes,
                signals: utils.indent(std.join('\nor\n', [
                  signal(clusterSeries('gke_node_maintenance_state'), 'maintenance $1', 'state'),
                  signal(clusterSeries('gke_node_impending_termination'), 'impending-node-termination taint'),
                  signal(clusterSeries('gke_node_perform_maintenance_requested'), 'perform-maintenance requested'),
                  signal(clusterSeries('gke_node_unschedulable'), 'cordoned'),
                  signal(clusterSeries('gke_node_opportunistic_maintenance_triggered'), 'opportunistic maintenance triggered'),
                  signal(clusterSeries('gke_node_opportunistic_maintenance_disabled'), 'opportunistic maintenance disabled'),
                  signal(nodeSeries('gce_instance_maintenance_event', ', event!="NONE"'), 'metadata: $1', 'event'),
                  signal('%s == 1' % nodeSeries('gce_instance_preempted'), 'preempted'),
                ]), 2),
              }, instant=true)],
              [
                ['node', 'Node'],
                ['signal', 'Signal'],
              ],
              sortBy='node',
            ),
          ],
        },
        {
          height: 8,
          panels: [
            g.timeseries(
              'Nodes with maintenance scheduled',
              'Nodes whose host maintenance starts within 24 hours or 7 days, or has started.',
              [
                g.target('sum(node_pool:gke_node_maintenance_scheduled:count_next24h{%s})' % sel, 'within 24h'),
                g.target('sum(node_pool:gke_node_maintenance_scheduled:count_next7d{%s})' % sel, 'within 7d'),
              ],
            ),
            g.timeseries(
              'Nodes in maintenance, by state',
              'Nodes in host maintenance by the state of their active-node-maintenance label.',
              [g.target('count by (state) (\n%s\n)' % inPool(clusterSeries('gke_node_maintenance_state')), '{{state}}')],
            ),
          ],
        },
        g.row('Interruptions'),
        {
          height: 8,
          panels: [
            g.timeseries(
              'Interruptions per hour, by type and reason',
              'Interruptions of the pool in the hour before each point, by interruption type and reason.',
              [g.target('sum by (interruption_type, interruption_reason) (node_pool_type_reason:gke_node_pool_interruptions:increase1h{%s})' % sel, '{{interruption_type}} / {{interruption_reason}}')],
              stacked=true,
            ),
            g.table(
              'Interruptions within 7d',
              'Interruptions of the pool within 7 days by type and reason, most first.',
              [g.target('sum by (interruption_type, interruption_reason) (node_pool_type_reason:gke_node_pool_interruptions:increase7d{%s})' % sel, instant=true)],
              [
                ['interruption_type', 'Type'],
                ['interruption_reason', 'Reason'],
                ['Value', 'Interruptions'],
              ],
              units={ Value: 'short' },
              sortBy='Value',
              desc=true,
            ),
          ],
        },
      ],
    ),
  },
}
