// Recording rules. Names follow level:metric:operation; every rule keeps the cluster label.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local byPool = utils.labelList(c, ['node_pool']),
    local byPoolTypeReason = utils.labelList(c, promql.interruptionClusterLabels + ['node_pool', 'interruption_type', 'interruption_reason']),
    local start = 'node:gke_node_maintenance_start_timestamp_seconds:min',
    local remembered(selector) = 'last_over_time(%s[%s])' % [selector, c.canRescheduleMemory],

    // scheduledWithin counts, per pool, the nodes whose maintenance starts within the given seconds (or already
    // started and is not done).
    local scheduledWithin(name, seconds) = {
      record: 'node_pool:gke_node_maintenance_scheduled:count_next%s' % name,
      expr: |||
        count by (%(by)s) (
          %(start)s < time() + %(seconds)d
        )
      ||| % { by: byPool, start: start, seconds: seconds },
    },

    // The increase is rounded: increase() extrapolates to the window's edges, so 3 interruptions would otherwise
    // read 3.04 and pass a threshold of "more than 3". The exporter exposes a new series at zero before its first
    // count, so increase() sees every interruption.
    local interruptions(name, window) = {
      record: 'node_pool_type_reason:gke_node_pool_interruptions:increase%s' % name,
      expr: |||
        round(
          sum by (%(by)s) (
            increase(gke_node_pool_interruptions_total{%(selector)s}[%(window)s])
          )
        )
      ||| % { by: byPoolTypeReason, selector: c.clusterExporterSelector, window: window },
    },

    // canReschedule is every reschedulability answer about a node of one kind (matchers on can_reschedule),
    // from the node agent or from GKE's annotation on the node, as one series per node labelled value.
    local canReschedule(matchers, value) =
      |||
        label_replace(
          group by (%(by)s) (
            %(agent)s
            or
            %(cluster)s
          ),
          "can_reschedule", "%(value)s", "", ""
        )
      ||| % {
        by: byNode,
        agent: remembered('gce_instance_upcoming_maintenance_info{%s, %s}' % [c.nodeAgentSelector, matchers]),
        cluster: remembered('gke_node_upcoming_maintenance_info{%s, %s}' % [c.clusterExporterSelector, matchers]),
        value: value,
      },

    groups+: [
      {
        name: 'gke-disruption-maintenance.rules',
        rules: [
          {
            // The start of each node's next maintenance, with the node's pool and accelerator labels: the
            // scheduled-maintenance-time label, else the window start of GKE's annotation, else the metadata
            // server's (node agent). Each is bridged over gaps.
            record: start,
            expr: promql.withNodeInfo(c, |||
              min by (%(by)s) (
                %(label)s
                or
                %(annotation)s
                or
                %(agent)s
              )
            ||| % {
              by: byNode,
              label: promql.bridged(c, 'gke_node_scheduled_maintenance_timestamp_seconds{%s}' % c.clusterExporterSelector),
              annotation: promql.bridged(c, 'gke_node_upcoming_maintenance_window_start_timestamp_seconds{%s}' % c.clusterExporterSelector),
              agent: promql.bridged(c, 'gce_instance_upcoming_maintenance_window_start_timestamp_seconds{%s}' % c.nodeAgentSelector),
            }),
          },
          {
            // Whether each node with maintenance can have it started earlier: "true" or "false" as the node agent
            // or GKE's annotation last said within canRescheduleMemory ("false" when they disagree), else
            // "unknown". One series per node, so that the automation alerts never see two answers.
            record: 'node:gke_node_maintenance_can_reschedule:info',
            expr: |||
              (
              %(false)s
                or on (%(by)s)
              %(true)s
              )
              and on (%(by)s) %(start)s
              or on (%(by)s)
              label_replace(group by (%(by)s) (%(start)s), "can_reschedule", "unknown", "", "")
            ||| % {
              by: byNode,
              start: start,
              'false': utils.indent(canReschedule('can_reschedule!="true", can_reschedule!=""', 'false'), 2),
              'true': utils.indent(canReschedule('can_reschedule="true"', 'true'), 2),
            },
          },
        ] + [
          scheduledWithin(name, utils.seconds(c.maintenanceScheduledWindows[name]))
          for name in std.objectFields(c.maintenanceScheduledWindows)
        ] + [
          {
            record: 'node_pool:gke_nodes_in_maintenance:count',
            expr: |||
              count by (%(byPool)s) (
              %(nodes)s
              )
            ||| % {
              byPool: byPool,
              nodes: utils.indent(promql.withNodeInfo(c, 'group by (%s) (gke_node_maintenance_state{%s})' % [byNode, c.clusterExporterSelector]), 2),
            },
          },
        ],
      },
      {
        name: 'gke-disruption-interruptions.rules',
        rules: [interruptions(name, c.interruptionsWindows[name]) for name in std.objectFields(c.interruptionsWindows)],
      },
    ],
  },
}
