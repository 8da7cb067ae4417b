// PromQL fragments shared by the recording rules, alerts and dashboards. Each function takes the mixin's _config.
local utils = import 'utils.libsonnet';

{
  // The labels gke_node_info gives a node beyond its name: where it runs and what it is.
  nodeInfoLabels:: ['node_pool', 'zone', 'machine_type', 'accelerator', 'tpu_accelerator', 'tpu_topology', 'provisioning'],

  // The labels that tell apart the clusters Cloud Monitoring's interruption counts are about. One exporter can
  // list every cluster of a project, so the cluster label (its own cluster) does not.
  interruptionClusterLabels:: ['cluster_project_id', 'cluster_location', 'cluster_name'],

  // bridged reads selector over the last signalGapTolerance, so that a failed scrape or a restarting target
  // leaves no hole: the series keeps its last value until the gap is longer than that.
  bridged(config, selector):: 'last_over_time(%s[%s])' % [selector, config.signalGapTolerance],

  // nodeInfoLastSeen is the recording rule that remembers each node's gke_node_info labels for nodeInfoMemory:
  // its value is when the node was last seen. It reads its own previous value rather than nodeInfoMemory of
  // gke_node_info, so a cycle reads two samples per node however long the memory.
  nodeInfoLastSeen:: 'node:gke_node_info:last_seen',

  // nodeInfoRule records nodeInfoLastSeen: one series per node (topk keeps one where an exporter restart or a
  // relabelled node briefly leaves two), the current labels winning over remembered ones.
  nodeInfoRule(config):: {
    local by = utils.labelList(config, ['node']),
    record: $.nodeInfoLastSeen,
    expr: |||
      topk by (%(by)s) (1,
        max by (%(by)s, %(labels)s) (timestamp(gke_node_info{%(selector)s}))
      )
      or on (%(by)s)
      %(recorded)s > time() - %(memory)d
    ||| % {
      by: by,
      labels: std.join(', ', $.nodeInfoLabels),
      selector: config.clusterExporterSelector,
      recorded: $.nodeInfoLastSeen,
      memory: utils.seconds(config.nodeInfoMemory),
    },
  },

  // nodeInfo is the remembered gke_node_info, one series of value 1 per node.
  nodeInfo(config):: 'group without () (%s)' % $.nodeInfoLastSeen,

  // withNodeInfo adds the node's pool and accelerator labels to expr, a per-node expression keyed by the cluster
  // label and node. The node agent and the cluster exporter are different jobs, so the join is on node, never
  // on instance or job. A node the cluster exporter has not known for nodeInfoMemory keeps its series, without
  // the extra labels.
  withNodeInfo(config, expr)::
    local on = utils.labelList(config, ['node']);
    |||
      (
      %(expr)s
      )
      * on (%(on)s) group_left (%(labels)s)
        %(info)s
      or on (%(on)s)
      (
      %(expr)s
      )
    ||| % {
      expr: utils.indent(expr, 2),
      on: on,
      labels: std.join(', ', $.nodeInfoLabels),
      info: $.nodeInfo(config),
    },

  // heldFor is true (the value of expr) where expr, a per-series expression, has had a result at every
  // subqueryStep of the last duration: how long a condition has held, from the data, whatever restarted.
  heldFor(config, expr, duration)::
    local steps = std.floor(utils.seconds(duration) / utils.seconds(config.subqueryStep));
    'count_over_time((\n%s\n)[%s:%s]) >= %d' % [utils.indent(expr, 2), duration, config.subqueryStep, std.max(1, steps)],

  // GPU/TPU nodes (and those matching the extra matchers) with their gke_node_info labels, one series of value 1
  // per node, from the remembered gke_node_info.
  acceleratorNodes(config, extra=[])::
    'group without () (\n%s\n)' % std.join('\n  or\n', [
      '  %s{%s}' % [$.nodeInfoLastSeen, m]
      for m in ['accelerator!=""', 'tpu_accelerator!=""'] + extra
    ]),

  // Recorded per node or node agent by the agents rules (rules.libsonnet): when a node agent last reported on each
  // node, and the few agents with something wrong. Alerts bridge these sparse series rather than the signals of
  // every node agent, which would read signalGapTolerance of samples of every node each cycle.
  nodeAgentLastSeen:: 'node:gke_disruption_node_agent:last_seen',
  preempted:: 'node:gce_instance_preempted:max',
  metadataStale:: 'node_instance:gke_disruption_metadata_last_success_timestamp_seconds:stale',
  upcomingUnsupported:: 'node_instance:gke_disruption_metadata_path_supported:unsupported',
  agentCollectorFailing:: 'instance_collector:gke_disruption_collector_success:failing',
  // Recorded by the hosts rules (alerts/hosts.libsonnet): the nodes with a maintenance announced for failed
  // hardware (FAILURE_* reasons), one series per node while announced.
  hardwareFailureAnnounced:: 'node:gke_node_hardware_failure_maintenance:announced',

  // currentOrBridged is aggregation over the current values of selectors, else, for the label sets (by) without
  // any, over their bridged values: a value that changed during a gap replaces the old one at once.
  currentOrBridged(config, aggregation, by, selectors)::
    |||
      %(agg)s by (%(by)s) (
        %(current)s
      )
      or on (%(by)s)
      %(agg)s by (%(by)s) (
        %(bridged)s
      )
    ||| % {
      agg: aggregation,
      by: by,
      current: std.join('\n  or\n  ', selectors),
      bridged: std.join('\n  or\n  ', [$.bridged(config, s) for s in selectors]),
    },
}
