// Alerts on host maintenance of single nodes, from the node labels (cluster exporter) and the GCE metadata server
// (node agent). Every alert here carries the node label and the node's pool and accelerator labels.
local promql = import '../lib/promql.libsonnet';
local utils = import '../lib/utils.libsonnet';

// How a description names the node: its name, and its pool when known.
local nodeRef = 'node {{ $labels.node }}{{ with $labels.node_pool }} (node pool {{ . }}){{ end }}';

{
  prometheusAlerts+:: {
    local c = $._config,
    local byNode = utils.labelList(c, ['node']),
    local start = 'node:gke_node_maintenance_start_timestamp_seconds:min',
    local upcomingInfo = 'gce_instance_upcoming_maintenance_info{%s' % c.nodeAgentSelector,
    local inMaintenance = 'gke_node_maintenance_state{%s}' % c.clusterExporterSelector,

    groups+: [
      {
        name: 'gke-disruption-maintenance',
        rules: [
          {
            alert: 'GKENodeMaintenanceScheduled',
            expr: start + '\n',
            'for': '5m',
            labels: { severity: 'info' },
            annotations: {
              summary: 'Host maintenance is scheduled for a node.',
              description: 'Host maintenance of %s starts at {{ $value | humanizeTimestamp }}. GPU, TPU and Spot VMs cannot live-migrate: the node and its pods stop for the maintenance.' % nodeRef,
            },
          },
          {
            alert: 'GKENodeMaintenanceWindowApproaching',
            expr: |||
              (
                (%(start)s < time() + %(lead)d)
                * on (%(by)s) group_left (can_reschedule)
                  group by (%(by)s, can_reschedule) (%(info)s, can_reschedule="true"})
              )
              unless on (%(by)s) %(inMaintenance)s
              unless on (%(by)s) gke_node_perform_maintenance_requested{%(cluster)s}
            ||| % {
              start: start,
              lead: utils.seconds(c.performMaintenanceLeadTime),
              by: byNode,
              info: upcomingInfo,
              inMaintenance: inMaintenance,
              cluster: c.clusterExporterSelector,
            },
            'for': '5m',
            labels: { severity: 'warning', gke_disruption_action: 'perform-maintenance' },
            annotations: {
              summary: 'A reschedulable host maintenance of a node is approaching.',
              description: 'Host maintenance of %s starts at {{ $value | humanizeTimestamp }}, within %s, and GKE can start it earlier at a time of our choosing. The actions service triggers it (label cloud.google.com/perform-maintenance=true) when its policy allows.' % [nodeRef, c.performMaintenanceLeadTime],
            },
          },
          {
            alert: 'GKENodeMaintenanceNotReschedulable',
            // A node without upcoming-maintenance info (no node agent on it) counts as not reschedulable: draining
            // is the action that is safe without knowing.
            expr: |||
              (
                (%(start)s < time() + %(lead)d)
                * on (%(by)s) group_left (can_reschedule)
                  group by (%(by)s, can_reschedule) (%(info)s, can_reschedule!="true"})
                or
                (
                  (%(start)s < time() + %(lead)d)
                  unless on (%(by)s) %(info)s}
                )
              )
              unless on (%(by)s) %(inMaintenance)s
            ||| % {
              start: start,
              lead: utils.seconds(c.drainLeadTime),
              by: byNode,
              info: upcomingInfo,
              inMaintenance: inMaintenance,
            },
            'for': '5m',
            labels: { severity: 'warning', gke_disruption_action: 'drain' },
            annotations: {
              summary: 'A host maintenance that cannot be rescheduled is approaching a node.',
              description: 'Host maintenance of %s starts at {{ $value | humanizeTimestamp }}, within %s, and cannot be rescheduled{{ if not $labels.can_reschedule }} (the node agent reports no upcoming maintenance for it){{ end }}. The node should be drained before GKE stops it; the actions service drains it when its policy allows.' % [nodeRef, c.drainLeadTime],
            },
          },
          {
            alert: 'GKENodeMaintenanceInProgress',
            expr: promql.withNodeInfo(c, 'group by (%s, state) (%s)' % [byNode, inMaintenance]),
            labels: { severity: 'info' },
            annotations: {
              summary: 'A node is in host maintenance.',
              description: 'Host maintenance of %s is in progress (state {{ $labels.state }}). GKE evicts its pods and clears the state when the maintenance is done.' % nodeRef,
            },
          },
          {
            alert: 'GKENodeMaintenanceStuck',
            // One series per node from the request to the end of the maintenance, so that `for` measures both.
            expr: promql.withNodeInfo(c, |||
              group by (%(by)s) (
                %(inMaintenance)s
                or
                gke_node_perform_maintenance_requested{%(cluster)s}
              )
            ||| % { by: byNode, inMaintenance: inMaintenance, cluster: c.clusterExporterSelector }),
            'for': c.maintenanceStuckThreshold,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Host maintenance of a node is taking too long.',
              description: '%s has been in host maintenance, or waiting for it after perform-maintenance was requested, for more than %s.' % [std.asciiUpper(nodeRef[0]) + nodeRef[1:], c.maintenanceStuckThreshold],
            },
          },
          {
            alert: 'GKENodeTerminationImminent',
            expr: promql.withNodeInfo(c, |||
              group by (%(by)s) (
                gce_instance_maintenance_event{%(node)s, event="TERMINATE_ON_HOST_MAINTENANCE"}
                or
                gke_node_impending_termination{%(cluster)s}
              )
            ||| % { by: byNode, node: c.nodeAgentSelector, cluster: c.clusterExporterSelector }),
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A node is about to stop for host maintenance.',
              description: '%s is about to stop for host maintenance: the metadata server reports TERMINATE_ON_HOST_MAINTENANCE or the node has the cloud.google.com/impending-node-termination taint. Its pods are being evicted.' % (std.asciiUpper(nodeRef[0]) + nodeRef[1:]),
            },
          },
          {
            alert: 'GKESpotNodePreempted',
            expr: promql.withNodeInfo(c, 'group by (%s) (gce_instance_preempted{%s} == 1)' % [byNode, c.nodeAgentSelector]),
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A Spot node has been preempted.',
              description: 'Compute Engine has preempted Spot %s; the VM stops within seconds and its pods with it.' % nodeRef,
            },
          },
          {
            alert: 'GKETPUSliceMaintenanceScheduled',
            // A multi-host slice is a node pool whose nodes share a TPU topology; maintenance of one host stops
            // the workload of the whole slice.
            expr: |||
              %(start)s{tpu_topology!=""}
              and on (%(byPool)s, tpu_topology)
                (count by (%(byPool)s, tpu_topology) (gke_node_info{%(cluster)s, tpu_topology!=""}) > 1)
            ||| % { start: start, byPool: utils.labelList(c, ['node_pool']), cluster: c.clusterExporterSelector },
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Host maintenance is scheduled in a multi-host TPU slice.',
              description: 'Host maintenance of node {{ $labels.node }} of the multi-host TPU node pool {{ $labels.node_pool }} (topology {{ $labels.tpu_topology }}) starts at {{ $value | humanizeTimestamp }}. The slice works as one: the workload of the whole node pool stops with this node.',
            },
          },
        ],
      },
    ],
  },
}
