// The files `make generate` writes, by path from the repository root: Prometheus rule files, the same rules as
// a prometheus-operator PrometheusRule and a Managed Service for Prometheus Rules resource (for the labels their
// scrape configurations in deploy/ produce), and the dashboards twice: for a scrape that honors the series' labels,
// and for the labels the scrape configurations in deploy/ produce.
local mixin = import 'mixin.libsonnet';
local c = mixin._config;
// The shipped scrape configurations (ServiceMonitor without honorLabels, PodMonitoring) keep the target's
// namespace in `namespace` and move the workload series' own to exported_namespace: the rule resources read it there.
local scraped = mixin { _config+:: { workloadNamespaceLabel: 'exported_namespace' } };
local groups = scraped.prometheusRules.groups + scraped.prometheusAlerts.groups;

{
  'rules/rules.yaml': mixin.prometheusRules,
  'rules/alerts.yaml': mixin.prometheusAlerts,
  'rules/prometheusrule.yaml': {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: c.ruleName, namespace: c.ruleNamespace, labels: c.prometheusRuleLabels },
    spec: { groups: groups },
  },
  'rules/gmp-rules.yaml': {
    apiVersion: 'monitoring.googleapis.com/v1',
    kind: 'Rules',
    metadata: { name: c.ruleName, namespace: c.ruleNamespace },
    spec: { groups: groups },
  },
} + {
  ['dashboards/' + name]: mixin.grafanaDashboards[name]
  for name in std.objectFields(mixin.grafanaDashboards)
} + {
  ['dashboards/operator-gmp/' + name]: scraped.grafanaDashboards[name]
  for name in std.objectFields(scraped.grafanaDashboards)
}
