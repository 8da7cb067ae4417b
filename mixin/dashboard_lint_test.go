package mixin

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/prometheus/prometheus/promql/parser"
)

// The checks below are the rules of Grafana's dashboard-linter that apply to these dashboards, restated here
// because the linter is not a Go module dependency: not editable, one templated Prometheus datasource, units on
// every panel and table value, $__rate_interval in rate(), counters only through rate/irate/increase, job matchers
// on the exporter's own series, query variables refreshed on time range change, titles and descriptions, stable
// uids. The linter's instance matcher and job/instance variables are left out: the dashboards aggregate over every
// target of a job by design, and the jobs are configured in _config rather than chosen by the viewer.

// lintDashboard is the part of a dashboard's JSON the lint rules read.
type lintDashboard struct {
	UID        string      `json:"uid"`
	Editable   bool        `json:"editable"`
	Panels     []lintPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Label   string `json:"label"`
			Type    string `json:"type"`
			Query   string `json:"query"`
			Refresh int    `json:"refresh"`
			Regex   string `json:"regex"`
		} `json:"list"`
	} `json:"templating"`
}

type lintPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Transformations []struct {
		ID      string          `json:"id"`
		Options json.RawMessage `json:"options"`
	} `json:"transformations"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadLintDashboards(t *testing.T) map[string]lintDashboard {
	t.Helper()
	_, raw := loadDashboards(t)
	out := map[string]lintDashboard{}
	for name, content := range raw {
		var d lintDashboard
		if err := json.Unmarshal(content, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = d
	}
	return out
}

// stableUIDs are the dashboards' uids: links and bookmarks point at them, so a new title must never change one.
var stableUIDs = map[string]string{
	"gke-disruption-actions.json":   "gke-disruption-actions",
	"gke-disruption-fleet.json":     "gke-disruption-fleet",
	"gke-disruption-node-pool.json": "gke-disruption-node-pool",
}

func TestDashboardUIDsStable(t *testing.T) {
	dashboards := loadLintDashboards(t)
	if len(dashboards) != len(stableUIDs) {
		t.Errorf("%d dashboards, %d known uids: add the new dashboard's uid to stableUIDs", len(dashboards), len(stableUIDs))
	}
	for name, d := range dashboards {
		if want := stableUIDs[name]; d.UID != want {
			t.Errorf("%s: uid %q, want %q", name, d.UID, want)
		}
	}
}

func TestDashboardsNotEditable(t *testing.T) {
	for name, d := range loadLintDashboards(t) {
		if d.Editable {
			t.Errorf("%s is editable: provisioned dashboards are changed in the mixin", name)
		}
	}
}

func TestDashboardTemplatedDatasource(t *testing.T) {
	for name, d := range loadLintDashboards(t) {
		var datasources int
		for _, v := range d.Templating.List {
			switch v.Type {
			case "datasource":
				datasources++
				if v.Name != "datasource" || v.Label != "Data source" || v.Query != "prometheus" {
					t.Errorf("%s: datasource variable %q (%q) of %q, want datasource (Data source) of prometheus", name, v.Name, v.Label, v.Query)
				}
			case "query":
				if v.Refresh != 2 {
					t.Errorf("%s: variable %s refreshes %d, want 2 (on time range change)", name, v.Name, v.Refresh)
				}
			}
		}
		if datasources != 1 {
			t.Errorf("%s has %d datasource variables, want 1", name, datasources)
		}
	}
}

// unitPanels are the panel types whose values need a unit; tables need one per value column.
var unitPanels = []string{"stat", "timeseries", "gauge", "bargauge", "state-timeline"}

// validUnits are Grafana's unit ids these dashboards may use (Grafana's valueFormats categories).
var validUnits = []string{"short", "none", "percent", "percentunit", "s", "ms", "dtdurations", "dateTimeAsIso",
	"dateTimeFromNow", "reqps", "ops", "bool", "string"}

func TestDashboardPanelsHaveUnitsTitlesAndDescriptions(t *testing.T) {
	for name, d := range loadLintDashboards(t) {
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" {
				t.Errorf("%s: panel %q has no title or no description", name, p.Title)
			}
			if slices.Contains(unitPanels, p.Type) && !slices.Contains(validUnits, p.FieldConfig.Defaults.Unit) {
				t.Errorf("%s: panel %q has unit %q, not one of %v", name, p.Title, p.FieldConfig.Defaults.Unit, validUnits)
			}
			if p.Type == "table" {
				checkTableUnits(t, name, p)
			}
		}
	}
}

// checkTableUnits requires a valid unit for every value column a table shows (by its header after renaming).
func checkTableUnits(t *testing.T, dashboard string, p lintPanel) {
	units := map[string]string{}
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if prop.ID == "unit" {
				units[o.Matcher.Options], _ = prop.Value.(string)
			}
		}
	}
	for _, tr := range p.Transformations {
		if tr.ID != "organize" {
			continue
		}
		var opts struct {
			RenameByName map[string]string `json:"renameByName"`
		}
		if err := json.Unmarshal(tr.Options, &opts); err != nil {
			t.Fatal(err)
		}
		for column, header := range opts.RenameByName {
			if !strings.HasPrefix(column, "Value") {
				continue
			}
			if u, ok := units[header]; !ok || !slices.Contains(validUnits, u) {
				t.Errorf("%s: table %q shows %s (%s) with unit %q", dashboard, p.Title, header, column, u)
			}
		}
	}
}

// rateIntervalStandIn replaces $__rate_interval so that its uses can be told apart from fixed ranges.
const rateIntervalStandIn = "7331ms"

var dashboardIntervals = strings.NewReplacer("$__rate_interval", rateIntervalStandIn, "$__interval", "1m", "$__range", "1d")

// exporterMetric matches the series the exporter itself exposes, which carry a job label and need its matcher.
var exporterMetric = regexp.MustCompile(`^(gke|gce)_[a-z0-9_]+$`)

func TestDashboardQueries(t *testing.T) {
	standIn, err := model.ParseDuration(rateIntervalStandIn)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range loadLintDashboards(t) {
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				where := name + ": " + p.Title
				expr, err := promqlParser.ParseExpr(dashboardIntervals.Replace(target.Expr))
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
					var parent parser.Node
					if len(path) > 0 {
						parent = path[len(path)-1]
					}
					switch e := n.(type) {
					case *parser.MatrixSelector:
						if call, ok := parent.(*parser.Call); ok && (call.Func.Name == "rate" || call.Func.Name == "irate") && e.Range != time.Duration(standIn) {
							t.Errorf("%s: %s does not use $__rate_interval", where, call)
						}
					case *parser.VectorSelector:
						if strings.HasSuffix(e.Name, "_total") || strings.HasSuffix(e.Name, "_bucket") {
							call, ok := grandparent(path).(*parser.Call)
							if _, ranged := parent.(*parser.MatrixSelector); !ranged || !ok || !slices.Contains([]string{"rate", "irate", "increase"}, call.Func.Name) {
								t.Errorf("%s: counter %s is read without rate, irate or increase", where, e.Name)
							}
						}
						if exporterMetric.MatchString(e.Name) && !hasJobMatcher(e) {
							t.Errorf("%s: %s has no job matcher", where, e)
						}
					}
					return nil
				})
			}
		}
	}
}

func grandparent(path []parser.Node) parser.Node {
	if len(path) < 2 {
		return nil
	}
	return path[len(path)-2]
}

func hasJobMatcher(vs *parser.VectorSelector) bool {
	for _, m := range vs.LabelMatchers {
		if m.Name == "job" {
			return true
		}
	}
	return false
}

// The rate interval check must catch a fixed range and accept $__rate_interval.
func TestRateIntervalStandIn(t *testing.T) {
	for expr, want := range map[string]bool{
		`rate(x_total{job="a"}[$__rate_interval])`: true,
		`rate(x_total{job="a"}[5m])`:               false,
		`increase(x_total{job="a"}[6h])`:           true,
	} {
		standIn, _ := model.ParseDuration(rateIntervalStandIn)
		node, err := promqlParser.ParseExpr(dashboardIntervals.Replace(expr))
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		parser.Inspect(node, func(n parser.Node, path []parser.Node) error {
			if m, isRange := n.(*parser.MatrixSelector); isRange {
				if call, isCall := path[len(path)-1].(*parser.Call); isCall && call.Func.Name == "rate" && m.Range != time.Duration(standIn) {
					ok = false
				}
			}
			return nil
		})
		if ok != want {
			t.Errorf("%s: accepted %v, want %v", expr, ok, want)
		}
	}
}
