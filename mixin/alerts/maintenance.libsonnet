// Alerts on host maintenance of single nodes and of the workloads on them, from the node labels and annotations
// (cluster exporter) and the GCE metadata server (node agent). Every per-node alert carries the node label and the
// node's pool and accelerator labels; every signal is remembered through gaps of its source (promql.remembered),
// so a failed scrape or a restarting agent neither resolves these alerts nor restarts their `for`, and the memory
// ends once the source is back without the signal. What holds an action alert back outlasts what makes it fire
// (promql.outlasting), so the order in which Prometheus evaluates the groups does not change what fires.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

// How a description names the node: its name, and its pool when known.
local nodeRef = 'node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}';
local capitalized(s) = std.asciiUpper(s[0]) + s[1:];

{
  prometheusAlerts+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local on = utils.clusterRef(c),
    local start = promql.maintenanceStart,
    local canReschedule = 'node:gke_node_maintenance_can_reschedule:info',
    local stateSelector = 'gke_node_maintenance_state{%s}' % c.clusterExporterSelector,
    local requestedSelector = 'gke_node_perform_maintenance_requested{%s}' % c.clusterExporterSelector,
    // What the alerts report on, and what holds the action alerts back.
    local inMaintenance = promql.remembered(c, stateSelector, 'cluster'),
    local requested = promql.remembered(c, requestedSelector, 'cluster'),
    local heldByMaintenance = promql.outlasting(c, stateSelector),
    local heldByRequest = promql.outlasting(c, requestedSelector),
    local alert(name, rule) = utils.alertRule(c, name, rule),
    local ns = c.workloadNamespaceLabel,
    local byWorkload = utils.labelList(c, [ns, 'workload_kind', 'workload']),
    // asNamespace gives a workload alert the workload's namespace as `namespace` where the series carry it under
    // another label, so that routes by namespace reach the team.
    local asNamespace(expr) =
      if ns == 'namespace' then expr
      else 'label_replace(\n%s,\n  "namespace", "$1", "%s", "(.*)"\n)\n' % [utils.indent(expr, 2), ns],

    // within is the nodes whose maintenance starts within lead and whose can_reschedule matches, labelled with it.
    local within(lead, matcher) =
      |||
        (%(start)s < time() + %(lead)d)
        * on (%(by)s) group_left (can_reschedule)
          %(canReschedule)s{%(matcher)s}
      ||| % { start: start, lead: utils.seconds(lead), by: byNode, canReschedule: canReschedule, matcher: matcher },

    // heldOrShortNotice is an alert on maintenance starts whose `for` is measured from the data (steps of
    // subqueryStep) rather than by Prometheus: it fires once the condition has held for its `for`, or at once when
    // the maintenance starts within its `for`, which would otherwise still be pending when the node stops.
    local heldOrShortNotice(name, rule) =
      local hold = utils.seconds(c.alerts[name]['for']);
      local held = alert(name, rule);
      { [k]: held[k] for k in std.objectFields(held) if k != 'for' } + {
        expr: |||
          %(expr)s
          and on (%(by)s)
          (
          %(held)s
            or on (%(by)s)
            %(start)s < time() + %(hold)d
          )
        ||| % {
          expr: std.rstripChars(rule.expr, '\n'),
          by: byNode,
          held: utils.indent(promql.heldFor(c, 'group by (%s) (\n%s\n)' % [byNode, utils.indent(rule.expr, 2)], '%ds' % (hold + utils.seconds(c.subqueryStep))), 2),
          start: start,
          hold: hold,
        },
      },

    groups+: [
      {
        name: 'gke-disruption-maintenance',
        rules: [
          alert('GKENodeMaintenanceScheduled', {
            expr: start + '\n',
            annotations: {
              summary: 'Host maintenance is scheduled for a node.',
              description: 'Host maintenance of %s%s starts at {{ $value | humanizeTimestamp }}. GPU, TPU and Spot VMs cannot live-migrate: the node and its pods stop for the maintenance.' % [nodeRef, on],
            },
          }),
          alert('GKENodeMaintenanceWindowApproaching', {
            expr: |||
              (
              %(within)s
              )
              unless on (%(by)s) %(inMaintenance)s
              unless on (%(by)s) %(requested)s
            ||| % {
              within: utils.indent(within(c.performMaintenanceLeadTime, 'can_reschedule="true"'), 2),
              by: byNode,
              inMaintenance: heldByMaintenance,
              requested: heldByRequest,
            },
            labels: { gke_disruption_action: 'perform-maintenance' },
            annotations: {
              summary: 'A reschedulable host maintenance of a node is approaching.',
              description: 'Host maintenance of %s%s starts at {{ $value | humanizeTimestamp }}, within %s, and GKE can start it earlier at a time of our choosing. The actions service triggers it (label cloud.google.com/perform-maintenance=true) when its policy allows.' % [nodeRef, on, c.performMaintenanceLeadTime],
            },
          }),
          // Its `for` is measured from the data, so that a maintenance announced closer than its `for` is drained at
          // once instead of when GKE already stops the node.
          heldOrShortNotice('GKENodeMaintenanceNotReschedulable', {
            // can_reschedule is "false", or "unknown": nobody has answered for canRescheduleMemory (no node agent
            // and no annotation, as on Autopilot). Unknown is drained too, since draining is the action that is
            // safe without knowing, but only within the shorter unknownRescheduleDrainLeadTime.
            expr: |||
              (
              %(false)s
                or on (%(by)s)
              %(unknown)s
              )
              unless on (%(by)s) %(inMaintenance)s
            ||| % {
              'false': utils.indent(within(c.drainLeadTime, 'can_reschedule="false"'), 2),
              unknown: utils.indent(within(c.unknownRescheduleDrainLeadTime, 'can_reschedule="unknown"'), 2),
              by: byNode,
              inMaintenance: heldByMaintenance,
            },
            labels: { gke_disruption_action: 'drain' },
            annotations: {
              summary: 'A host maintenance that cannot be rescheduled is approaching a node.',
              description: 'Host maintenance of %s%s starts at {{ $value | humanizeTimestamp }}{{ if eq $labels.can_reschedule "unknown" }}, within %s, and whether it can be rescheduled is unknown: neither the node agent nor GKE\'s node.gke.io/upcoming-maintenance annotation has said so within %s{{ else }}, within %s, and cannot be rescheduled{{ end }}. The node should be drained before GKE stops it; the actions service drains it when its policy allows.' % [nodeRef, on, c.unknownRescheduleDrainLeadTime, c.canRescheduleMemory, c.drainLeadTime],
            },
          }),
          alert('GKENodeMaintenanceInProgress', {
            expr: promql.withNodeInfo(c, 'group by (%s, state) (%s)' % [byNode, inMaintenance]),
            annotations: {
              summary: 'A node is in host maintenance.',
              description: 'Host maintenance of %s%s is in progress (state {{ $labels.state }}). GKE evicts its pods and clears the state when the maintenance is done.' % [nodeRef, on],
            },
          }),
          alert('GKENodeMaintenanceStuck', {
            // One series per node from the request to the end of the maintenance, so that `for` measures both.
            // `for` is the planned threshold; a repair of failed hardware (FAILURE_* announced within its
            // threshold) takes hours, so its nodes count only once in maintenance for the difference as well.
            local stuck = |||
              group by (%(by)s) (
                %(inMaintenance)s
                or
                %(requested)s
              )
            ||| % { by: byNode, inMaintenance: inMaintenance, requested: requested },
            local repairing = 'last_over_time(%s[%s])' % [promql.hardwareFailureAnnounced, c.hardwareFailureRepairStuckThreshold],
            local extra = utils.seconds(c.hardwareFailureRepairStuckThreshold) - utils.seconds(c.alerts.GKENodeMaintenanceStuck['for']),
            // A repair threshold at or below the `for` leaves the `for` alone to measure it.
            local held = if extra > 0 then promql.heldFor(c, std.rstripChars(stuck, '\n'), if extra % 3600 == 0 then '%dh' % (extra / 3600) else '%ds' % extra) else stuck,
            expr: promql.withNodeInfo(c, |||
              (
              %(stuck)s
              )
              unless on (%(by)s) %(repairing)s
              or
              (
              %(held)s
              )
              and on (%(by)s) %(repairing)s
            ||| % {
              stuck: utils.indent(stuck, 2),
              by: byNode,
              repairing: repairing,
              held: utils.indent(held, 2),
            }),
            annotations: {
              summary: 'Host maintenance of a node is taking too long.',
              description: '%s%s has been in host maintenance, or waiting for it after perform-maintenance was requested, for more than %s (%s for the repair of failed hardware).' % [capitalized(nodeRef), on, c.alerts.GKENodeMaintenanceStuck['for'], c.hardwareFailureRepairStuckThreshold],
            },
          }),
          alert('GKENodeTerminationImminent', {
            local event = 'gce_instance_maintenance_event{%s, event="TERMINATE_ON_HOST_MAINTENANCE"}' % c.nodeAgentSelector,
            local taint = 'gke_node_impending_termination{%s}' % c.clusterExporterSelector,
            expr: promql.withNodeInfo(c, |||
              group by (%(by)s) (
                %(event)s
                or
                %(taint)s
              )
            ||| % {
              by: byNode,
              event: promql.remembered(c, event, 'agent'),
              taint: promql.remembered(c, taint, 'cluster'),
            }, promql.signalsOf(c, [event, taint])),
            annotations: {
              summary: 'A node is about to stop for host maintenance.',
              description: '%s%s is about to stop for host maintenance: the metadata server reports TERMINATE_ON_HOST_MAINTENANCE or the node has the cloud.google.com/impending-node-termination taint. Its pods are being evicted.' % [capitalized(nodeRef), on],
            },
          }),
          alert('GKETPUSliceMaintenanceScheduled', {
            // A multi-host slice (more than one VM) stops as a whole for the maintenance of any of its hosts.
            // Single-host slices, however many share a pool, are nodes like any other.
            expr: |||
              %(start)s
              and on (%(by)s)
                max by (%(by)s) (%(hosts)s) > 1
            ||| % { start: start, by: byNode, hosts: promql.bridged(c, 'gke_node_tpu_slice_hosts{%s}' % c.clusterExporterSelector) },
            annotations: {
              summary: 'Host maintenance is scheduled in a multi-host TPU slice.',
              description: 'Host maintenance of node {{ $labels.node }} of the multi-host TPU node pool {{ $labels.node_pool }}%s (topology {{ $labels.tpu_topology }}) starts at {{ $value | humanizeTimestamp }}. The slice works as one: the workload of the whole slice stops with this node.' % on,
            },
          }),
          alert('GKEWorkloadMaintenanceScheduled', {
            expr: asNamespace('min by (%s) (%s)\n' % [byWorkload, promql.remembered(c, 'gke_workload_next_maintenance_timestamp_seconds{%s}' % c.clusterExporterSelector, 'cluster')]),
            annotations: {
              summary: 'Host maintenance is scheduled on a node of a workload.',
              description: 'The earliest host maintenance among the GPU, TPU and Spot nodes of {{ $labels.workload_kind }} {{ $labels.%(ns)s }}/{{ $labels.workload }}%(on)s starts at {{ $value | humanizeTimestamp }}{{ with printf `max(last_over_time(gke_workload_nodes{%(job)s, %(ns)s=%%q, workload_kind=%%q, workload=%%q, %(cl)s=%%q}[%(gap)s]))` $labels.%(ns)s $labels.workload_kind $labels.workload $labels.%(cl)s | query }}; it runs on {{ . | first | value | printf "%%.0f" }} such nodes{{ end }}.' % { ns: ns, on: on, cl: c.clusterLabel, gap: c.signalGapTolerance, job: c.clusterExporterSelector },
            },
          }),
          alert('GKEReadinessFinding', {
            expr: asNamespace('max by (%s) (%s) > 0\n' % [
              utils.labelList(c, ['check', ns, 'workload_kind', 'workload']),
              promql.remembered(c, 'gke_readiness_findings{%s}' % c.clusterExporterSelector, 'cluster'),
            ]),
            annotations: {
              summary: 'A workload is not ready for GKE host maintenance.',
              description: 'Readiness check {{ $labels.check }} fails%s for {{ with $labels.workload }}{{ $labels.workload_kind }} {{ $labels.%s }}/{{ . }} ({{ $value | printf "%%.0f" }} pods){{ else }}the cluster{{ end }}, for more than %s: maintenance will disrupt it more than it needs to.' % [on, ns, c.alerts.GKEReadinessFinding['for']],
            },
          }),
        ],
      },
      {
        // A preempted Spot VM's agent answers for seconds: its records and its alert share a group, and the group
        // reads nothing another group records from it.
        name: 'gke-disruption-spot',
        local seen = 'node:gce_instance_preempted:seen',
        local labels = std.join(', ', promql.nodeInfoLabels),
        rules: [
          {
            // The nodes whose agent said it is preempted within the last evaluationInterval (a preempted VM's
            // agent is scraped only for seconds), valued with now: every node agent's series read once a cycle.
            record: seen,
            expr: '(max by (%s) (max_over_time(gce_instance_preempted{%s}[%s])) == 1) * 0 + time()\n' % [byNode, c.nodeAgentSelector, c.evaluationInterval],
          },
          {
            // When each preempted node was last seen so, with the node's labels as they were when it first was:
            // kept from its own previous value for signalGapTolerance after, through the agent's end with its VM
            // and the node's deletion, until an agent answers again for the node that it is not preempted.
            record: promql.preempted,
            expr: |||
              %(recorded)s * 0 + on (%(by)s) group_left () %(seen)s
              or on (%(by)s)
              %(first)s
              or on (%(by)s)
              (
                %(recorded)s > time() - %(memory)d
                unless on (%(by)s) gce_instance_preempted{%(agent)s} == 0
              )
            ||| % {
              by: byNode,
              seen: seen,
              first: utils.indent(promql.withNodeInfo(c, seen), 0),
              agent: c.nodeAgentSelector,
              recorded: promql.preempted,
              memory: utils.seconds(c.signalGapTolerance),
            },
          },
          alert('GKESpotNodePreempted', {
            expr: 'group by (%s, %s) (%s)\n' % [byNode, labels, promql.preempted],
            annotations: {
              summary: 'A Spot node has been preempted.',
              description: 'Compute Engine has preempted Spot %s%s; the VM stops within seconds and its pods with it.' % [nodeRef, on],
            },
          }),
        ],
      },
    ],
  },
}
