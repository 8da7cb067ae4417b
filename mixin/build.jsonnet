// The files `make generate` writes, by path from the repository root: Prometheus rule files, the same rules as
// a prometheus-operator PrometheusRule and a Managed Service for Prometheus Rules resource, and the dashboards.
local mixin = import 'mixin.libsonnet';
local c = mixin._config;
local groups = mixin.prometheusRules.groups + mixin.prometheusAlerts.groups;

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
}
