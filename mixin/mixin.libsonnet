// The gke-disruption-exporter monitoring mixin: prometheusAlerts, prometheusRules and grafanaDashboards over one
// _config (config.libsonnet). Every alert gets a runbook_url from _config.runbookURLPattern.
local utils = import 'lib/utils.libsonnet';

local mixin =
  (import 'config.libsonnet') +
  (import 'alerts/alerts.libsonnet') +
  (import 'rules/rules.libsonnet') +
  (import 'dashboards/dashboards.libsonnet');

mixin {
  prometheusAlerts+:: {
    groups: utils.withRunbookURLs($._config.runbookURLPattern, super.groups),
  },
}
