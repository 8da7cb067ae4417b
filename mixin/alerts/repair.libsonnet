// Alerts on the repair of failed hardware: a maintenance whose reasons say the hardware failed (FAILURE_*) is a
// broken node GKE will repair, booked days out; it is worth starting at once, whatever its window.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

local nodeRef = 'node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}';

{
  prometheusAlerts+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local on = utils.clusterRef(c),
    local start = promql.maintenanceStart,
    local canReschedule = 'node:gke_node_maintenance_can_reschedule:info',
    // What holds the repair alert back outlasts what makes it fire (promql.outlasting).
    local heldByMaintenance = promql.outlasting(c, 'gke_node_maintenance_state{%s}' % c.clusterExporterSelector),
    local heldByRequest = promql.outlasting(c, 'gke_node_perform_maintenance_requested{%s}' % c.clusterExporterSelector),
    local alert(name, rule) = utils.alertRule(c, name, rule),

    // The nodes whose announced maintenance names a hardware failure, with its reasons, from the node agent (which
    // sees the notice first), else GKE's annotation (gke.FailureReasonsRegexp): one reasons value per node, so that
    // sources that word it differently neither break the join nor change the alert's labels.
    local failure = |||
      max by (%(by)s, reasons) (
        %(agent)s
      )
      or on (%(by)s)
      max by (%(by)s, reasons) (
        %(node)s
      )
    ||| % {
      by: byNode,
      node: promql.remembered(c, 'gke_node_upcoming_maintenance_info{%s, reasons=~"%s"}' % [c.clusterExporterSelector, c.hardwareFailureReasons], 'cluster'),
      agent: promql.remembered(c, 'gce_instance_upcoming_maintenance_info{%s, reasons=~"%s"}' % [c.nodeAgentSelector, c.hardwareFailureReasons], 'agent'),
    },
    // action is the failed nodes whose can_reschedule matches, labelled with the action the automation takes.
    local action(matcher, name) = |||
      label_replace(
        %(start)s
        * on (%(by)s) group_left (can_reschedule) %(canReschedule)s{%(matcher)s}
        * on (%(by)s) group_left (reasons) (%(failure)s),
        "gke_disruption_action", "%(name)s", "", ""
      )
    ||| % { start: start, by: byNode, canReschedule: canReschedule, matcher: matcher, failure: utils.indent(failure, 4), name: name },

    groups+: [
      {
        name: 'gke-disruption-repair',
        rules: [
          alert('GKENodeHardwareFailureMaintenance', {
            // Whatever the window: GKE books a failed host's repair days out, and the node is of no use until then.
            expr: |||
              (
              %(perform)s
                or on (%(by)s)
              %(drain)s
              )
              unless on (%(by)s) %(inMaintenance)s
              unless on (%(by)s) %(requested)s
            ||| % {
              perform: utils.indent(action('can_reschedule="true"', 'perform-maintenance'), 2),
              drain: utils.indent(action('can_reschedule!="true"', 'drain'), 2),
              by: byNode,
              inMaintenance: heldByMaintenance,
              requested: heldByRequest,
            },
            annotations: {
              summary: 'GKE announced the repair of failed hardware on a node.',
              description: 'GKE announced a maintenance of %s%s for failed hardware (reasons {{ $labels.reasons }}), booked for {{ $value | humanizeTimestamp }}. The node is of little use until the host is repaired; {{ if eq $labels.gke_disruption_action "perform-maintenance" }}the actions service drains it and asks GKE to start the repair now (perform-maintenance){{ else }}the repair cannot be started early: the actions service drains the node{{ end }} as the pool\'s repair settings allow.' % [nodeRef, on],
            },
          }),
          alert('GKENodeReportFaultyHostFailed', {
            // GKE's Error, held through scrape gaps, until the status moves on (a retry) or the label is gone.
            expr: promql.withNodeInfo(c, |||
              group by (%(by)s) (
                %(failed)s
                unless on (%(by)s)
                gke_node_report_and_replace_status{%(selector)s, status!="Error"}
              )
            ||| % {
              by: byNode,
              failed: promql.remembered(c, 'gke_node_report_and_replace_status{%s, status="Error"}' % c.clusterExporterSelector, 'cluster'),
              selector: c.clusterExporterSelector,
            }),
            annotations: {
              summary: "GKE could not report a node's host as faulty.",
              description: 'GKE could not report the host of %s%s as faulty (cloud.google.com/report-and-replace-status=Error): it cleared its taints and removed the cloud.google.com/fault-behavior label, so the node takes pods again on the host that was reported. Retry a transient error by reporting the host again.' % [nodeRef, on],
            },
          }),
        ],
      },
    ],
  },
}
