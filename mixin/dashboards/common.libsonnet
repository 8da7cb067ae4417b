// Variables and panels shared by the dashboards.
local g = import '../lib/grafana.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  // clusterMatcher selects the clusters chosen in the cluster variable.
  clusterMatcher(config):: '%s=~"$cluster"' % config.clusterLabel,

  clusterVariable(config)::
    g.queryVariable(
      'cluster',
      'Cluster',
      'label_values(gke_node_info{%s}, %s)' % [config.clusterExporterSelector, config.clusterLabel],
      hide=!config.showMultiCluster,
      includeAll=true,
    ),

  nodePoolVariable(config, multi)::
    g.queryVariable(
      'node_pool',
      'Node pool',
      'label_values(gke_node_info{%s, %s}, node_pool)' % [config.clusterExporterSelector, $.clusterMatcher(config)],
      multi=multi,
      includeAll=multi,
    ),

  // upcomingMaintenance lists the nodes of the pools matched by poolMatcher with maintenance scheduled, soonest
  // first, with whether GKE lets it be started earlier.
  upcomingMaintenance(config, poolMatcher)::
    local by = utils.labelList(config, ['node']);
    local start = 'node:gke_node_maintenance_start_timestamp_seconds:min{%s, %s}' % [$.clusterMatcher(config), poolMatcher];
    local withReschedule = |||
      %(start)s
      * on (%(by)s) group_left (can_reschedule)
        group by (%(by)s, can_reschedule) (gce_instance_upcoming_maintenance_info{%(node)s, %(cluster)s})
      or on (%(by)s)
      %(start)s
    ||| % { start: start, by: by, node: config.nodeAgentSelector, cluster: $.clusterMatcher(config) };
    g.table(
      'Upcoming maintenance',
      'Nodes with host maintenance scheduled, soonest first. Reschedulable maintenance can be started earlier (perform-maintenance); the rest needs a drain before the window starts.',
      [
        g.target('1000 * (\n%s\n)' % utils.indent(withReschedule, 2), instant=true),
        g.target('(\n%s\n) - time()' % utils.indent(withReschedule, 2), instant=true),
      ],
      [
        [config.clusterLabel, 'Cluster'],
        ['node', 'Node'],
        ['node_pool', 'Node pool'],
        ['accelerator', 'GPU'],
        ['tpu_accelerator', 'TPU'],
        ['tpu_topology', 'TPU topology'],
        ['zone', 'Zone'],
        ['can_reschedule', 'Reschedulable'],
        ['Value #A', 'Window start'],
        ['Value #B', 'Starts in'],
      ],
      units={ 'Value #A': 'dateTimeAsIso', 'Value #B': 's' },
      sortBy='Value #A',
    ),
}
