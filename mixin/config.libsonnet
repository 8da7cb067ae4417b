// Settings of the gke-disruption-exporter mixin. Override any of them from your own jsonnet:
//   (import 'mixin.libsonnet') + { _config+:: { drainLeadTime: '4h' } }
// Every duration is a Prometheus duration of whole units ('90s', '2h', '1h30m'); internal/demo renders the rules
// for a faster clock by dividing every one of them.
{
  _config+:: {
    // Selectors of the jobs that scrape the three commands. Change them when your scrape configuration names the
    // jobs differently; keep them equality matchers so that absent() can name the missing job.
    clusterExporterSelector: 'job="gke-disruption-exporter-cluster"',
    nodeAgentSelector: 'job="gke-disruption-exporter-node"',
    actionsSelector: 'job="gke-disruption-exporter-actions"',

    // Jobs that must always have a target: GKEDisruptionExporterDown fires when one has none. The node agent is
    // left out because it has no target while no GPU/TPU node exists. Drop the actions selector if you do not run
    // the actions service.
    requiredJobSelectors: [self.clusterExporterSelector, self.actionsSelector],

    // The label that tells clusters apart where one Prometheus (Thanos, Managed Service for Prometheus) holds
    // several. Every aggregation and join keeps it; a single cluster without the label works unchanged. Change it
    // when your multi-cluster setup uses another label name.
    clusterLabel: 'cluster',
    // Multi-cluster: show the cluster variable on the dashboards and name the cluster in alert descriptions. Turn
    // it on when one Prometheus or datasource holds several clusters.
    showMultiCluster: false,
    // The label that carries a workload's namespace on the workload and readiness series. Managed Service for
    // Prometheus and a scrape without honor_labels move the series' own namespace to exported_namespace.
    workloadNamespaceLabel: 'namespace',

    // Gaps. A failed scrape or a restarted node agent leaves a series missing for a while. Every signal is read
    // over this much of its past (last_over_time), so a gap up to this long neither resolves an alert nor
    // restarts its `for`; the price is that an alert resolves this much later once its signal is really gone.
    signalGapTolerance: '15m',
    // gke_node_info is remembered this long for the labels it adds (node_pool, zone, ...): node pools and zones
    // never change for a node, and a label set that changed on a gap would make an alert resolve and fire anew.
    // It is remembered by a recording rule that reads back its own value, so a longer memory costs nothing per cycle.
    nodeInfoMemory: '30m',
    // The answer to "can this maintenance be rescheduled" (node agent or the cluster-side annotation) is
    // remembered this long, for the maintenance it was given about: a new maintenance (another start) starts
    // "unknown". A node with maintenance but no answer for this long has can_reschedule="unknown". A current answer
    // wins; when the answers disagree, "false" wins: a drain is the action that is safe without knowing.
    canRescheduleMemory: '1h',
    // GKEDisruptionExporterDown: a cluster whose required job had a target within this long and has none now is
    // reported per cluster (absent() alone sees a job only when every cluster lacks it).
    clusterMemory: '1d',
    // The step of the subqueries that measure how long a condition has held.
    subqueryStep: '1m',
    // The longest interval at which your Prometheus evaluates these rules. Each group runs on its own timer, so an
    // alert may read another group's recorded series up to this long (and that group's evaluation) late: what
    // holds an action alert back (in maintenance, requested) is held two intervals longer than the memories that
    // make it fire, so that no phase between the groups lets it fire when nothing is pending.
    evaluationInterval: '1m',

    // How long before its window starts a reschedulable maintenance fires GKENodeMaintenanceWindowApproaching, which
    // lets the actions service trigger it now (perform-maintenance). Raise it to give the actions policy's
    // maintenance windows more chances; lower it to keep nodes serving longer.
    performMaintenanceLeadTime: '24h',
    // How long before its window starts a maintenance that cannot be rescheduled fires
    // GKENodeMaintenanceNotReschedulable, which drains the node. Keep it above the drain timeout of the actions
    // policy plus a margin, so the drain finishes before GKE stops the VM.
    drainLeadTime: '2h',
    // The same for a maintenance whose reschedulability is unknown (no node agent and no annotation, such as on
    // Autopilot, or an agent silent for longer than canRescheduleMemory): it is drained too, but only this close
    // to its window, leaving the answer time to arrive. Keep it above the drain timeout as well.
    unknownRescheduleDrainLeadTime: '1h',

    // Maintenance reasons that say the hardware failed, as a regular expression over the comma-joined reasons
    // label (gke.FailureReasonsRegexp): GKENodeHardwareFailureMaintenance fires for them whatever the window.
    hardwareFailureReasons: '(.*,)?FAILURE_.*',

    // GKEHostRepeatedFailures fires for a physical host (gke_node_info's host label, from
    // cloud.google.com/gce-topology-host) that saw at least hostFailuresThreshold failures within hostFailuresWindow:
    // interruptions of the nodes that ran on it plus maintenances announced there for failed hardware. A failure's
    // repair may count twice (the announcement and the interruption it causes). Prometheus must keep at least
    // hostFailuresWindow of data.
    hostFailuresWindow: '28d',
    hostFailuresThreshold: 3,

    // A node in maintenance, or waiting for it after perform-maintenance was requested, for longer than this fires
    // GKENodeMaintenanceStuck. GPU/TPU host maintenance usually completes within an hour; raise it for machine
    // types you know to take longer.
    maintenanceStuckThreshold: '2h',
    // GKENodePoolUpgradeCollidesWithMaintenance: a pool with host maintenance scheduled whose upgrade is due
    // within this long (GKE's auto-upgrade start, or its next maintenance window while a target version waits).
    // Host maintenance is booked up to a week ahead; do both in one downtime where you can.
    upgradeCollisionWindow: '7d',
    // GKENodePoolUpgradeStuck: an upgrade whose done-node count has not moved for this long. A surge upgrade
    // waits up to an hour for PodDisruptionBudgets on each node.
    upgradeStuckThreshold: '2h',
    // GKENodeTerminationApproaching: how long before a VM's maximum run duration ends to warn, so that its jobs
    // checkpoint and move.
    terminationLeadTime: '1h',
    // The same for the repair of failed hardware (a maintenance announced with FAILURE_* reasons within this long):
    // GKE repairs the host, which takes hours (4 h 30 m to 5 h from the request to Ready in the field). Keep it
    // above maintenanceStuckThreshold.
    hardwareFailureRepairStuckThreshold: '8h',

    // The windows within which the nodes with maintenance coming are counted per pool
    // (node_pool:gke_node_maintenance_scheduled:count_next24h), by the name the recording rule ends with. The
    // dashboards use both.
    maintenanceScheduledWindows: { '24h': '24h', '7d': '7d' },

    // The windows the interruption counts are recorded over, by the name the recording rule ends with
    // (node_pool_type_reason:gke_node_pool_interruptions:increase1h). The dashboards use all three.
    interruptionsWindows: { '1h': '1h', '1d': '1d', '7d': '7d' },
    // GKENodePoolInterruptionsHigh fires when a node pool sees more interruptions of one type and reason than the
    // threshold within the window, the name of one of interruptionsWindows. Lower the threshold for pools of large coupled
    // jobs (one interruption restarts all of it); raise it for large pools.
    interruptionsWindow: '1h',
    interruptionsThreshold: 3,
    // Thresholds for single interruption types, replacing the one above. Spot pools are preempted as a matter of
    // course, so preemptions get a higher bar; add types whose normal rate in your fleet differs.
    interruptionsThresholdByType: { PreemptionEvent: 10 },

    // GKEDisruptionActionFailed looks back this far for failed actions. Raise it if your Alertmanager groups
    // alerts for longer than this (the alert resolves once the window has passed).
    actionFailedWindow: '15m',

    // GKENodeAgentMissing: the metadata server counts as unreachable when the node agent's last successful read
    // of a path is older than this (its hanging GETs return at least every few minutes).
    metadataStaleThreshold: '10m',
    // GKEDisruptionCloudMonitoringStale: Cloud Monitoring's last successful query is older than this, or an
    // exporter has not succeeded once for this long since it started. The collector queries every
    // --cloudmonitoring.interval (60s).
    cloudMonitoringStaleThreshold: '15m',
    // GKEDisruptionWatchFailing: more watch errors of one resource than the threshold within the window.
    watchErrorsWindow: '15m',
    watchErrorsThreshold: 3,

    // GKEDisruptionActionsStalled: a node the actions service keeps cordoned after its work is done, or work
    // waiting (for a window, a budget, the cluster cap, a pause), for longer than these; or no replica leading
    // for the last actionsNoLeaderFor (longer than a scrape gap, so that a leader's gap is not taken for none).
    actionsCordonedThreshold: '6h',
    actionsWaitingThreshold: '24h',
    actionsNoLeaderFor: '15m',

    // GPU faults. What each GPU Xid asks for, from the immediate action of NVIDIA's Xid catalog: 'repair' fires
    // GKENodeGPUFailed (the automation reports the host, or drains the node), 'alert' fires GKENodeGPUErrors (a
    // person decodes it), 'ignore' records it and nothing more. Keys are Xids, plus row_remap_failure for dcgm-exporter's
    // DCGM_FI_DEV_ROW_REMAP_FAILURE == 1. Override single entries: xidActions+: { '31': 'alert' }.
    xidActions: {
      '48': 'repair',  // double-bit ECC error: the memory is uncorrectable; reset the GPU, then have the host checked
      '64': 'repair',  // ECC page retirement or row remapping could not be recorded: the GPU cannot heal its memory
      '79': 'repair',  // GPU has fallen off the bus: nothing reaches it until the host is serviced
      '95': 'repair',  // uncontained ECC error: every application on the GPU is affected; reset needed
      '119': 'repair',  // GSP RPC timeout: the GPU's firmware stopped answering
      '120': 'repair',  // GSP error: the firmware failed
      '123': 'repair',  // a firmware (SPI PMU) RPC of the GPU failed: only a reset recovers it
      '136': 'repair',  // an error NVIDIA's catalog clears only by resetting the GPU
      '140': 'repair',  // unrecovered ECC error: the memory is uncorrectable
      '143': 'repair',  // GPU initialization failure: the GPU does not come up
      row_remap_failure: 'repair',  // a memory row could not be remapped: the GPU keeps faulty memory in use
      '74': 'alert',  // NVLink error: decode it; it may come from the peer GPU
      '144': 'alert',  // NVLink SAW error: decode it; it may come from the peer GPU
      '145': 'alert',  // NVLink RLW error: decode it; it may come from the peer GPU
      '146': 'alert',  // NVLink TLW error: decode it; it may come from the peer GPU
      '147': 'alert',  // NVLink TREX error: decode it; it may come from the peer GPU
      '148': 'alert',  // NVLink NVLPW_CTRL error: decode it; it may come from the peer GPU
      '149': 'alert',  // NVLink NETIR error: decode it; it may come from the peer GPU
      '150': 'alert',  // NVLink MSE error: decode it; it may come from the peer GPU
      '13': 'ignore',  // graphics engine exception: an application fault
      '31': 'ignore',  // GPU memory page fault: an application's illegal address
      '43': 'ignore',  // GPU stopped processing: the application was stopped, the GPU is fine
      '45': 'ignore',  // preemptive cleanup: a side effect of another fault or of stopping an application
      '63': 'ignore',  // ECC page retirement or row remapping recorded: the GPU healed itself
      '92': 'ignore',  // high single-bit ECC error rate: every error was corrected
      '94': 'ignore',  // contained ECC error: only the application on that memory is affected
      '154': 'ignore',  // GPU recovery action changed: a side effect (seen on every GPU after an Xid 79)
    },
    // An Xid absent from xidActions, and xid="unknown" (a device plugin condition whose reason does not read).
    // NVIDIA adds Xids with every driver; a new one is worth a look by a person, never an automatic repair.
    unknownXidAction: 'alert',
    // GKENodeGPUErrors also fires for a node whose faults (Xids not ignored) started at least this many times within
    // the window: a GPU that keeps faulting is worth a look even when every fault was repaired or cleared.
    gpuErrorsRepeatThreshold: 3,
    gpuErrorsRepeatWindow: '24h',
    // GKENodeGPUFailed asks for report-faulty-host (fault_behavior="XID") on the machine types GKE can report a host
    // of (gke.FaultReportSupported: A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High with 8 GPUs), else for drain.
    faultyHostReportMachineTypes: 'a4x-maxgpu-.*|a4x-highgpu-4g|a4-highgpu-8g|a3-ultragpu-8g|a3-megagpu-8g|a3-highgpu-8g',
    // GKEGPUFaultsCorrelated: at least `nodes` nodes of one topology group with a fault to repair that started within
    // `window`: a shared cause (power, cooling, fabric) that repairing node by node would not fix. The group is the
    // node's gke_node_info label `topologyLabel` (block, from cloud.google.com/gce-topology-block, or subblock), else
    // its node pool. It holds while any node of the group still has such a fault.
    gpuFaultsCorrelation: { nodes: 3, window: '10m', topologyLabel: 'block' },
    // NVIDIA's dcgm-exporter as a second source of GPU faults, where you run it: DCGM_FI_DEV_XID_ERRORS (the last Xid
    // per GPU, with err_code), DCGM_FI_DEV_ROW_REMAP_FAILURE and, with xidErrorsCount, DCGM_EXP_XID_ERRORS_COUNT (a
    // windowed count per xid). The node is its Hostname or hostname label. selector picks its job. Managed Service
    // for Prometheus: a namespaced Rules resource sees only its own namespace, so read dcgm-exporter from
    // ClusterRules or GlobalRules.
    dcgm: { enabled: false, selector: 'job=~".*dcgm-exporter"', xidErrorsCount: false },

    // Every alert's severity and `for` ('0s' fires at once). `for` counts over bridged signals (see
    // signalGapTolerance), so a gap does not restart it.
    alerts: {
      GKENodeMaintenanceScheduled: { severity: 'info', 'for': '5m' },
      GKENodeMaintenanceWindowApproaching: { severity: 'warning', 'for': '5m' },
      GKENodeMaintenanceNotReschedulable: { severity: 'warning', 'for': '5m' },
      GKENodeMaintenanceInProgress: { severity: 'info', 'for': '0s' },
      GKENodeMaintenanceStuck: { severity: 'critical', 'for': $._config.maintenanceStuckThreshold },
      GKENodeTerminationImminent: { severity: 'warning', 'for': '0s' },
      // Fires within minutes of the announcement: the node is broken already.
      GKENodeHardwareFailureMaintenance: { severity: 'critical', 'for': '2m' },
      // GKE's Error is final for the report: no hold time.
      GKENodeReportFaultyHostFailed: { severity: 'warning', 'for': '0s' },
      GKEHostRepeatedFailures: { severity: 'warning', 'for': '0s' },
      GKESpotNodePreempted: { severity: 'warning', 'for': '0s' },
      GKETPUSliceMaintenanceScheduled: { severity: 'warning', 'for': '5m' },
      GKENodePoolInterruptionsHigh: { severity: 'warning', 'for': '0s' },
      GKEWorkloadMaintenanceScheduled: { severity: 'info', 'for': '5m' },
      // The hold time of a failing readiness check: a finding that a rollout fixes within it does not alert.
      GKEReadinessFinding: { severity: 'warning', 'for': '1h' },
      GKEDisruptionExporterDown: { severity: 'warning', 'for': '15m' },
      GKEDisruptionCollectorFailing: { severity: 'warning', 'for': '15m' },
      GKEDisruptionActionFailed: { severity: 'warning', 'for': '0s' },
      // A new node gets its agent within a minute or two; a node without one for this long is blind.
      GKENodeAgentMissing: { severity: 'warning', 'for': '15m' },
      GKEDisruptionMetadataPathUnsupported: { severity: 'warning', 'for': '15m' },
      GKEDisruptionCloudMonitoringStale: { severity: 'warning', 'for': '0s' },
      GKEDisruptionWatchFailing: { severity: 'warning', 'for': '0s' },
      GKEDisruptionActionsStalled: { severity: 'warning', 'for': '0s' },
      GKENodePoolUpgradeCollidesWithMaintenance: { severity: 'warning', 'for': '15m' },
      // The threshold itself is upgradeStuckThreshold; the `for` rides out a missed poll of the GKE API.
      GKENodePoolUpgradeStuck: { severity: 'warning', 'for': '15m' },
      GKENodeTerminationApproaching: { severity: 'warning', 'for': '0s' },
      // A GPU fault is acted on within an evaluation: the GPU is broken already.
      GKENodeGPUFailed: { severity: 'critical', 'for': '0s' },
      GKENodeGPUErrors: { severity: 'warning', 'for': '0s' },
      GKEGPUFaultsCorrelated: { severity: 'critical', 'for': '0s' },
    },

    // Where each alert's runbook_url points; %s is the alert name in lower case (the section's anchor). Change it
    // when you host the runbooks elsewhere.
    runbookURLPattern: 'https://github.com/gke-disruption-exporter/gke-disruption-exporter/blob/main/docs/runbooks.md#%s',

    // The PrometheusRule and Managed Service for Prometheus Rules resources. A namespaced Rules resource only sees
    // series scraped in its own namespace: keep ruleNamespace where the exporter runs. Add the labels your
    // prometheus-operator ruleSelector matches to prometheusRuleLabels.
    ruleName: 'gke-disruption-exporter',
    ruleNamespace: 'gke-disruption-exporter',
    prometheusRuleLabels: { 'app.kubernetes.io/name': 'gke-disruption-exporter' },

    // Dashboards: title prefix, uid prefix (uids are the prefix and a fixed name, so links and bookmarks survive
    // renames), tags to find them by, which Prometheus datasources the datasource variable offers (a regex over
    // their names, '' for all), refresh interval and time zone ('' follows the viewer's browser).
    dashboardNamePrefix: 'GKE disruption / ',
    dashboardUIDPrefix: 'gke-disruption-',
    dashboardTags: ['gke-disruption'],
    datasourceFilterRegex: '',
    dashboardRefresh: '1m',
    dashboardTimezone: '',
  },
}
