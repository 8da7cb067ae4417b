// PromQL fragments shared by the recording rules, alerts and dashboards. Each function takes the mixin's _config.
local utils = import 'utils.libsonnet';

{
  // The labels gke_node_info gives a node beyond its name: where it runs and what it is.
  nodeInfoLabels:: ['node_pool', 'zone', 'machine_type', 'accelerator', 'tpu_accelerator', 'tpu_topology', 'provisioning'],

  // nodeInfo is gke_node_info with exactly one series per node: topk keeps one where an exporter restart or a
  // relabelled node briefly leaves two, which would otherwise make every join with it fail.
  nodeInfo(config)::
    'topk by (%s) (1, gke_node_info{%s})' % [utils.labelList(config, ['node']), config.clusterExporterSelector],

  // withNodeInfo adds the node's pool and accelerator labels to expr, a per-node expression keyed by the cluster
  // label and node. The node agent and the cluster exporter are different jobs, so the join is on node, never
  // on instance or job. A node the cluster exporter does not know keeps its series, without the extra labels.
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
}
