// Alerts on node pool interruptions as Cloud Monitoring counts them (kubernetes.io/node_pool/interruption_count).
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local recorded = 'node_pool_type_reason:gke_node_pool_interruptions:increase%s' % c.interruptionsWindow,
    local overridden = std.objectFields(c.interruptionsThresholdByType),
    assert std.objectHas(c.interruptionsWindows, c.interruptionsWindow) :
           'interruptionsWindow must be one of interruptionsWindows (%s)' % std.join(', ', std.objectFields(c.interruptionsWindows)),

    // One comparison per threshold: the default for every type without its own, then each type's own. The
    // recorded increases are whole numbers, so "more than 3" means 4 or more.
    local comparisons =
      [
        if overridden == [] then '%s > %d' % [recorded, c.interruptionsThreshold]
        else '%s{interruption_type!~"%s"} > %d' % [recorded, std.join('|', overridden), c.interruptionsThreshold],
      ] + [
        '%s{interruption_type="%s"} > %d' % [recorded, t, c.interruptionsThresholdByType[t]]
        for t in overridden
      ],

    groups+: [
      {
        name: 'gke-disruption-interruptions',
        rules: [
          utils.alertRule(c, 'GKENodePoolInterruptionsHigh', {
            expr: std.join('\nor\n', comparisons) + '\n',
            annotations: {
              summary: 'A node pool is interrupted more often than expected.',
              description: 'Node pool {{ $labels.node_pool }} of cluster {{ $labels.cluster_name }} ({{ $labels.cluster_location }}, project {{ $labels.cluster_project_id }}) had {{ printf "%%.0f" $value }} interruptions of type {{ $labels.interruption_type }} and reason {{ $labels.interruption_reason }} within %s, more than its threshold.' % c.interruptionsWindows[c.interruptionsWindow],
            },
          }),
        ],
      },
    ],
  },
}
