// Alerts on the exporter and the actions service themselves.
local utils = import '../lib/utils.libsonnet';

// How a description names a scrape target: its job, and its instance when there is one.
local targetRef = '{{ $labels.job }}{{ with $labels.instance }} at {{ . }}{{ end }}';

{
  prometheusAlerts+:: {
    local c = $._config,

    groups+: [
      {
        name: 'gke-disruption-exporter',
        rules: [
          {
            alert: 'GKEDisruptionExporterDown',
            // A node agent is unreachable while its node is in maintenance. Where its scrape configuration gives
            // the target a node label, the unless below leaves those out; without the label it matches nothing.
            expr: std.join('\nor\n', [
              'up{%s} == 0' % c.clusterExporterSelector,
              '(\n  up{%s} == 0\n  unless on (%s) gke_node_maintenance_state{%s}\n)' % [
                c.nodeAgentSelector,
                utils.labelList(c, ['node']),
                c.clusterExporterSelector,
              ],
              'up{%s} == 0' % c.actionsSelector,
            ] + ['absent(up{%s})' % s for s in c.requiredJobSelectors]) + '\n',
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A gke-disruption-exporter target is down or missing.',
              description: 'Prometheus has had no successful scrape of %s for 15 minutes. Disruption signals from it are missing: alerts, dashboards and actions that depend on them are blind.' % targetRef,
            },
          },
          {
            alert: 'GKEDisruptionCollectorFailing',
            expr: std.join('\nor\n', [
              'gke_disruption_collector_success{%s} == 0' % s
              for s in [c.clusterExporterSelector, c.nodeAgentSelector]
            ]) + '\n',
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A gke-disruption-exporter collector is failing.',
              description: 'The {{ $labels.collector }} collector of %s has failed for 15 minutes: its series are missing or out of date.' % targetRef,
            },
          },
          {
            alert: 'GKEDisruptionActionFailed',
            // The actions service exposes every action and result at zero from its start.
            expr: |||
              sum by (%(by)s) (
                increase(gke_disruption_actions_total{%(selector)s, result="failed"}[%(window)s])
              ) > 0
            ||| % { by: utils.labelList(c, ['action']), selector: c.actionsSelector, window: c.actionFailedWindow },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The actions service failed to act on a node.',
              description: '{{ printf "%%.0f" $value }} {{ $labels.action }} action(s) failed within %s. The affected nodes were not prepared for their maintenance.' % c.actionFailedWindow,
            },
          },
        ],
      },
    ],
  },
}
