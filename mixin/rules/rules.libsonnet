// Recording rules. Names follow level:metric:operation; every rule keeps the cluster label.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local byPool = utils.labelList(c, ['node_pool']),
    local byPoolTypeReason = utils.labelList(c, promql.interruptionClusterLabels + ['node_pool', 'interruption_type', 'interruption_reason']),
    local start = promql.maintenanceStart,

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

    // The interruption counters once per series identity: an exporter's counters are a function of Cloud
    // Monitoring's history alone, so the instances scraped together during a rollout show the same values, and
    // max (never sum) keeps one continuous counter across them.
    local interruptionsTotal = 'node_pool_type_reason:gke_node_pool_interruptions_total:max',

    // The increase is rounded: increase() extrapolates to the window's edges, so 3 interruptions would otherwise
    // read 3.04 and pass a threshold of "more than 3". The exporter exposes a new series at zero before its first
    // count, so increase() sees every interruption.
    local interruptions(name, window) = {
      record: 'node_pool_type_reason:gke_node_pool_interruptions:increase%s' % name,
      expr: |||
        round(
          increase(%(total)s[%(window)s])
        )
      ||| % { total: interruptionsTotal, window: window },
    },

    local answer = 'node:gke_node_maintenance_can_reschedule:answer',

    // currentAnswer is every current reschedulability answer about a node of one kind (matchers on
    // can_reschedule), from the node agent or from GKE's annotation on the node, as one series per node labelled
    // value.
    local currentAnswer(matchers, value) =
      |||
        label_replace(
          group by (%(by)s) (
            gce_instance_upcoming_maintenance_info{%(agent)s, %(matchers)s}
            or
            gke_node_upcoming_maintenance_info{%(cluster)s, %(matchers)s}
          ),
          "can_reschedule", "%(value)s", "", ""
        )
      ||| % { by: byNode, agent: c.nodeAgentSelector, cluster: c.clusterExporterSelector, matchers: matchers, value: value },

    // rememberedAnswer is the last answer of one kind within canRescheduleMemory, if it was about the maintenance
    // the node has now (the answer's value is the start of the maintenance it was given for).
    local rememberedAnswer(value) =
      'last_over_time(%s{can_reschedule="%s"}[%s]) == on (%s) group_left () %s' % [answer, value, c.canRescheduleMemory, byNode, start],

    groups+: [
      {
        // The GPU fault rules (alerts/gpu.libsonnet) first: the memory of the nodes' labels reads their faults.
        name: 'gke-disruption-maintenance.rules',
        rules: $.gpuFaultRules + [
          promql.nodeInfoRule(c),
          {
            // The start of each node's next maintenance, with the node's pool and accelerator labels: the
            // scheduled-maintenance-time label, else the window start of GKE's annotation, else the metadata
            // server's (node agent). Each is remembered through a gap of its source, but only for a node without
            // any current value (a maintenance that moved during a gap is the new one at once), and never once
            // its source is current again and shows none: the memory ends with the maintenance.
            record: start,
            local sources = [
              ['gke_node_scheduled_maintenance_timestamp_seconds{%s}' % c.clusterExporterSelector, 'cluster'],
              ['gke_node_upcoming_maintenance_window_start_timestamp_seconds{%s}' % c.clusterExporterSelector, 'cluster'],
              ['gce_instance_upcoming_maintenance_window_start_timestamp_seconds{%s}' % c.nodeAgentSelector, 'agent'],
            ],
            expr: promql.withNodeInfo(
              c,
              promql.currentOrRemembered(c, 'min', byNode, sources),
              promql.signalsOf(c, [s[0] for s in sources]),
            ),
          },
          {
            // The current answer to "can this maintenance be rescheduled" ("false" when the node agent and GKE's
            // annotation disagree), valued with the start of the maintenance it is about: the key under which
            // the answer is remembered.
            record: answer,
            expr: |||
              (
              %(false)s
                or on (%(by)s)
              %(true)s
              )
              * on (%(by)s) group_left ()
                %(start)s
            ||| % {
              by: byNode,
              start: start,
              'false': utils.indent(currentAnswer('can_reschedule!="true", can_reschedule!=""', 'false'), 2),
              'true': utils.indent(currentAnswer('can_reschedule="true"', 'true'), 2),
            },
          },
          {
            // Whether each node with maintenance can have it started earlier: the current answer, else the last
            // answer within canRescheduleMemory about the same maintenance ("false" when both were given), else
            // "unknown". A new maintenance starts unknown. One series per node, so that the automation alerts
            // never see two answers.
            record: 'node:gke_node_maintenance_can_reschedule:info',
            expr: |||
              group by (%(by)s, can_reschedule) (
                %(answer)s
                or on (%(by)s)
                %(false)s
                or on (%(by)s)
                %(true)s
              )
              or on (%(by)s)
              label_replace(group by (%(by)s) (%(start)s), "can_reschedule", "unknown", "", "")
            ||| % {
              by: byNode,
              start: start,
              answer: answer,
              'false': rememberedAnswer('false'),
              'true': rememberedAnswer('true'),
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
        // What the node agents say about every node, reduced to the few nodes and agents with something to
        // report, so that alerts bridge sparse series (see promql.libsonnet).
        name: 'gke-disruption-agents.rules',
        rules: [
          {
            // Since when each GPU, TPU or Spot node has had no node agent reporting on it: kept from its own
            // previous value while the agent stays away and the node exists (or the cluster exporter is in a
            // gap), so a node with its agent costs no series.
            record: promql.nodeAgentMissingSince,
            expr: |||
              (
                %(recorded)s
                unless on (%(by)s) %(agent)s
              )
              and on (%(by)s)
              (
              %(nodes)s
                or
                %(recorded)s unless on (%(cluster)s) %(exporter)s
              )
              or on (%(by)s)
              topk by (%(by)s) (1,
                max by (%(by)s, %(labels)s) (
                  (
              %(nodes)s
                  )
                  unless on (%(by)s) %(agent)s
                )
              ) * 0 + time()
            ||| % {
              by: byNode,
              cluster: c.clusterLabel,
              labels: std.join(', ', promql.nodeInfoLabels),
              recorded: promql.nodeAgentMissingSince,
              agent: promql.agentCurrent(c),
              exporter: promql.exporterCurrent(c),
              nodes: utils.indent(promql.acceleratorNodes(c, ['provisioning="spot"']), 4),
            },
          },
        ],
      },
      {
        // The few node agents with something wrong. A group of their own: each rule reads every agent's series,
        // and Prometheus evaluates groups side by side but a group's rules one after another.
        name: 'gke-disruption-agent-health.rules',
        local byInstance = utils.labelList(c, ['node', 'instance']),
        local lastSuccess = 'gke_disruption_metadata_last_success_timestamp_seconds{%s}' % c.nodeAgentSelector,
        rules: [
          {
            // The node agents whose metadata server has not answered for metadataStaleThreshold, valued with the
            // last answer.
            record: promql.metadataStale,
            expr: 'max by (%s) (%s) < time() - %d\n' % [byInstance, lastSuccess, utils.seconds(c.metadataStaleThreshold)],
          },
          {
            // Every label kept: GKEDisruptionCollectorFailing names the agent's instance.
            record: promql.agentCollectorFailing,
            expr: 'gke_disruption_collector_success{%s} == 0\n' % c.nodeAgentSelector,
          },
          {
            record: promql.upcomingUnsupported,
            expr: 'max by (%s) (gke_disruption_metadata_path_supported{%s, path="instance/upcoming-maintenance"}) == 0\n' % [byInstance, c.nodeAgentSelector],
          },
        ],
      },
      {
        // Which of the product's required jobs each cluster has had, so that a cluster whose job is gone
        // altogether (its targets deleted, not down) is named by GKEDisruptionExporterDown.
        name: 'gke-disruption-targets.rules',
        rules: [
          {
            // When each required job last had a target, per cluster, remembered for clusterMemory from its own
            // previous value: one sample per cluster and job each cycle.
            record: promql.targetsLastSeen,
            expr: |||
              max by (%(by)s) (
                %(up)s
              )
              or on (%(by)s)
              %(recorded)s > time() - %(memory)d
            ||| % {
              by: utils.labelList(c, ['job']),
              up: std.join('\n  or\n  ', ['timestamp(up{%s})' % s for s in c.requiredJobSelectors]),
              recorded: promql.targetsLastSeen,
              memory: utils.seconds(c.clusterMemory),
            },
          },
        ],
      },
      {
        name: 'gke-disruption-interruptions.rules',
        rules: [
          {
            record: interruptionsTotal,
            expr: 'max by (%s) (gke_node_pool_interruptions_total{%s})\n' % [byPoolTypeReason, c.clusterExporterSelector],
          },
        ] + [interruptions(name, c.interruptionsWindows[name]) for name in std.objectFields(c.interruptionsWindows)],
      },
    ],
  },
}
