// Physical hosts that fail again and again: each failure is repaired on its own, but a host that keeps failing
// is worth reporting to Google. Failures are recorded as sparse events (one sample per failure, on the node and
// the host it ran on), so counting them over weeks reads a few samples per failing host, never every node's history.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  local c = $._config,
  local byNode = utils.labelList(c, ['node']),
  local byHost = utils.labelList(c, ['host']),
  local gap = c.signalGapTolerance,

  // Recorded by the rules below.
  local nodeHost = 'node:gke_node_info:host',
  local interruptionsTotal = 'node:gke_node_interruptions_total:max',
  local failureAnnounced = promql.hardwareFailureAnnounced,
  local failureEvents = 'host_node:gke_node_failures:new',
  local hostFailures = 'host:gke_node_failures:count',

  // event labels a node's new failures (expr, per node) with its host and the kind of failure.
  local event(expr, kind) = std.rstripChars(|||
    label_replace(
      (
    %(expr)s
      )
      * on (%(by)s) group_left (host) group without () (%(nodeHost)s),
      "kind", "%(kind)s", "", ""
    )
  ||| % { expr: utils.indent(expr, 4), by: byNode, nodeHost: nodeHost, kind: kind }, '\n'),

  local currentInterruptions = 'sum by (%s) (max by (%s, interruption_type, interruption_reason) (gke_node_interruptions_total{%s}))' % [byNode, byNode, c.clusterExporterSelector],
  local currentFailure = |||
    group by (%(by)s) (
      gke_node_upcoming_maintenance_info{%(cluster)s, reasons=~"%(reasons)s"}
      or
      gce_instance_upcoming_maintenance_info{%(agent)s, reasons=~"%(reasons)s"}
    )
  ||| % { by: byNode, cluster: c.clusterExporterSelector, agent: c.nodeAgentSelector, reasons: c.hardwareFailureReasons },

  prometheusRules+:: {
    groups+: [
      {
        // The order matters: the events compare what is now with what the state rules after them recorded the
        // previous cycle.
        name: 'gke-disruption-hosts.rules',
        rules: [
          {
            // The host each node runs on, for the nodes GKE gives one (A3, A4 and other reservation-bound VMs),
            // remembered for signalGapTolerance from its own previous value; valued with when it was last seen.
            record: nodeHost,
            expr: |||
              topk by (%(by)s) (1,
                max by (%(by)s, host) (timestamp(gke_node_info{%(selector)s, host!=""}))
              )
              or on (%(by)s)
              %(recorded)s > time() - %(gap)d
            ||| % { by: byNode, selector: c.clusterExporterSelector, recorded: nodeHost, gap: utils.seconds(gap) },
          },
          {
            // The failures since the last cycle, by node, host and kind: a sample only when there are some.
            // Interruptions are the increase of the node's counters; a maintenance for failed hardware counts when
            // it was not announced within signalGapTolerance before, once however long it stays announced.
            record: failureEvents,
            expr: |||
              %(interruptions)s
              or
              %(maintenances)s
            ||| % {
              interruptions: event('%s\n- on (%s) last_over_time(%s[%s])\n> 0' % [currentInterruptions, byNode, interruptionsTotal, gap], 'interruption'),
              maintenances: event('%s\nunless on (%s) last_over_time(%s[%s])' % [std.rstripChars(currentFailure, '\n'), byNode, failureAnnounced, gap], 'hardware_failure_maintenance'),
            },
          },
          {
            record: interruptionsTotal,
            expr: currentInterruptions + '\n',
          },
          {
            record: failureAnnounced,
            expr: currentFailure,
          },
          {
            // Failures per host within hostFailuresWindow.
            record: hostFailures,
            expr: 'sum by (%s) (sum_over_time(%s[%s]))\n' % [byHost, failureEvents, c.hostFailuresWindow],
          },
        ],
      },
    ],
  },

  prometheusAlerts+:: {
    local alert(name, rule) = utils.alertRule(c, name, rule),
    // The nodes that failed on the alert's host within the window, as "node (n)", by name.
    local nodes = |||
      {{ range $i, $s := query (printf "sum by (node) (sum_over_time(%(events)s{%(cluster)s=%%q, host=%%q}[%(window)s]))" $labels.%(cluster)s $labels.host) | sortByLabel "node" }}{{ if $i }}, {{ end }}{{ $s.Labels.node }} ({{ $s.Value }}){{ end }}
    ||| % { events: failureEvents, cluster: c.clusterLabel, window: c.hostFailuresWindow },

    groups+: [
      {
        name: 'gke-disruption-hosts',
        rules: [
          alert('GKEHostRepeatedFailures', {
            expr: '%s >= %d\n' % [hostFailures, c.hostFailuresThreshold],
            annotations: {
              summary: 'A physical host keeps failing.',
              description: 'Host {{ $labels.host }}%s saw {{ $value }} failures (interruptions and maintenances for failed hardware) within %s, on nodes %s. Report the host to Google (report-faulty-host) and keep large jobs off it.' % [utils.clusterRef(c), c.hostFailuresWindow, std.rstripChars(nodes, '\n')],
            },
          }),
        ],
      },
    ],
  },
}
