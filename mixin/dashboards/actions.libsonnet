// Actions: what the actions service decided and did, what it is doing, how long it takes, and its webhook.
local g = import '../lib/grafana.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local sel = '%s, %s' % [c.actionsSelector, common.clusterMatcher(c)],
    local actions(extra='') = 'gke_disruption_actions_total{%s%s}' % [sel, extra],
    // count is how many actions matching extra ended within window, by the labels in by.
    local count(by, extra, window) = 'sum by (%s) (increase(%s[%s]))' % [by, actions(extra), window],
    // total is the increase of counter (a selector) over the dashboard's time range.
    local total(counter) = 'round(sum(increase(%s[$__range]))) or vector(0)' % counter,
    // Actions are rare: the quantiles are over the actions that ended within 6 hours.
    local quantile(q) =
      'histogram_quantile(%s, sum by (action, le) (increase(gke_disruption_action_duration_seconds_bucket{%s}[6h])))' % [q, sel],
    // One value per cluster and labels, whichever replica exposes it (the leader does the work).
    local leaderView(metric, by) = 'max by (%s) (%s{%s})' % [utils.labelList(c, by), metric, sel],

    'gke-disruption-actions.json': g.dashboard(
      c,
      'actions',
      'Actions',
      'Decisions and actions of the actions service (perform-maintenance, drain) and its Alertmanager webhook.',
      [common.clusterVariable(c)],
      [
        g.row('Actions'),
        {
          height: 4,
          widths: [4, 3, 3, 3, 3, 4, 4],
          panels: [
            g.stat('Succeeded', 'Actions completed in the time range.', total(actions(', result="succeeded"'))),
            g.stat('Failed', 'Actions that failed in the time range.', total(actions(', result="failed"'))),
            g.stat('Skipped', 'Alerts not acted on in the time range (policy, windows, caps).', total(actions(', result="skipped"'))),
            g.stat('Dry run', 'Actions that would have run, in the time range, with dry run on.', total(actions(', result="dry_run"'))),
            g.stat('In progress', 'Actions running now.', 'sum(gke_disruption_actions_in_progress{%s}) or vector(0)' % sel),
            g.stat('Webhook errors', "Webhook requests answered with an error status in the time range, apart from the followers' 503s.", total('gke_disruption_webhook_requests_total{%s, code!~"2..|503"}' % sel)),
            g.stat('Follower 503s', 'Webhook requests a replica that is not the leader answered with 503 in the time range: Alertmanager retries them on the leader, so they are normal.', total('gke_disruption_webhook_requests_total{%s, code="503"}' % sel)),
          ],
        },
        {
          height: 8,
          panels: [
            g.timeseries(
              'Decisions and results',
              'Actions ended per interval by action and result: succeeded, failed, skipped (not acted on) and dry_run.',
              [g.target(count('action, result', '', '$__rate_interval'), '{{action}} {{result}}')],
              stacked=true,
            ),
            g.timeseries(
              'In progress',
              'Actions running: drains and perform-maintenance requests (with their drain first) not yet finished.',
              [g.target('sum by (action) (gke_disruption_actions_in_progress{%s})' % sel, '{{action}}')],
            ),
            g.timeseries(
              'Failures',
              'Failed actions per interval, by action.',
              [g.target(count('action', ', result="failed"', '$__rate_interval'), '{{action}}')],
              stacked=true,
            ),
          ],
        },
        g.row('Work'),
        {
          height: 9,
          widths: [12, 12],
          panels: [
            g.table(
              'Nodes being worked on',
              'Every node the actions service has work on, by action and state, including the nodes it keeps cordoned after a done drain until GKE finishes the maintenance.',
              [g.target(leaderView('gke_disruption_action_state', ['node', 'action', 'state']), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['node', 'Node'],
                ['action', 'Action'],
                ['state', 'State'],
              ],
              sortBy='node',
            ),
            g.timeseries(
              'Waiting, by reason',
              "Nodes whose action waits, by action, pool and reason: window (outside the policy's windows), pool_budget, cluster_cap, paused.",
              [g.target('sum by (action, pool, reason) (%s)' % leaderView('gke_disruption_actions_waiting', ['action', 'pool', 'reason']), '{{action}} {{pool}} {{reason}}')],
              stacked=true,
            ),
          ],
        },
        {
          height: 6,
          widths: [6, 6, 12],
          panels: [
            g.stat('Leaders', 'Replicas that are the leader now: 1 when healthy, 0 means alerts are not acted on.', 'sum(gke_disruption_actions_leader{%s}) or vector(0)' % sel),
            g.stat('Policy reload failing', 'Replicas whose last policy reload failed (they keep the policy they run).', 'count(gke_disruption_actions_config_last_reload_successful{%s} == 0) or vector(0)' % sel),
            g.timeseries(
              'Leader, by replica',
              'Which replica leads over time.',
              [g.target('max by (instance) (gke_disruption_actions_leader{%s})' % sel, '{{instance}}')],
            ),
          ],
        },
        {
          height: 8,
          panels: [
            g.timeseries(
              'Action duration',
              'Duration of the actions that ended within the 6 hours before each point: median, 90th percentile and the longest bucket reached.',
              [
                g.target(quantile('0.5'), 'p50 {{action}}'),
                g.target(quantile('0.9'), 'p90 {{action}}'),
                g.target(quantile('1'), 'max {{action}}'),
              ],
              unit='s',
            ),
            g.timeseries(
              'Webhook requests',
              'Alertmanager webhook requests per second by response code.',
              [g.target('sum by (code) (rate(gke_disruption_webhook_requests_total{%s}[$__rate_interval]))' % sel, '{{code}}')],
              unit='reqps',
            ),
            g.table(
              'Action alerts firing',
              'Alerts that ask the actions service to act, firing now.',
              [g.target('ALERTS{alertstate="firing", gke_disruption_action!="", %s}' % common.clusterMatcher(c), instant=true)],
              [
                [c.clusterLabel, 'Cluster'],
                ['node', 'Node'],
                ['alertname', 'Alert'],
                ['gke_disruption_action', 'Action'],
                ['can_reschedule', 'Reschedulable'],
              ],
              sortBy='node',
            ),
          ],
        },
      ],
    ),
  },
}
