// Alerts on node pool interruptions as Cloud Monitoring counts them (kubernetes.io/node_pool/interruption_count).
{
  prometheusAlerts+:: {
    local c = $._config,
    local recorded = 'node_pool_type_reason:gke_node_pool_interruptions:increase%s' % c.interruptionsWindow,
    local overridden = std.objectFields(c.interruptionsThresholdByType),
    assert std.member(['1h', '1d', '7d'], c.interruptionsWindow) : 'interruptionsWindow must be 1h, 1d or 7d',

    // One comparison per threshold: the default for every type without its own, then each type's own.
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
          {
            alert: 'GKENodePoolInterruptionsHigh',
            expr: std.join('\nor\n', comparisons) + '\n',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A node pool is interrupted more often than expected.',
              description: 'Node pool {{ $labels.node_pool }} had {{ printf "%%.0f" $value }} interruptions of type {{ $labels.interruption_type }} and reason {{ $labels.interruption_reason }} within %s, more than its threshold.' % c.interruptionsWindow,
            },
          },
        ],
      },
    ],
  },
}
