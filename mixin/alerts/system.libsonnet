// Alerts on the exporter and the actions service themselves, and on what they cannot see.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

// How a description names a scrape target: its job, and its instance when there is one.
local targetRef = '{{ $labels.job }}{{ with $labels.instance }} at {{ . }}{{ end }}';
local upcomingPath = 'instance/upcoming-maintenance';

{
  prometheusAlerts+:: {
    local c = $._config,
    local on = utils.clusterRef(c),
    local byNode = utils.labelList(c, ['node']),
    local alert(name, rule) = utils.alertRule(c, name, rule),
    // Holds the node agent's alerts back while its node is in maintenance, and outlasts the memories they read.
    local inMaintenance = promql.outlasting(c, 'gke_node_maintenance_state{%s}' % c.clusterExporterSelector),
    local requiredUp = std.join(' or ', ['up{%s}' % s for s in c.requiredJobSelectors]),
    local problem(expr, value) = 'label_replace(\n%s,\n  "problem", "%s", "", ""\n)' % [utils.indent(expr, 2), value],

    groups+: [
      {
        name: 'gke-disruption-exporter',
        rules: [
          alert('GKEDisruptionExporterDown', {
            // A node agent is unreachable while its node is in maintenance. Where its scrape configuration gives
            // the target a node label, the unless below leaves those out; without the label it matches nothing.
            expr: std.join('\nor\n', [
              'up{%s} == 0' % c.clusterExporterSelector,
              '(\n  up{%s} == 0\n  unless on (%s) %s\n)' % [c.nodeAgentSelector, byNode, inMaintenance],
              'up{%s} == 0' % c.actionsSelector,
            ] + [
              // Without any cluster's memory of the job: a job never scraped anywhere (a job some cluster had is
              // named per cluster below).
              'absent(up{%s})\n  unless on () %s{%s}' % [s, promql.targetsLastSeen, s]
              for s in c.requiredJobSelectors
            ] + [
              // Per cluster where several share one Prometheus: the job had a target there within clusterMemory
              // (recorded per cluster and job) and has none now.
              'group by (%s, job) (%s)\n  unless on (%s, job) (%s)' % [c.clusterLabel, promql.targetsLastSeen, c.clusterLabel, requiredUp],
            ]) + '\n',
            annotations: {
              summary: 'A gke-disruption-exporter target is down or missing.',
              description: 'Prometheus has had no successful scrape of %s%s for %s. Disruption signals from it are missing: alerts, dashboards and actions that depend on them are blind.' % [targetRef, on, c.alerts.GKEDisruptionExporterDown['for']],
            },
          }),
          alert('GKEDisruptionCollectorFailing', {
            // Only while the instance is still a target: not for the old pod of a rollout once it is gone.
            // The node agents' failures are read from their sparse recording (one sample per failing agent).
            expr: std.join('\nor\n', [
              '(\n  %s == 0\n  and on (%s, instance) up{%s}\n)' % [promql.bridged(c, 'gke_disruption_collector_success{%s}' % c.clusterExporterSelector), c.clusterLabel, c.clusterExporterSelector],
              '(\n  %s\n  unless on (%s, instance, collector) gke_disruption_collector_success{%s} == 1\n  and on (%s, instance) up{%s}\n)' % [
                promql.bridged(c, promql.agentCollectorFailing),
                c.clusterLabel,
                c.nodeAgentSelector,
                c.clusterLabel,
                c.nodeAgentSelector,
              ],
            ]) + '\n',
            annotations: {
              summary: 'A gke-disruption-exporter collector is failing.',
              description: 'The {{ $labels.collector }} collector of %s%s has failed for %s: its series are missing or out of date.' % [targetRef, on, c.alerts.GKEDisruptionCollectorFailing['for']],
            },
          }),
          alert('GKEDisruptionActionFailed', {
            // The actions service exposes every action and result at zero from its start.
            expr: |||
              round(
                sum by (%(by)s) (
                  increase(gke_disruption_actions_total{%(selector)s, result="failed"}[%(window)s])
                )
              ) > 0
            ||| % { by: utils.labelList(c, ['action']), selector: c.actionsSelector, window: c.actionFailedWindow },
            annotations: {
              summary: 'The actions service failed to act on a node.',
              description: '{{ printf "%%.0f" $value }} {{ $labels.action }} action(s) failed%s within %s. The affected nodes were not prepared for their maintenance.' % [on, c.actionFailedWindow],
            },
          }),
          alert('GKEDisruptionCloudMonitoringStale', {
            // An exporter that has never succeeded exposes 0: it is stale once it has been so for the threshold
            // since it started, not at once.
            expr: std.join('\nor\n', [
              |||
                time() - max by (%(by)s) (%(success)s > 0) > %(stale)d
              ||| % {
                by: utils.labelList(c, ['job']),
                success: promql.bridged(c, 'gke_disruption_cloudmonitoring_last_success_timestamp_seconds{%s}' % c.clusterExporterSelector),
                stale: utils.seconds(c.cloudMonitoringStaleThreshold),
              },
              problem(|||
                max by (%(by)s) (
                %(held)s
                )
                unless on (%(by)s) %(success)s > 0
              ||| % {
                by: utils.labelList(c, ['job']),
                held: utils.indent(promql.heldFor(c, 'gke_disruption_cloudmonitoring_last_success_timestamp_seconds{%s} == 0' % c.clusterExporterSelector, c.cloudMonitoringStaleThreshold), 2),
                success: promql.bridged(c, 'gke_disruption_cloudmonitoring_last_success_timestamp_seconds{%s}' % c.clusterExporterSelector),
              }, 'never_succeeded'),
            ]) + '\n',
            annotations: {
              summary: 'Interruption counts from Cloud Monitoring are out of date.',
              description: 'The cluster exporter%s {{ if eq $labels.problem "never_succeeded" }}has not read Cloud Monitoring once in the %s since it started{{ else }}last read Cloud Monitoring {{ $value | humanizeDuration }} ago{{ end }}: interruption counts and GKENodePoolInterruptionsHigh are behind. Check its credentials (monitoring.viewer) and gke_disruption_cloudmonitoring_requests_total by code.' % [on, c.cloudMonitoringStaleThreshold],
            },
          }),
          alert('GKEDisruptionWatchFailing', {
            expr: |||
              round(
                sum by (%(by)s) (
                  increase(gke_disruption_watch_errors_total{%(selector)s}[%(window)s])
                )
              ) > %(threshold)d
            ||| % {
              by: utils.labelList(c, ['resource']),
              selector: c.clusterExporterSelector,
              window: c.watchErrorsWindow,
              threshold: c.watchErrorsThreshold,
            },
            annotations: {
              summary: 'The cluster exporter cannot keep its watch of the Kubernetes API.',
              description: 'The watch of {{ $labels.resource }}%s failed {{ printf "%%.0f" $value }} times within %s: node labels, taints and annotations may be out of date. Check the API server and the exporter\'s RBAC.' % [on, c.watchErrorsWindow],
            },
          }),
          alert('GKEDisruptionActionsStalled', {
            expr: std.join('\nor\n', [
              problem(promql.heldFor(c, 'max by (%s, action) (%s)\nunless on (%s)\n%s{%s}' % [
                byNode,
                // Whatever the state: work that holds a node (in progress, or done or failed keeping our cordon)
                // has an expected end, and none lasts this long; but a drain for a GPU fault keeps its cordon
                // while the fault is there, until a person repairs the host (GKENodeGPUFailed pages for it).
                promql.bridged(c, 'gke_disruption_action_state{%s}' % c.actionsSelector),
                byNode,
                promql.gpuFaultSince,
                promql.xidMatcher(c, 'repair'),
              ], c.actionsCordonedThreshold), 'cordoned'),
              problem(promql.heldFor(c, 'max by (%s) (%s) > 0' % [
                utils.labelList(c, ['action', 'pool', 'reason']),
                // Opportunistic maintenance is best effort: an idle node waiting for a window is no stall.
                promql.bridged(c, 'gke_disruption_actions_waiting{%s, action!="opportunistic-maintenance"}' % c.actionsSelector),
              ], c.actionsWaitingThreshold), 'waiting'),
              problem('max by (%s) (max_over_time(gke_disruption_actions_leader{%s}[%s])) == 0' % [
                c.clusterLabel,
                c.actionsSelector,
                c.actionsNoLeaderFor,
              ], 'no_leader'),
            ]) + '\n',
            annotations: {
              summary: 'The actions service is not making progress.',
              description: '{{ if eq $labels.problem "cordoned" }}The actions service%(on)s has held node {{ $labels.node }} for its {{ $labels.action }} (in progress, or cordoned after it) for more than %(cordoned)s: GKE has not started or finished the maintenance, or the node is not Ready.{{ else if eq $labels.problem "waiting" }}{{ $labels.action }} work in pool {{ $labels.pool }}%(on)s has waited ({{ $labels.reason }}) for more than %(waiting)s.{{ else }}No replica of the actions service%(on)s has led for %(leader)s: alerts are not acted on.{{ end }}' % {
                on: on,
                cordoned: c.actionsCordonedThreshold,
                waiting: c.actionsWaitingThreshold,
                leader: c.actionsNoLeaderFor,
              },
            },
          }),
        ],
      },
      {
        // What the node agents cannot see. A group of its own: each of these alerts reads every agent's series.
        name: 'gke-disruption-node-agents',
        rules: [
          alert('GKENodeAgentMissing', {
            // A GPU, TPU or Spot node that no node agent reports on (recorded, so that a gap of the cluster
            // exporter does not restart the `for`; read against the agents now, so that an agent that is back
            // ends it whichever group Prometheus evaluates first), unless it is in maintenance and stopped; or an
            // agent, still a target, whose metadata server has not answered for metadataStaleThreshold.
            expr: std.join('\nor\n', [
              problem(|||
                %(missing)s
                unless on (%(by)s) %(agent)s
                unless on (%(by)s) %(inMaintenance)s
              ||| % {
                missing: promql.nodeAgentMissingSince,
                by: byNode,
                agent: promql.agentCurrent(c),
                inMaintenance: inMaintenance,
              }, 'no_agent'),
              // The current last success, else (the agent's series missing in a gap) the recorded stale one.
              problem(|||
                time() - (
                  max by (%(by)s, instance) (%(success)s)
                  or on (%(by)s, instance)
                  max by (%(by)s, instance) (%(stale)s)
                ) > %(threshold)d
                and on (%(cluster)s, instance) up{%(agent)s}
              ||| % {
                by: byNode,
                cluster: c.clusterLabel,
                stale: promql.bridged(c, promql.metadataStale),
                success: 'gke_disruption_metadata_last_success_timestamp_seconds{%s}' % c.nodeAgentSelector,
                threshold: utils.seconds(c.metadataStaleThreshold),
                agent: c.nodeAgentSelector,
              }, 'metadata_unreachable'),
            ]) + '\n',
            annotations: {
              summary: 'A GPU, TPU or Spot node has no working node agent.',
              description: '{{ if eq $labels.problem "no_agent" }}No node agent reports on node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}%(on)s{{ else }}The node agent {{ $labels.instance }}{{ with $labels.node }} on node {{ . }}{{ end }}%(on)s has not reached its metadata server for {{ $value | humanizeDuration }}{{ end }}: its maintenance notices, Spot preemption and upcoming-maintenance windows are not seen, and a maintenance that could be rescheduled may be drained instead.' % { on: on },
            },
          }),
        ],
      },
      {
        // What a node agent's metadata server does not serve. A group of its own: it reads every agent's series.
        name: 'gke-disruption-metadata',
        rules: [
          alert('GKEDisruptionMetadataPathUnsupported', {
            // Without instance/upcoming-maintenance nobody tells whether a maintenance can be rescheduled: every
            // maintenance of the node is drained rather than started at a time of our choosing.
            // GPU/TPU nodes as the cluster exporter shows them, else as remembered through its gap; only while
            // the agent is still a target, not for the old pod of a rollout.
            expr: |||
              max by (%(by)s, instance) (%(unsupported)s)
              unless on (%(by)s, instance) %(supported)s == 1
              and on (%(by)s)
              (
              %(nodes)s
                or on (%(by)s)
                (
                  %(remembered)s{accelerator!=""}
                  or
                  %(remembered)s{tpu_accelerator!=""}
                )
                unless on (%(cluster)s) %(exporterCurrent)s
              )
              and on (%(cluster)s, instance) up{%(agent)s}
            ||| % {
              by: byNode,
              cluster: c.clusterLabel,
              unsupported: promql.bridged(c, promql.upcomingUnsupported),
              supported: 'gke_disruption_metadata_path_supported{%s, path="%s"}' % [c.nodeAgentSelector, upcomingPath],
              nodes: utils.indent(promql.acceleratorNodes(c), 4),
              remembered: promql.nodeInfoLastSeen,
              exporterCurrent: promql.exporterCurrent(c),
              agent: c.nodeAgentSelector,
            },
            annotations: {
              summary: 'The metadata server of a GPU/TPU node does not serve upcoming maintenance.',
              description: 'The metadata server of node {{ $labels.node }}%s answers 404 for %s (node agent {{ $labels.instance }}). Unless GKE annotates the node, its maintenance windows are known only from the scheduled-maintenance-time label and their reschedulability not at all, so they are drained rather than rescheduled.' % [on, upcomingPath],
            },
          }),
        ],
      },
    ],
  },
}
