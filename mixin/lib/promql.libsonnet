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

  // nodeInfo is gke_node_info with exactly one series per node, remembered for nodeInfoMemory: topk keeps one
  // where an exporter restart or a relabelled node briefly leaves two, and the memory keeps a gap from taking the
  // node's labels away (a node's pool, zone and machine never change).
  nodeInfo(config)::
    'topk by (%s) (1, last_over_time(gke_node_info{%s}[%s]))' % [
      utils.labelList(config, ['node']),
      config.clusterExporterSelector,
      config.nodeInfoMemory,
    ],

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

  // GPU/TPU nodes, one series per node, from the bridged gke_node_info.
  acceleratorNodes(config, extra=[])::
    local by = utils.labelList(config, ['node']);
    'group by (%s) (\n%s\n)' % [by, std.join('\n  or\n', [
      '  %s' % $.bridged(config, 'gke_node_info{%s, %s}' % [config.clusterExporterSelector, m])
      for m in ['accelerator!=""', 'tpu_accelerator!=""'] + extra
    ])],
}
