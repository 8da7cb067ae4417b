// GPU faults seen in seconds: the Xids of GKE's GPU device plugin (node condition XidCriticalError of the node's
// current boot) and, where it runs, of NVIDIA's dcgm-exporter, recorded as one sparse series per node and Xid;
// _config.xidActions says what each Xid asks for.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

local nodeRef = 'node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}';
local actions = ['repair', 'alert', 'ignore'];

{
  local c = $._config,
  local selector = c.clusterExporterSelector,
  local dcgm = c.dcgm,
  local byNode = utils.labelList(c, ['node']),
  local byXid = utils.labelList(c, ['node', 'xid']),
  local topology = c.gpuFaultsCorrelation.topologyLabel,
  local byGroup = utils.labelList(c, [topology, 'node_pool']),
  local gap = c.signalGapTolerance,

  assert std.all([std.member(actions, c.xidActions[x]) for x in std.objectFields(c.xidActions)]) :
         'every entry of xidActions is one of %s' % std.join(', ', actions),
  assert std.member(actions, c.unknownXidAction) : 'unknownXidAction is one of %s' % std.join(', ', actions),
  assert std.member(promql.nodeTopologyLabels, topology) :
         'gpuFaultsCorrelation.topologyLabel is one of %s' % std.join(', ', promql.nodeTopologyLabels),

  local xidMatcher(action) = promql.xidMatcher(c, action),
  local notXidMatcher(action) = promql.notXidMatcher(c, action),

  // Recorded by the rules below.
  local dcgmSeen = 'node_xid:dcgm_xid_errors:seen',
  local dcgmRepaired = 'node_xid:dcgm_xid_errors:repaired',
  local current = 'node_xid:gke_node_gpu_xid:current',
  local since = promql.gpuFaultSince,
  local started = 'node_xid:gke_node_gpu_xid:started',
  local correlated = 'topology:gke_node_gpu_xid_repair:correlated',

  // dcgmByNode is a dcgm-exporter expression by node and the labels of by: the node is its Hostname label, else
  // its hostname label (the exporter's version decides), else the node label a scrape's relabelling gave it.
  local dcgmByNode(expr, by) = |||
    group by (%(out)s) (
      label_replace(
        label_replace(
          group by (%(in)s) (%(expr)s),
          "node", "$1", "hostname", "(.+)"
        ),
        "node", "$1", "Hostname", "(.+)"
      )
    )
  ||| % {
    out: utils.labelList(c, ['node'] + by),
    'in': utils.labelList(c, ['node', 'Hostname', 'hostname'] + by),
    expr: expr,
  },

  // The nodes whose dcgm-exporter answered its last scrape: it exposes DCGM_FI_DEV_XID_ERRORS for every GPU.
  local dcgmCurrent = dcgmByNode('DCGM_FI_DEV_XID_ERRORS{%s}' % dcgm.selector, []),

  // The device plugin's faults (its condition of the node's current boot, remembered through a gap of the cluster
  // exporter), valued with the condition's transition time, 0 where the collector shows none. A condition whose
  // reason does not read (the collector keeps its time, not its Xids) is a fault of Xid "unknown", which gets
  // unknownXidAction.
  local conditionXids = 'group by (%s) (\n%s\n)' % [byXid, utils.indent(promql.remembered(c, 'gke_node_gpu_xid_critical{%s}' % selector, 'cluster'), 2)],
  local conditionSince = 'max by (%s) (\n%s\n)' % [byNode, utils.indent(promql.remembered(c, 'gke_node_gpu_xid_critical_since_timestamp_seconds{%s}' % selector, 'cluster'), 2)],
  local conditionFaults = |||
    %(xids)s
    * on (%(byNode)s) group_left ()
    %(since)s
    or on (%(byNode)s)
    label_replace(
    %(sinceInner)s,
      "xid", "unknown", "", ""
    )
    or on (%(by)s)
    %(xids)s * 0
  ||| % { by: byXid, byNode: byNode, xids: conditionXids, since: conditionSince, sinceInner: utils.indent(conditionSince, 2) },

  // A repair under way: GKE's maintenance of the node, or its report of the host (before its Error).
  local repairUnderWay = 'gke_node_maintenance_state{%s} or gke_node_report_and_replace_status{%s, status!="Error"}' % [selector, selector],

  local failed = '%s{%s}' % [since, xidMatcher('repair')],

  // groupOf labels each node of nodes (per node) with its topology group as the cluster exporter shows it now: the
  // topology label where the node has one (its node pool dropped), else its node pool. Nodes it does not show are
  // left out; the correlation holds through its gap instead (the node info memory is recorded after these rules,
  // from their faults).
  local groupOf(nodes) = 'label_replace(\n  %s\n  * on (%s) group_left (node_pool, %s)\n%s,\n  "node_pool", "", "%s", ".+"\n)' % [
    nodes,
    byNode,
    topology,
    utils.indent(promql.nodeInfoOf(c, nodes, [topology]), 2),
    topology,
  ],
  local failedNodes(filter) = 'group by (%s) (%s%s)' % [byNode, failed, filter],

  // The GPU fault rules, in order: each reads those before it in the same evaluation, and its own and later ones'
  // values of the previous cycle. They open the maintenance rules group (rules/rules.libsonnet), whose memory of
  // the nodes' labels reads the faults in the same evaluation.
  gpuFaultRules:: (
    if dcgm.enabled then [
      {
        // dcgm-exporter's GPU faults, by node and Xid, valued with when it last showed them: the last Xid of
        // each GPU (err_code), a failed row remapping and, when that metric is on, the Xids counted within its
        // window. Remembered through a gap of the node's exporter for signalGapTolerance; once it answers again
        // without a fault, the fault is gone.
        record: dcgmSeen,
        expr: |||
          group by (%(by)s) (
          %(sightings)s
          ) * 0 + time()
          or on (%(by)s)
          (
            %(seen)s
            unless on (%(byNode)s)
          %(current)s
          ) > time() - %(gap)d
        ||| % {
          by: byXid,
          byNode: byNode,
          seen: dcgmSeen,
          gap: utils.seconds(gap),
          current: utils.indent(dcgmCurrent, 2),
          sightings: utils.indent(std.join('\nor\n', [
            'label_replace(\n%s,\n  "xid", "$1", "err_code", "(.+)"\n)' % utils.indent(dcgmByNode('DCGM_FI_DEV_XID_ERRORS{%s, err_code!=""} > 0' % dcgm.selector, ['err_code']), 2),
            'label_replace(\n%s,\n  "xid", "row_remap_failure", "", ""\n)' % utils.indent(dcgmByNode('DCGM_FI_DEV_ROW_REMAP_FAILURE{%s} == 1' % dcgm.selector, []), 2),
          ] + (if dcgm.xidErrorsCount then [dcgmByNode('DCGM_EXP_XID_ERRORS_COUNT{%s} > 0' % dcgm.selector, ['xid'])] else [])), 2),
        },
      },
      {
        // The dcgm faults that outlive a repair of their node, from when the repair is seen until the
        // exporter stops showing them: a sticky gauge says nothing about the repaired GPU.
        record: dcgmRepaired,
        expr: |||
          group by (%(by)s) (
            %(repaired)s and on (%(by)s) %(seen)s
            or on (%(by)s)
            %(seen)s and on (%(byNode)s) (%(repair)s)
          )
        ||| % { by: byXid, byNode: byNode, repaired: dcgmRepaired, seen: dcgmSeen, repair: repairUnderWay },
      },
    ] else []
  ) + [
    {
      // The GPU faults now, one series per node and Xid: the device plugin's, valued with its condition's
      // transition time, and dcgm-exporter's (valued 0) except those a repair of their node outlived (its
      // gauge keeps the last Xid until the exporter restarts).
      record: current,
      expr: if dcgm.enabled
      then '%sor on (%s)\ngroup by (%s) (%s unless on (%s) %s) * 0\n' % [conditionFaults, byXid, byXid, dcgmSeen, byXid, dcgmRepaired]
      else conditionFaults,
    },
    {
      // A sample when a fault starts: not seen within signalGapTolerance before. GKENodeGPUErrors counts them.
      record: started,
      expr: '%s unless on (%s) last_over_time(%s[%s])\n' % [current, byXid, since, gap],
    },
    {
      // Every GPU fault now, valued with when it was first seen: the condition's transition time, else the
      // first cycle it was recorded in.
      record: since,
      expr: |||
        %(current)s > 0
        or on (%(by)s)
        %(since)s and on (%(by)s) %(current)s
        or on (%(by)s)
        %(current)s * 0 + time()
      ||| % { by: byXid, since: since, current: current },
    },
    {
      // The topology groups where several nodes got a fault to repair within the window, valued with their
      // nodes with such a fault; held from its own previous value while any node of the group has one, and
      // through a gap of the cluster exporter.
      record: correlated,
      expr: |||
        count by (%(by)s) (
        %(failed)s
        )
        and on (%(by)s)
        (
          count by (%(by)s) (
        %(recent)s
          ) >= %(nodes)d
          or on (%(by)s)
          %(correlated)s
        )
        or on (%(by)s)
        (
          %(correlated)s unless on (%(cluster)s) %(exporterCurrent)s
        )
      ||| % {
        by: byGroup,
        cluster: c.clusterLabel,
        exporterCurrent: promql.exporterCurrent(c),
        failed: utils.indent(groupOf(failedNodes('')), 2),
        recent: utils.indent(groupOf(failedNodes(' > time() - %d' % utils.seconds(c.gpuFaultsCorrelation.window))), 4),
        nodes: c.gpuFaultsCorrelation.nodes,
        correlated: correlated,
      },
    },
  ],

  prometheusAlerts+:: {
    local on = utils.clusterRef(c),
    local alert(name, rule) = utils.alertRule(c, name, rule),
    // What holds the repair back outlasts what makes it fire (promql.outlasting): GKE's maintenance, a request
    // for it, GKE's report of the host.
    local held = [
      promql.outlasting(c, 'gke_node_maintenance_state{%s}' % selector),
      promql.outlasting(c, 'gke_node_perform_maintenance_requested{%s}' % selector),
      promql.outlasting(c, 'gke_node_report_and_replace_status{%s, status!="Error"}' % selector),
    ],
    // The action for each failed node: report-faulty-host where GKE can report its host (by the machine type the
    // cluster exporter shows now, else the remembered one), else drain.
    // The nodes of failed whose machine type (as the cluster exporter shows it, else as remembered through its gap)
    // matches machineType: a node nothing is known of gets no action until its info is seen, so a fault seen first by
    // dcgm-exporter (a cluster exporter restarting) never picks the wrong one.
    local withMachineType(machineType) = |||
      group by (%(by)s) (
        gke_node_info{%(selector)s, machine_type%(machineType)s} and on (%(by)s) %(failed)s
      )
      or on (%(by)s)
      group by (%(by)s) (
        %(remembered)s{machine_type%(machineType)s} unless on (%(by)s) gke_node_info{%(selector)s}
      )
    ||| % { by: byNode, selector: selector, machineType: machineType, failed: failed, remembered: promql.nodeInfoLastSeen },
    local actionOf = |||
      label_replace(
        label_replace(
      %(replaceable)s,
          "gke_disruption_action", "report-faulty-host", "", ""
        ),
        "fault_behavior", "XID", "", ""
      )
      or on (%(by)s)
      label_replace(
      %(other)s,
        "gke_disruption_action", "drain", "", ""
      )
    ||| % {
      by: byNode,
      replaceable: utils.indent(withMachineType('=~"%s"' % c.faultyHostReportMachineTypes), 4),
      other: utils.indent(withMachineType('!~"%s"' % c.faultyHostReportMachineTypes), 2),
    },

    groups+: [
      {
        name: 'gke-disruption-gpu',
        rules: [
          alert('GKENodeGPUFailed', {
            expr: |||
              (
              %(failed)s
              )
              * on (%(by)s) group_left (gke_disruption_action, fault_behavior)
              (
              %(action)s
              )
              %(held)s
            ||| % {
              failed: utils.indent(promql.withNodeInfo(c, failed, extra=[topology]), 2),
              by: byNode,
              action: utils.indent(actionOf, 2),
              held: std.join('\n', ['unless on (%s) %s' % [byNode, h] for h in held]),
            },
            annotations: {
              summary: 'A GPU of a node failed.',
              description: 'GPU Xid {{ $labels.xid }} on %s%s, first seen {{ $value | humanizeTimestamp }}: the GPU needs a repair. {{ if eq $labels.gke_disruption_action "report-faulty-host" }}The actions service reports the host to GKE as faulty (fault-behavior XID), which evicts the pods and replaces the host{{ else }}The actions service drains the node{{ end }}, as the pool\'s repair settings allow.' % [nodeRef, on],
            },
          }),
          alert('GKENodeGPUErrors', {
            expr: promql.withNodeInfo(c, |||
              label_replace(%(alert)s, "problem", "xid", "", "")
              or
              label_replace(
                sum by (%(byNode)s) (count_over_time(%(started)s{%(counted)s}[%(window)s])) >= %(threshold)d,
                "problem", "repeated", "", ""
              )
            ||| % {
              alert: '%s{%s}' % [since, xidMatcher('alert')],
              byNode: byNode,
              started: started,
              counted: notXidMatcher('ignore'),
              window: c.gpuErrorsRepeatWindow,
              threshold: c.gpuErrorsRepeatThreshold,
            }, extra=[topology]),
            annotations: {
              summary: 'A GPU of a node reports errors a person should look at.',
              description: '{{ if eq $labels.problem "xid" }}GPU Xid {{ $labels.xid }} on %(node)s%(on)s, first seen {{ $value | humanizeTimestamp }}: decode it (an NVLink error may come from the peer GPU) before repairing anything.{{ else }}The GPUs of %(node)s%(on)s faulted {{ $value }} times within %(window)s: they keep failing, however each fault ended.{{ end }}' % {
                node: nodeRef,
                on: on,
                window: c.gpuErrorsRepeatWindow,
              },
            },
          }),
          alert('GKEGPUFaultsCorrelated', {
            expr: correlated + '\n',
            annotations: {
              summary: 'Several nodes of one topology group have failed GPUs.',
              description: '{{ $value }} nodes of {{ with $labels.%(topology)s }}topology %(topology)s {{ . }}{{ else }}node pool {{ $labels.node_pool }}{{ end }}%(on)s have GPU faults to repair, %(nodes)d or more of them within %(window)s: a shared cause (power, cooling, the fabric) is more likely than as many broken GPUs. The actions service holds automatic repairs there.' % {
                topology: topology,
                on: on,
                nodes: c.gpuFaultsCorrelation.nodes,
                window: c.gpuFaultsCorrelation.window,
              },
            },
          }),
        ],
      },
    ],
  },
}
