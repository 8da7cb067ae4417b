// Plain Grafana dashboard JSON from a few helpers, so that the mixin builds without fetching a library.
{
  datasource:: { type: 'prometheus', uid: '${datasource}' },

  // target is one query of a panel. An instant target returns a table of the current values.
  target(expr, legend='', instant=false):: {
    datasource: $.datasource,
    expr: expr,
    legendFormat: legend,
  } + (if instant then { instant: true, range: false, format: 'table' } else {}),

  local panel(type, title, description, targets) = {
    type: type,
    title: title,
    description: description,
    datasource: $.datasource,
    targets: std.mapWithIndex(function(i, t) t { refId: std.char(std.codepoint('A') + i) }, targets),
  },

  stat(title, description, expr, unit='short'):: panel('stat', title, description, [$.target(expr)]) {
    fieldConfig: { defaults: { unit: unit, color: { mode: 'fixed', fixedColor: 'text' } }, overrides: [] },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'value',
      graphMode: 'none',
      textMode: 'value',
    },
  },

  timeseries(title, description, targets, unit='short', stacked=false):: panel('timeseries', title, description, targets) {
    fieldConfig: {
      defaults: {
        unit: unit,
        min: 0,
        custom: {
          drawStyle: if stacked then 'bars' else 'line',
          fillOpacity: if stacked then 80 else 10,
          stacking: { mode: if stacked then 'normal' else 'none', group: 'A' },
          showPoints: 'never',
        },
      },
      overrides: [],
    },
    options: {
      legend: { displayMode: 'table', placement: 'right', calcs: ['max', 'lastNotNull'] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  },

  // table shows instant targets; with several targets their columns are merged on the shared labels.
  // columns lists [column, header] pairs in display order (a column is a label or 'Value', or 'Value #A',
  // 'Value #B', ... with several targets); other columns are hidden. units maps a column to its unit: every value
  // column shown needs one. sortBy is the column to sort on, ascending unless desc.
  table(title, description, targets, columns, units={}, sortBy=null, desc=false)::
    local names = [c[0] for c in columns];
    local unitless = [n for n in names if std.startsWith(n, 'Value') && !std.objectHas(units, n)];
    assert unitless == [] : 'table %s: value columns without a unit: %s' % [title, std.join(', ', unitless)];
    panel('table', title, description, targets) {
      transformations:
        (if std.length(targets) > 1 then [{ id: 'merge', options: {} }] else [])
        + (if sortBy != null then [{ id: 'sortBy', options: { sort: [{ field: sortBy, desc: desc }] } }] else [])
        + [{
          id: 'filterFieldsByName',
          options: { include: { names: names } },
        }, {
          id: 'organize',
          options: {
            indexByName: { [columns[i][0]]: i for i in std.range(0, std.length(columns) - 1) },
            renameByName: { [c[0]]: c[1] for c in columns },
          },
        }],
      fieldConfig: {
        defaults: { unit: 'string', custom: { align: 'auto', filterable: true } },
        overrides: [
          { matcher: { id: 'byName', options: [c[1] for c in columns if c[0] == name][0] }, properties: [{ id: 'unit', value: units[name] }] }
          for name in std.objectFields(units)
        ],
      },
      options: { showHeader: true, cellHeight: 'sm' },
    },

  // stateTimeline shows each series as a band coloured by thresholds, a list of [value, color] from the lowest
  // (null for the base color).
  stateTimeline(title, description, targets, unit, steps):: panel('state-timeline', title, description, targets) {
    fieldConfig: {
      defaults: {
        unit: unit,
        color: { mode: 'thresholds' },
        thresholds: { mode: 'absolute', steps: [{ value: s[0], color: s[1] } for s in steps] },
        custom: { fillOpacity: 80, lineWidth: 0 },
      },
      overrides: [],
    },
    options: {
      showValue: 'never',
      mergeValues: false,
      rowHeight: 0.8,
      legend: { showLegend: true, displayMode: 'list', placement: 'bottom' },
      tooltip: { mode: 'single', sort: 'none' },
    },
  },

  row(title):: { type: 'row', title: title, collapsed: false, panels: [] },

  // layout places rows of panels on Grafana's 24-column grid. Each row is a row panel (full width, one unit high)
  // or { height, panels, widths }: widths are the panels' widths, an equal share of the row when left out.
  layout(rows)::
    local place(acc, row) =
      if std.objectHas(row, 'type') && row.type == 'row' then
        { y: acc.y + 1, panels: acc.panels + [row { gridPos: { x: 0, y: acc.y, w: 24, h: 1 } }] }
      else
        local n = std.length(row.panels);
        local widths = if std.objectHas(row, 'widths') then row.widths else std.makeArray(n, function(i) 24 / n);
        assert std.length(widths) == n : 'row needs one width per panel';
        assert std.foldl(function(a, b) a + b, widths, 0) <= 24 : 'row is wider than 24 columns';
        {
          y: acc.y + row.height,
          panels: acc.panels + [
            row.panels[i] {
              gridPos: { x: std.foldl(function(a, b) a + b, widths[:i], 0), y: acc.y, w: widths[i], h: row.height },
            }
            for i in std.range(0, n - 1)
          ],
        };
    local placed = std.foldl(place, rows, { y: 0, panels: [] }).panels;
    std.mapWithIndex(function(i, p) p { id: i + 1 }, placed),

  datasourceVariable(config):: {
    name: 'datasource',
    label: 'Data source',
    type: 'datasource',
    query: 'prometheus',
    current: {},
    hide: 0,
    refresh: 1,
    regex: config.datasourceFilterRegex,
    options: [],
  },

  // queryVariable is a variable whose values are a label's values. With includeAll, "All" matches every value
  // including an absent label.
  queryVariable(name, label, query, hide=false, multi=false, includeAll=false):: {
    name: name,
    label: label,
    type: 'query',
    datasource: $.datasource,
    query: query,
    definition: query,
    refresh: 2,
    sort: 1,
    hide: if hide then 2 else 0,
    multi: multi,
    includeAll: includeAll,
    options: [],
    current: if includeAll then { selected: true, text: 'All', value: '$__all' } else {},
  } + (if includeAll then { allValue: '.*' } else {}),

  // dashboard is one dashboard; its uid is the configured prefix and name, which never changes with the title, so
  // that links and bookmarks survive.
  dashboard(config, name, title, description, variables, rows):: {
    uid: config.dashboardUIDPrefix + name,
    title: config.dashboardNamePrefix + title,
    description: description,
    tags: config.dashboardTags,
    timezone: config.dashboardTimezone,
    refresh: config.dashboardRefresh,
    schemaVersion: 39,
    editable: false,
    graphTooltip: 1,
    time: { from: 'now-24h', to: 'now' },
    annotations: { list: [] },
    links: [{
      type: 'dashboards',
      title: 'GKE disruption',
      tags: config.dashboardTags,
      asDropdown: true,
      includeVars: true,
      keepTime: true,
    }],
    templating: { list: [$.datasourceVariable(config)] + variables },
    panels: $.layout(rows),
  },
}
