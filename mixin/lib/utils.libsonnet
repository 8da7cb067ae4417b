// Helpers shared by the alerts, recording rules and dashboards.
local unitSeconds = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

{
  // seconds converts a Prometheus duration made of whole units ('2h', '1h30m', '7d') to seconds, for arithmetic
  // with time().
  seconds(duration)::
    local step(acc, c) =
      if std.member('0123456789', c) then acc { digits+: c }
      else if std.objectHas(unitSeconds, c) && acc.digits != '' then
        { total: acc.total + std.parseInt(acc.digits) * unitSeconds[c], digits: '' }
      else error 'unsupported duration %s: use whole s, m, h, d or w units' % duration;
    local parsed = std.foldl(step, std.stringChars(duration), { total: 0, digits: '' });
    assert parsed.digits == '' && parsed.total > 0 : 'unsupported duration %s' % duration;
    parsed.total,

  // runbookURL is an alert's runbook link: the pattern's %s becomes the alert name in lower case, the anchor that
  // Markdown renderers give a "## AlertName" heading.
  runbookURL(pattern, alertname):: pattern % std.asciiLower(alertname),

  // withRunbookURLs adds the runbook_url annotation to every alerting rule of groups.
  withRunbookURLs(pattern, groups):: [
    group {
      rules: [
        if std.objectHas(rule, 'alert')
        then rule { annotations+: { runbook_url: $.runbookURL(pattern, rule.alert) } }
        else rule
        for rule in group.rules
      ],
    }
    for group in groups
  ],

  // indent prefixes every non-empty line of text with spaces, to nest one PromQL expression inside another.
  indent(text, spaces)::
    local pad = std.repeat(' ', spaces);
    std.join('\n', [if line == '' then line else pad + line for line in std.split(std.rstripChars(text, '\n'), '\n')]),

  // isDuration tells whether value is a duration seconds() accepts.
  isDuration(value)::
    std.isString(value) && value != '' && std.member(std.objectFields(unitSeconds), value[std.length(value) - 1])
    && std.all([std.member('0123456789smhdw', ch) for ch in std.stringChars(value)])
    && std.member('0123456789', value[0]),

  // alertRule completes rule, an alerting rule without its severity and `for`, from config.alerts[name]. A `for`
  // of 0s is left out.
  alertRule(config, name, rule)::
    assert std.objectHas(config.alerts, name) : 'alert %s has no entry in _config.alerts' % name;
    local settings = config.alerts[name];
    { alert: name } + rule + { labels+: { severity: settings.severity } }
    + (if settings['for'] == '0s' then {} else { 'for': settings['for'] }),

  // clusterRef is how a description names the cluster when several share one Prometheus: ' on cluster X'.
  clusterRef(config):: if config.showMultiCluster then ' on cluster {{ $labels.%s }}' % config.clusterLabel else '',

  // labelList is a PromQL label list of the cluster label followed by labels.
  labelList(config, labels):: std.join(', ', [config.clusterLabel] + labels),
}
