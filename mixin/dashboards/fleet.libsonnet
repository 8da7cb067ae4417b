// Fleet overview: what maintenance is coming, what is in maintenance now, and how often pools are interrupted.
local g = import '../lib/grafana.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local sel = '%s, node_pool=~"$node_pool"' % common.clusterMatcher(c),
    local interruptions(window, extra='') = 'node_pool_type_reason:gke_node_pool_interruptions:increase%s{%s%s}' % [window, sel, extra],

    'gke-disruption-fleet.json': g.dashboard(
      c,
      'gke-disruption-fleet',
      'GKE disruption / Fleet',
      'Host maintenance and interruptions of GKE nodes across node pools.',
      [common.clusterVariable(c), common.nodePoolVariable(c, multi=true)],
      [
        g.row('Maintenance'),
        {
          height: 4,
          panels: [
            g.stat('Nodes', 'Nodes in the selected node pools.', 'count(gke_node_info{%s, %s}) or vector(0)' % [c.clusterExporterSelector, sel]),
            g.stat('Maintenance within 24h', 'Nodes whose host maintenance starts within 24 hours, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next24h{%s}) or vector(0)' % sel),
            g.stat('Maintenance within 7d', 'Nodes whose host maintenance starts within 7 days, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next7d{%s}) or vector(0)' % sel),
            g.stat('In maintenance', 'Nodes in host maintenance now.', 'sum(node_pool:gke_nodes_in_maintenance:count{%s}) or vector(0)' % sel),
            g.stat('Interruptions (24h)', 'Interruptions of nodes of the selected pools within 24 hours, as Cloud Monitoring counts them.', 'sum(%s) or vector(0)' % interruptions('1d')),
            g.stat('Preemptions (24h)', 'Spot preemptions within 24 hours.', 'sum(%s) or vector(0)' % interruptions('1d', ', interruption_type="PreemptionEvent"')),
          ],
        },
        { height: 10, panels: [common.upcomingMaintenance(c, 'node_pool=~"$node_pool"')] },
        {
          height: 8,
          panels: [
            g.timeseries(
              'Nodes with maintenance within 7d, by node pool',
              'Nodes whose host maintenance starts within 7 days, or has started.',
              [g.target('sum by (node_pool) (node_pool:gke_node_maintenance_scheduled:count_next7d{%s})' % sel, '{{node_pool}}')],
            ),
            g.timeseries(
              'Nodes in maintenance, by node pool',
              'Nodes in host maintenance (active-node-maintenance label set).',
              [g.target('sum by (node_pool) (node_pool:gke_nodes_in_maintenance:count{%s})' % sel, '{{node_pool}}')],
            ),
          ],
        },
        g.row('Interruptions'),
        {
          height: 8,
          panels: [
            g.timeseries(
              'Interruptions per hour, by type and reason',
              'Interruptions of nodes of the selected pools in the hour before each point, by interruption type and reason.',
              [g.target('sum by (interruption_type, interruption_reason) (%s)' % interruptions('1h'), '{{interruption_type}} / {{interruption_reason}}')],
              stacked=true,
            ),
            g.timeseries(
              'Interruptions per hour, by node pool',
              'Interruptions in the hour before each point, by node pool.',
              [g.target('sum by (node_pool) (%s)' % interruptions('1h'), '{{node_pool}}')],
              stacked=true,
            ),
            g.timeseries(
              'HW/SW Maintenance interruptions per hour, by node pool',
              'Interruptions with reason "HW/SW Maintenance" in the hour before each point, by node pool.',
              [g.target('sum by (node_pool) (%s)' % interruptions('1h', ', interruption_reason="HW/SW Maintenance"'), '{{node_pool}}')],
              stacked=true,
            ),
          ],
        },
        {
          height: 8,
          panels: [
            g.table(
              'Interruptions within 7d',
              'Interruptions within 7 days by node pool, type and reason, most first.',
              [g.target('round(%s)' % interruptions('7d'), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['node_pool', 'Node pool'],
                ['interruption_type', 'Type'],
                ['interruption_reason', 'Reason'],
                ['Value', 'Interruptions'],
              ],
              sortBy='Value',
              desc=true,
            ),
            g.table(
              'Nodes interrupted most within 7d',
              'The nodes with the most interruptions within 7 days, of any node pool (nodes replaced since keep their counts).',
              [g.target(
                'topk(20, round(sum by (%s) (increase(gke_node_interruptions_total{%s, %s}[7d]))))' % [
                  utils.labelList(c, ['node', 'interruption_type', 'interruption_reason']),
                  c.clusterExporterSelector,
                  common.clusterMatcher(c),
                ],
                instant=true,
              )],
              [
                [c.clusterLabel, 'Cluster'],
                ['node', 'Node'],
                ['interruption_type', 'Type'],
                ['interruption_reason', 'Reason'],
                ['Value', 'Interruptions'],
              ],
              sortBy='Value',
              desc=true,
            ),
          ],
        },
      ],
    ),
  },
}
