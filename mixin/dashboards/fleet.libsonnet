// Fleet overview: what maintenance is coming and how much capacity it puts at risk, what is in maintenance now,
// which workloads it concerns and whether they are ready, how often pools are interrupted, and whether the exporter
// itself sees everything.
local g = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local cluster = common.clusterMatcher(c),
    local sel = '%s, node_pool=~"$node_pool"' % cluster,
    local byPool = utils.labelList(c, ['node_pool']),
    local interruptions(window, extra='') = 'node_pool_type_reason:gke_node_pool_interruptions:increase%s{%s%s}' % [window, sel, extra],
    local nodes = 'gke_node_info{%s, %s}' % [c.clusterExporterSelector, sel],
    local ns = c.workloadNamespaceLabel,
    local workload(metric) = '%s{%s, %s}' % [metric, c.clusterExporterSelector, cluster],
    // share is the part of each pool's nodes whose maintenance starts within seconds.
    local share(seconds) = |||
      count by (%(by)s) (node:gke_node_maintenance_start_timestamp_seconds:min{%(sel)s} < time() + %(seconds)d)
      / on (%(by)s)
      count by (%(by)s) (%(nodes)s)
    ||| % { by: byPool, sel: sel, seconds: seconds, nodes: nodes },
    local job(selector) = '%s, %s' % [selector, cluster],

    'gke-disruption-fleet.json': g.dashboard(
      c,
      'fleet',
      'Fleet',
      'Host maintenance and interruptions of GKE nodes across node pools.',
      [common.clusterVariable(c), common.nodePoolVariable(c, multi=true)],
      [
        g.row('Maintenance'),
        {
          height: 4,
          panels: [
            g.stat('Nodes', 'Nodes in the selected node pools.', 'count(%s) or vector(0)' % nodes),
            g.stat('Maintenance within 24h', 'Nodes whose host maintenance starts within 24 hours, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next24h{%s}) or vector(0)' % sel),
            g.stat('Maintenance within 7d', 'Nodes whose host maintenance starts within 7 days, or has started.', 'sum(node_pool:gke_node_maintenance_scheduled:count_next7d{%s}) or vector(0)' % sel),
            g.stat('In maintenance', 'Nodes in host maintenance now.', 'sum(node_pool:gke_nodes_in_maintenance:count{%s}) or vector(0)' % sel),
            g.stat('Interruptions (24h)', 'Interruptions of nodes of the selected pools within 24 hours, as Cloud Monitoring counts them.', 'sum(%s) or vector(0)' % interruptions('1d')),
            g.stat('Preemptions (24h)', 'Spot preemptions within 24 hours.', 'sum(%s) or vector(0)' % interruptions('1d', ', interruption_type="PreemptionEvent"')),
          ],
        },
        { height: 10, panels: [common.upcomingMaintenance(c, 'node_pool=~"$node_pool"')] },
        {
          height: 10,
          panels: [
            g.stateTimeline(
              'Maintenance timeline, by node',
              'Each node with maintenance scheduled, coloured by the time left until its window starts: blue more than a day, yellow within the perform-maintenance lead time, orange within the drain lead time, red started.',
              [g.target('node:gke_node_maintenance_start_timestamp_seconds:min{%s} - time()' % sel, '{{node_pool}} / {{node}}')],
              's',
              [
                [null, 'red'],
                [0, 'orange'],
                [utils.seconds(c.drainLeadTime), 'yellow'],
                [utils.seconds(c.performMaintenanceLeadTime), 'blue'],
              ],
            ),
          ],
        },
        g.row('Capacity at risk'),
        {
          height: 8,
          widths: [10, 14],
          panels: [
            g.table(
              'Capacity at risk, by node pool',
              "Share of each node pool's nodes whose host maintenance starts within 24 hours and within 7 days (or has started), most first.",
              [g.target(share(utils.seconds(c.maintenanceScheduledWindows['24h'])), instant=true), g.target(share(utils.seconds(c.maintenanceScheduledWindows['7d'])), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['node_pool', 'Node pool'],
                ['Value #A', 'Within 24h'],
                ['Value #B', 'Within 7d'],
              ],
              units={ 'Value #A': 'percentunit', 'Value #B': 'percentunit' },
              sortBy='Value #A',
              desc=true,
            ),
            g.timeseries(
              'Share of nodes with maintenance within 24h, by node pool',
              "Share of each node pool's nodes whose host maintenance starts within 24 hours, or has started.",
              [g.target(share(utils.seconds(c.maintenanceScheduledWindows['24h'])), '{{node_pool}}')],
              unit='percentunit',
            ),
          ],
        },
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
        g.row('GPU faults'),
        {
          height: 8,
          widths: [14, 10],
          panels: [
            g.table(
              'GPU faults now',
              'GPU faults of the selected pools, by node and Xid, from the GPU device plugin or dcgm-exporter, earliest first; xidActions decides which repair (GKENodeGPUFailed), warn (GKENodeGPUErrors) or nothing.',
              [g.target('1000 * (%s{%s} and on (%s) %s)' % [promql.gpuFaultSince, cluster, utils.labelList(c, ['node']), nodes], instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['node', 'Node'],
                ['xid', 'Xid'],
                ['Value', 'First seen'],
              ],
              units={ Value: 'dateTimeAsIso' },
              sortBy='Value',
            ),
            g.table(
              'Correlated GPU faults',
              'Topology groups (%s, else node pool) where %d or more nodes got a GPU fault to repair within %s (GKEGPUFaultsCorrelated): automatic repairs are held there.' % [c.gpuFaultsCorrelation.topologyLabel, c.gpuFaultsCorrelation.nodes, c.gpuFaultsCorrelation.window],
              [g.target('topology:gke_node_gpu_xid_repair:correlated{%s}' % cluster, instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                [c.gpuFaultsCorrelation.topologyLabel, 'Topology group'],
                ['node_pool', 'Node pool'],
                ['Value', 'Failed nodes'],
              ],
              units={ Value: 'short' },
              sortBy='Value',
              desc=true,
            ),
          ],
        },
        g.row('Workloads'),
        {
          height: 9,
          panels: [
            g.table(
              'Workloads by next maintenance',
              'Workloads on GPU, TPU and Spot nodes with host maintenance scheduled on any of their nodes, soonest first.',
              [
                g.target('1000 * %s' % workload('gke_workload_next_maintenance_timestamp_seconds'), instant=true),
                g.target('%s - time()' % workload('gke_workload_next_maintenance_timestamp_seconds'), instant=true),
                g.target('%s and on (%s) %s' % [workload('gke_workload_nodes'), utils.labelList(c, [ns, 'workload_kind', 'workload']), workload('gke_workload_next_maintenance_timestamp_seconds')], instant=true),
                g.target(workload('gke_workload_nodes_in_maintenance'), instant=true),
              ],
              [
                [c.clusterLabel, 'Cluster'],
                [ns, 'Namespace'],
                ['workload_kind', 'Kind'],
                ['workload', 'Workload'],
                ['Value #A', 'Next maintenance'],
                ['Value #B', 'Starts in'],
                ['Value #C', 'Nodes'],
                ['Value #D', 'Nodes in maintenance'],
              ],
              units={ 'Value #A': 'dateTimeAsIso', 'Value #B': 's', 'Value #C': 'short', 'Value #D': 'short' },
              sortBy='Value #A',
            ),
            g.table(
              'Readiness findings',
              'Readiness checks failing now, by workload: pods failing each check (1 for a cluster check). `gke-disruption-exporter audit` prints them in full.',
              [g.target(workload('gke_readiness_findings'), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['check', 'Check'],
                [ns, 'Namespace'],
                ['workload_kind', 'Kind'],
                ['workload', 'Workload'],
                ['Value', 'Pods'],
              ],
              units={ Value: 'short' },
              sortBy='check',
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
              'Interruptions in the hour before each point, by cluster and node pool.',
              [g.target('sum by (cluster_name, node_pool) (%s)' % interruptions('1h'), '{{cluster_name}} / {{node_pool}}')],
              stacked=true,
            ),
            g.timeseries(
              'HW/SW Maintenance interruptions per hour, by node pool',
              'Interruptions with reason "HW/SW Maintenance" in the hour before each point, by cluster and node pool.',
              [g.target('sum by (cluster_name, node_pool) (%s)' % interruptions('1h', ', interruption_reason="HW/SW Maintenance"'), '{{cluster_name}} / {{node_pool}}')],
              stacked=true,
            ),
          ],
        },
        {
          height: 8,
          panels: [
            g.table(
              'Interruptions within 7d',
              'Interruptions within 7 days by cluster, node pool, type and reason, most first.',
              [g.target(interruptions('7d'), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['cluster_name', 'Counted cluster'],
                ['node_pool', 'Node pool'],
                ['interruption_type', 'Type'],
                ['interruption_reason', 'Reason'],
                ['Value', 'Interruptions'],
              ],
              units={ Value: 'short' },
              sortBy='Value',
              desc=true,
            ),
            g.table(
              'Nodes interrupted most within 7d',
              'The nodes with the most interruptions within 7 days, of any node pool (nodes replaced since keep their counts).',
              [g.target(
                'topk(20, round(sum by (%s) (increase(gke_node_interruptions_total{%s, %s}[7d]))))' % [
                  utils.labelList(c, promql.interruptionClusterLabels + ['node', 'interruption_type', 'interruption_reason']),
                  c.clusterExporterSelector,
                  cluster,
                ],
                instant=true,
              )],
              [
                [c.clusterLabel, 'Cluster'],
                ['cluster_name', 'Counted cluster'],
                ['node', 'Node'],
                ['interruption_type', 'Type'],
                ['interruption_reason', 'Reason'],
                ['Value', 'Interruptions'],
              ],
              units={ Value: 'short' },
              sortBy='Value',
              desc=true,
            ),
            g.table(
              'Hosts failing most within %s' % c.hostFailuresWindow,
              'The physical hosts (gce-topology-host) with the most failures within %s: interruptions of the nodes that ran there and maintenances announced for failed hardware. GKEHostRepeatedFailures fires from %d.' % [c.hostFailuresWindow, c.hostFailuresThreshold],
              [g.target('topk(20, host:gke_node_failures:count{%s})' % cluster, instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['host', 'Host'],
                ['Value', 'Failures'],
              ],
              units={ Value: 'short' },
              sortBy='Value',
              desc=true,
            ),
          ],
        },
        g.row('Upgrades and planned ends'),
        {
          height: 4,
          panels: [
            g.stat('Upgrades in progress', 'Node pool upgrade operations GKE is running now.', 'count(gke_node_pool_upgrade_in_progress{%s}) or vector(0)' % job(c.clusterExporterSelector)),
            g.stat('Pools behind a target version', 'Node pools with a newer version GKE would upgrade them to.', 'count(gke_node_pool_upgrade_target_version_info{%s, %s}) or vector(0)' % [c.clusterExporterSelector, sel]),
            g.stat('Next maintenance window', "When the cluster's next GKE maintenance window opens: auto-upgrades run only inside it.", 'min(gke_cluster_maintenance_window_next_start_timestamp_seconds{%s}) * 1000' % job(c.clusterExporterSelector), unit='dateTimeFromNow'),
            g.stat('Exclusions active', 'Maintenance exclusions in force (no upgrades, no minor upgrades, …).', 'count(gke_cluster_maintenance_exclusion_end_timestamp_seconds{%s} > time()) or vector(0)' % job(c.clusterExporterSelector)),
            g.stat('Nodes GKE works on', 'Nodes GKE is upgrading, repairing or draining itself (operation.gke.io/type, gke-current-operation).', 'count(group by (%s) (gke_node_gke_operation{%s})) or vector(0)' % [utils.labelList(c, ['node']), job(c.clusterExporterSelector)]),
            g.stat('Planned VM ends within 24h', 'Nodes whose maximum run duration (flex-start, queued provisioning) ends within 24 hours.', 'count(gke_node_termination_timestamp_seconds{%s} < time() + 86400) or vector(0)' % job(c.clusterExporterSelector)),
          ],
        },
        {
          height: 8,
          panels: [
            g.table(
              'Next disruptions by node pool',
              "Each pool's next planned disruption of every kind: host maintenance (earliest node), GKE's auto-upgrade start, and the earliest planned end of a VM. Two close together disrupt the pool twice where once would do.",
              [
                g.target('min by (%s) (node:gke_node_maintenance_start_timestamp_seconds:min{%s}) * 1000' % [byPool, sel], instant=true),
                g.target('min by (%s) (gke_node_pool_auto_upgrade_start_timestamp_seconds{%s, %s}) * 1000' % [byPool, c.clusterExporterSelector, sel], instant=true),
                g.target(|||
                  min by (%(by)s) (
                    gke_node_termination_timestamp_seconds{%(job)s}
                    * on (%(node)s) group_left (node_pool) group by (%(node)s, node_pool) (%(nodes)s)
                  ) * 1000
                ||| % { by: byPool, job: job(c.clusterExporterSelector), node: utils.labelList(c, ['node']), nodes: nodes }, instant=true),
              ],
              [
                [c.clusterLabel, 'Cluster'],
                ['node_pool', 'Node pool'],
                ['Value #A', 'Host maintenance'],
                ['Value #B', 'Auto-upgrade'],
                ['Value #C', 'VM end'],
              ],
              units={ 'Value #A': 'dateTimeAsIso', 'Value #B': 'dateTimeAsIso', 'Value #C': 'dateTimeAsIso' },
              sortBy='Value #A',
            ),
            g.table(
              'Node pool versions and upgrades',
              "Each pool's version, the version GKE would upgrade it to, and the progress of an upgrade under way.",
              [
                g.target('group by (%s, version) (gke_node_pool_version_info{%s, %s})' % [byPool, c.clusterExporterSelector, sel], instant=true),
                g.target('group by (%s, target) (label_replace(gke_node_pool_upgrade_target_version_info{%s, %s}, "target", "$1", "version", "(.*)"))' % [byPool, c.clusterExporterSelector, sel], instant=true),
                g.target('max by (%s) (gke_node_pool_upgrade_nodes{%s, %s, state="done"})' % [byPool, c.clusterExporterSelector, sel], instant=true),
                g.target('max by (%s) (gke_node_pool_upgrade_nodes{%s, %s, state="total"})' % [byPool, c.clusterExporterSelector, sel], instant=true),
              ],
              [
                [c.clusterLabel, 'Cluster'],
                ['node_pool', 'Node pool'],
                ['version', 'Version'],
                ['target', 'Target version'],
                ['Value #C', 'Upgraded'],
                ['Value #D', 'Of'],
              ],
              units={ 'Value #C': 'short', 'Value #D': 'short' },
            ),
          ],
        },
        g.row('Exporter health'),
        {
          height: 4,
          panels: [
            g.stat('Targets down', 'Scrape targets of the three commands that failed their last scrape.', 'count(up{%s} == 0 or up{%s} == 0 or up{%s} == 0) or vector(0)' % [job(c.clusterExporterSelector), job(c.nodeAgentSelector), job(c.actionsSelector)]),
            g.stat('Collectors failing', 'Collectors (nodes, workloads, Cloud Monitoring, metadata) whose last run failed.', 'count(gke_disruption_collector_success{%s} == 0 or gke_disruption_collector_success{%s} == 0) or vector(0)' % [job(c.clusterExporterSelector), job(c.nodeAgentSelector)]),
            g.stat('Cloud Monitoring age', 'Time since the cluster exporter last read Cloud Monitoring successfully.', 'time() - max(gke_disruption_cloudmonitoring_last_success_timestamp_seconds{%s})' % job(c.clusterExporterSelector), unit='s'),
            g.stat('Metadata servers unreachable', 'Node agents whose last successful metadata read is older than %s.' % c.metadataStaleThreshold, 'count(time() - max by (%s, instance) (gke_disruption_metadata_last_success_timestamp_seconds{%s}) > %d) or vector(0)' % [utils.labelList(c, ['node']), job(c.nodeAgentSelector), utils.seconds(c.metadataStaleThreshold)]),
            g.stat('Nodes without agent', 'GPU, TPU and Spot nodes no node agent reports on (GKENodeAgentMissing firing).', 'count(ALERTS{alertname="GKENodeAgentMissing", alertstate="firing", problem="no_agent", %s}) or vector(0)' % cluster),
            g.stat('Upcoming maintenance unsupported', 'Node agents whose metadata server answers 404 for instance/upcoming-maintenance.', 'count(gke_disruption_metadata_path_supported{%s, path="instance/upcoming-maintenance"} == 0) or vector(0)' % job(c.nodeAgentSelector)),
          ],
        },
        {
          height: 8,
          panels: [
            g.timeseries(
              'Watch errors',
              "Errors of the cluster exporter's Kubernetes watches per second, by resource.",
              [g.target('sum by (resource) (rate(gke_disruption_watch_errors_total{%s}[$__rate_interval]))' % job(c.clusterExporterSelector), '{{resource}}')],
              unit='ops',
            ),
            g.timeseries(
              'Cloud Monitoring requests',
              'Cloud Monitoring queries per second by metric and result code.',
              [g.target('sum by (metric, code) (rate(gke_disruption_cloudmonitoring_requests_total{%s}[$__rate_interval]))' % job(c.clusterExporterSelector), '{{metric}} {{code}}')],
              unit='reqps',
            ),
            g.timeseries(
              'Metadata requests',
              'Metadata server requests of all node agents per second by path and result code.',
              [g.target('sum by (path, code) (rate(gke_disruption_metadata_requests_total{%s}[$__rate_interval]))' % job(c.nodeAgentSelector), '{{path}} {{code}}')],
              unit='reqps',
            ),
            g.timeseries(
              'Collector duration',
              'How long each collector took, slowest target.',
              [g.target('max by (job, collector) (gke_disruption_collector_duration_seconds{%s} or gke_disruption_collector_duration_seconds{%s})' % [job(c.clusterExporterSelector), job(c.nodeAgentSelector)], '{{job}} {{collector}}')],
              unit='s',
            ),
          ],
        },
      ],
    ),
  },
}
