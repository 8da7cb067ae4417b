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
  // first: the window (start, end, and the latest start GKE allows, the deadline for starting it ourselves), what
  // GKE says about it (type, status, reasons), whether it can be rescheduled, and how many workloads have their
  // earliest maintenance then.
  upcomingMaintenance(config, poolMatcher)::
    local by = utils.labelList(config, ['node']);
    local cluster = $.clusterMatcher(config);
    local start = 'node:gke_node_maintenance_start_timestamp_seconds:min{%s, %s}' % [cluster, poolMatcher];
    // window is a per-node timestamp from the node agent or GKE's annotation, for the nodes of start.
    local window(suffix) = |||
      1000 * max by (%(by)s) (
        gce_instance_upcoming_maintenance_%(suffix)s_timestamp_seconds{%(node)s, %(cluster)s}
        or
        gke_node_upcoming_maintenance_%(suffix)s_timestamp_seconds{%(clusterJob)s, %(cluster)s}
      )
      and on (%(by)s) %(start)s
    ||| % { by: by, suffix: suffix, node: config.nodeAgentSelector, clusterJob: config.clusterExporterSelector, cluster: cluster, start: start };
    g.table(
      'Upcoming maintenance',
      'Nodes with host maintenance scheduled, soonest first. Reschedulable maintenance can be started earlier (perform-maintenance) until its latest start; the rest needs a drain before the window starts. "Workloads due" counts the workloads whose earliest maintenance starts with this node\'s window.',
      [
        g.target('1000 * %s' % start, instant=true),
        g.target('%s - time()' % start, instant=true),
        g.target(window('window_end'), instant=true),
        g.target(window('latest_window_start'), instant=true),
        g.target(|||
          group by (%(by)s, type, status, reasons) (
            gce_instance_upcoming_maintenance_info{%(node)s, %(cluster)s}
            or
            gke_node_upcoming_maintenance_info{%(clusterJob)s, %(cluster)s}
          )
          * on (%(by)s) group_left (can_reschedule)
            node:gke_node_maintenance_can_reschedule:info{%(cluster)s}
          or on (%(by)s)
          node:gke_node_maintenance_can_reschedule:info{%(cluster)s}
        ||| % { by: by, node: config.nodeAgentSelector, clusterJob: config.clusterExporterSelector, cluster: cluster }, instant=true),
        g.target(|||
          count_values by (%(by)s) ("start", %(start)s)
          * on (%(cluster)s, start) group_left ()
            count_values by (%(cluster)s) ("start", gke_workload_next_maintenance_timestamp_seconds{%(clusterJob)s, %(clusterMatcher)s})
        ||| % { by: by, start: start, cluster: config.clusterLabel, clusterJob: config.clusterExporterSelector, clusterMatcher: cluster }, instant=true),
      ],
      [
        [config.clusterLabel, 'Cluster'],
        ['node', 'Node'],
        ['node_pool', 'Node pool'],
        ['accelerator', 'GPU'],
        ['tpu_accelerator', 'TPU'],
        ['tpu_topology', 'TPU topology'],
        ['zone', 'Zone'],
        ['Value #A', 'Window start'],
        ['Value #B', 'Starts in'],
        ['Value #C', 'Window end'],
        ['Value #D', 'Latest start'],
        ['type', 'Type'],
        ['status', 'Status'],
        ['reasons', 'Reasons'],
        ['can_reschedule', 'Reschedulable'],
        ['Value #F', 'Workloads due'],
      ],
      units={ 'Value #A': 'dateTimeAsIso', 'Value #B': 's', 'Value #C': 'dateTimeAsIso', 'Value #D': 'dateTimeAsIso', 'Value #F': 'short' },
      sortBy='Value #A',
    ),
}
