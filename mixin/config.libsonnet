// Settings of the gke-disruption-exporter mixin. Override any of them from your own jsonnet:
//   (import 'mixin.libsonnet') + { _config+:: { drainLeadTime: '4h' } }
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
    // Show the cluster variable on the dashboards. Turn it on when one datasource holds several clusters.
    showMultiCluster: false,

    // How long before its window starts a reschedulable maintenance fires GKENodeMaintenanceWindowApproaching, which
    // lets the actions service trigger it now (perform-maintenance). Raise it to give the actions policy's
    // maintenance windows more chances; lower it to keep nodes serving longer.
    performMaintenanceLeadTime: '24h',
    // How long before its window starts a maintenance that cannot be rescheduled fires
    // GKENodeMaintenanceNotReschedulable, which drains the node. Keep it above the drain timeout of the actions
    // policy plus a margin, so the drain finishes before GKE stops the VM.
    drainLeadTime: '2h',

    // A node in maintenance, or waiting for it after perform-maintenance was requested, for longer than this fires
    // GKENodeMaintenanceStuck. GPU/TPU host maintenance usually completes within an hour; raise it for machine
    // types you know to take longer.
    maintenanceStuckThreshold: '2h',

    // GKENodePoolInterruptionsHigh fires when a node pool sees more interruptions of one type and reason than the
    // threshold within the window. The window is one of the recorded ones: 1h, 1d or 7d. Lower the threshold for
    // pools of large coupled jobs (one interruption restarts all of it); raise it for large pools.
    interruptionsWindow: '1h',
    interruptionsThreshold: 3,
    // Thresholds for single interruption types, replacing the one above. Spot pools are preempted as a matter of
    // course, so preemptions get a higher bar; add types whose normal rate in your fleet differs.
    interruptionsThresholdByType: { PreemptionEvent: 10 },

    // GKEDisruptionActionFailed looks back this far for failed actions. Raise it if your Alertmanager groups
    // alerts for longer than this (the alert resolves once the window has passed).
    actionFailedWindow: '15m',

    // Where each alert's runbook_url points; %s is the alert name in lower case (the section's anchor). Change it
    // when you host the runbooks elsewhere.
    runbookURLPattern: 'https://github.com/gke-disruption-exporter/gke-disruption-exporter/blob/main/docs/runbooks.md#%s',

    // The PrometheusRule and Managed Service for Prometheus Rules resources. A namespaced Rules resource only sees
    // series scraped in its own namespace: keep ruleNamespace where the exporter runs. Add the labels your
    // prometheus-operator ruleSelector matches to prometheusRuleLabels.
    ruleName: 'gke-disruption-exporter',
    ruleNamespace: 'gke-disruption-exporter',
    prometheusRuleLabels: { 'app.kubernetes.io/name': 'gke-disruption-exporter' },

    // Dashboards: tags to find them by, refresh interval and time zone ('' follows the viewer's browser).
    dashboardTags: ['gke-disruption'],
    dashboardRefresh: '1m',
    dashboardTimezone: '',
  },
}
