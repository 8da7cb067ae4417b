// PromQL fragments shared by the recording rules, alerts and dashboards. Each function takes the mixin's _config.
local utils = import 'utils.libsonnet';

{
  // The labels gke_node_info gives a node beyond its name: where it runs and what it is.
  nodeInfoLabels:: ['node_pool', 'zone', 'machine_type', 'accelerator', 'tpu_accelerator', 'tpu_topology', 'provisioning'],
  // Where gke_node_info places a node in its reservation (cloud.google.com/gce-topology-block, -subblock): remembered
  // with the other labels, and added only by the alerts that group nodes by it.
  nodeTopologyLabels:: ['block', 'subblock'],

  // The labels that tell apart the clusters Cloud Monitoring's interruption counts are about. One exporter can
  // list every cluster of a project, so the cluster label (its own cluster) does not.
  interruptionClusterLabels:: ['cluster_project_id', 'cluster_location', 'cluster_name'],

  // bridged reads selector over the last signalGapTolerance, so that a failed scrape or a restarting target
  // leaves no hole: the series keeps its last value until the gap is longer than that. Alerts use it for what
  // holds them back (outlasting) and for the product's own series; a signal that makes an alert fire is
  // remembered, which ends with the event.
  bridged(config, selector):: 'last_over_time(%s[%s])' % [selector, config.signalGapTolerance],

  // exporterCurrent is, per cluster, a cluster exporter whose view of the nodes is current (its node list synced
  // and its watch fresh): a node signal it does not show is gone, not in a gap.
  exporterCurrent(config)::
    'max by (%s) (gke_disruption_collector_success{%s, collector="nodes"}) == 1' % [config.clusterLabel, config.clusterExporterSelector],

  // agentCurrent is the nodes whose node agent answered its last scrape: an agent always exposes
  // gce_instance_preempted. Use it only on the right of and/unless, which need no aggregation of every agent.
  agentCurrent(config):: 'gce_instance_preempted{%s}' % config.nodeAgentSelector,

  // remembered is selector's current series, else its last value within signalGapTolerance while its source is in
  // a gap: a memory that ends with the event, since a source that is current again and no longer shows the series
  // ends it at once. source is 'cluster' (the cluster exporter's node series) or 'agent' (a node agent's).
  remembered(config, selector, source)::
    '(\n  %s + 0\n  or\n  %s\n)' % [selector, $.inGap(config, selector, source)],

  // inGap is selector bridged over signalGapTolerance, only where its source (cluster or agent) is not current.
  inGap(config, selector, source)::
    local current =
      if source == 'cluster' then 'on (%s) %s' % [config.clusterLabel, $.exporterCurrent(config)]
      else if source == 'agent' then 'on (%s) %s' % [utils.labelList(config, ['node']), $.agentCurrent(config)]
      else error 'the source of %s must be cluster or agent, not %s' % [selector, source];
    '%s\n  unless %s' % [$.bridged(config, selector), current],

  // outlasting is selector bridged for signalGapTolerance plus two evaluationIntervals: the signals that hold an
  // action alert back. An alert may read another group's recorded memory up to an interval (and that group's
  // evaluation) late, so what holds it back must end later than any memory that makes it fire, in any order of
  // groups.
  outlasting(config, selector)::
    'last_over_time(%s[%ds])' % [selector, utils.seconds(config.signalGapTolerance) + 2 * utils.seconds(config.evaluationInterval)],

  // nodeInfoLastSeen is the recording rule that remembers the gke_node_info labels of the nodes with something to
  // say (nodeSignals), for nodeInfoMemory after they last had: its value is when the node was last seen. It reads
  // its own previous value rather than nodeInfoMemory of gke_node_info, so a cycle reads two samples per such node
  // however long the memory, and a quiet node costs no recorded series.
  nodeInfoLastSeen:: 'node:gke_node_info:last_seen',

  // nodeSignals is the nodes that have something to say: maintenance, a report, a GPU fault, GKE's own work, a
  // planned end, a notice from the node agent, the maintenance start recorded through a gap. Every such series is
  // sparse.
  nodeSignals(config)::
    |||
      group by (%(by)s) (
        gke_node_scheduled_maintenance_timestamp_seconds{%(cluster)s}
        or
        gke_node_upcoming_maintenance_info{%(cluster)s}
        or
        gke_node_maintenance_state{%(cluster)s}
        or
        gke_node_perform_maintenance_requested{%(cluster)s}
        or
        gke_node_impending_termination{%(cluster)s}
        or
        gke_node_maintenance_window_started{%(cluster)s}
        or
        gke_node_report_and_replace_status{%(cluster)s}
        or
        gke_node_gpu_xid_critical{%(cluster)s}
        or
        gke_node_gke_operation{%(cluster)s}
        or
        gke_node_termination_timestamp_seconds{%(cluster)s}
        or
        %(gpuFault)s
        or
        gce_instance_upcoming_maintenance_info{%(agent)s}
        or
        gce_instance_maintenance_event{%(agent)s, event!="NONE"}
        or
        %(unsupported)s
        or
        %(start)s
      )
    ||| % {
      by: utils.labelList(config, ['node']),
      cluster: config.clusterExporterSelector,
      agent: config.nodeAgentSelector,
      unsupported: $.upcomingUnsupported,
      start: $.maintenanceStart,
      gpuFault: $.gpuFaultSince,
    },

  // nodeInfoOf is the gke_node_info labels of the nodes of expr (a per-node expression), one series of value 1
  // per node: the set operation narrows every node's gke_node_info to the few of expr before anything is
  // aggregated, and topk keeps one where an exporter rollout or a relabelled node briefly shows two.
  nodeInfoOf(config, expr, extra=[])::
    local by = utils.labelList(config, ['node']);
    'topk by (%s) (1,\n  max by (%s, %s) (\n    gke_node_info{%s}\n    and on (%s)\n    (\n%s\n    )\n  )\n)' % [
      by,
      by,
      std.join(', ', $.nodeInfoLabels + extra),
      config.clusterExporterSelector,
      by,
      utils.indent(expr, 6),
    ],

  // nodeInfoRule records nodeInfoLastSeen for the nodes with something to say, the current labels winning over
  // remembered ones.
  nodeInfoRule(config):: {
    local by = utils.labelList(config, ['node']),
    record: $.nodeInfoLastSeen,
    expr: |||
      %(current)s * 0 + time()
      or on (%(by)s)
      %(recorded)s > time() - %(memory)d
    ||| % {
      by: by,
      current: $.nodeInfoOf(config, $.nodeSignals(config), $.nodeTopologyLabels),
      recorded: $.nodeInfoLastSeen,
      memory: utils.seconds(config.nodeInfoMemory),
    },
  },

  // nodeInfoJoin adds the node's pool and accelerator labels (and the topology labels of extra) to expr, a per-node
  // expression keyed by the cluster label and node: the labels the cluster exporter shows now, else those
  // remembered through its gap. The node agent and the cluster exporter are different jobs, so the join is on node,
  // never on instance or job. A node the cluster exporter neither shows nor remembers is left out, unless
  // keepUnknown: then it keeps its series, without the extra labels. nodes, when given, is a cheaper expression
  // with at least expr's nodes (signalsOf its selectors), read in place of expr for the join: expr is then
  // evaluated once.
  nodeInfoJoin(config, expr, extra=[], nodes=null, keepUnknown=false)::
    local on = utils.labelList(config, ['node']);
    local of = if nodes == null then expr else nodes;
    |||
      (
      %(expr)s
      )
      * on (%(on)s) group_left (%(labels)s)
        (
      %(info)s
          or on (%(on)s)
          group without () (%(remembered)s)%(unknown)s
        )
    ||| % {
      expr: utils.indent(expr, 2),
      on: on,
      labels: std.join(', ', $.nodeInfoLabels + extra),
      info: utils.indent($.nodeInfoOf(config, of, extra), 4),
      remembered: $.nodeInfoLastSeen,
      unknown: if keepUnknown then '\n    or on (%s)\n    group by (%s) (\n%s\n    )' % [on, on, utils.indent(of, 6)] else '',
    },

  // withNodeInfo is nodeInfoJoin keeping a node the cluster exporter neither shows nor remembers, without the
  // extra labels.
  withNodeInfo(config, expr, nodes=null, extra=[])::
    $.nodeInfoJoin(config, expr, extra, nodes, keepUnknown=true),

  // signalsOf is the series of selectors within signalGapTolerance, one or more per node: the nodes that a
  // remembered or current value of them can name, without asking whether their source is current (which reads
  // every node).
  signalsOf(config, selectors)::
    '(\n%s\n)' % utils.indent(std.join('\nor\n', [$.bridged(config, s) for s in selectors]), 2),

  // heldFor is true (the value of expr) where expr, a per-series expression, has had a result at every
  // subqueryStep of the last duration: how long a condition has held, from the data, whatever restarted.
  heldFor(config, expr, duration)::
    local steps = std.floor(utils.seconds(duration) / utils.seconds(config.subqueryStep));
    'count_over_time((\n%s\n)[%s:%s]) >= %d' % [utils.indent(expr, 2), duration, config.subqueryStep, std.max(1, steps)],

  // acceleratorNodes is the gke_node_info of the GPU/TPU nodes (and those matching the extra matchers) as the
  // cluster exporter shows them now: every such node, so narrow it with and/unless before aggregating. In
  // parentheses, so that the union stays one operand of whatever and/unless it is put beside.
  acceleratorNodes(config, extra=[])::
    '(\n%s\n)' % utils.indent(std.join('\nor\n', [
      'gke_node_info{%s, %s}' % [config.clusterExporterSelector, m]
      for m in ['accelerator!=""', 'tpu_accelerator!=""'] + extra
    ]), 2),

  // Recorded per node or node agent by the agents rules (rules.libsonnet): when a node agent last reported on each
  // node, and the few agents with something wrong. Alerts bridge these sparse series rather than the signals of
  // every node agent, which would read signalGapTolerance of samples of every node each cycle.
  nodeAgentMissingSince:: 'node:gke_disruption_node_agent:missing_since',
  // Recorded by the targets rules: when each required job last had a target, per cluster.
  targetsLastSeen:: 'job:up:last_seen',
  preempted:: 'node:gce_instance_preempted:last_seen',
  metadataStale:: 'node_instance:gke_disruption_metadata_last_success_timestamp_seconds:stale',
  upcomingUnsupported:: 'node_instance:gke_disruption_metadata_path_supported:unsupported',
  agentCollectorFailing:: 'instance_collector:gke_disruption_collector_success:failing',
  // Recorded by the hosts rules (alerts/hosts.libsonnet): the nodes with a maintenance announced for failed
  // hardware (FAILURE_* reasons), one series per node while announced.
  hardwareFailureAnnounced:: 'node:gke_node_hardware_failure_maintenance:announced',
  // Recorded by the maintenance rules: the start of each node's next maintenance.
  maintenanceStart:: 'node:gke_node_maintenance_start_timestamp_seconds:min',
  // Recorded by the GPU rules (alerts/gpu.libsonnet): every GPU fault now, one series per node and Xid from
  // either source, valued with when it was first seen.
  gpuFaultSince:: 'node_xid:gke_node_gpu_xid:since',

  // xidMatcher selects the Xids _config.xidActions sends to action (repair, alert or ignore), those absent from
  // the map included when they get unknownXidAction; notXidMatcher the others.
  xidMatcher(config, action)::
    if action == config.unknownXidAction then 'xid!~"%s"' % $.xidsOf(config, action, false) else 'xid=~"%s"' % $.xidsOf(config, action, true),
  notXidMatcher(config, action)::
    if action == config.unknownXidAction then 'xid=~"%s"' % $.xidsOf(config, action, false) else 'xid!~"%s"' % $.xidsOf(config, action, true),
  // xidsOf is the Xids xidActions sends to action (is true) or to another action (is false), as a regular expression.
  xidsOf(config, action, is)::
    std.join('|', [x for x in std.objectFields(config.xidActions) if (config.xidActions[x] == action) == is]),

  // currentOrRemembered is aggregation over the current values of selectors, else, for the label sets (by)
  // without any, over their remembered values (remembered: through a gap of their source only). sources are
  // [selector, source] pairs. A value that changed during a gap replaces the old one at once.
  currentOrRemembered(config, aggregation, by, sources)::
    |||
      %(agg)s by (%(by)s) (
        %(current)s
      )
      or on (%(by)s)
      %(agg)s by (%(by)s) (
        %(remembered)s
      )
    ||| % {
      agg: aggregation,
      by: by,
      current: std.join('\n  or\n  ', [s[0] for s in sources]),
      remembered: std.join('\n  or\n  ', [$.inGap(config, src[0], src[1]) for src in sources]),
    },
}
