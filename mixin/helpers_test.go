package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// The Prometheus rule files the mixin generates.
var ruleFiles = []string{"rules/rules.yaml", "rules/alerts.yaml"}

var promqlParser = parser.NewParser(parser.Options{})

// loadRuleFile parses a generated rule file with Prometheus' own loader, which also checks expressions and templates.
func loadRuleFile(t *testing.T, path string) *rulefmt.RuleGroups {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("%s: %v", path, err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

// allRules returns every rule of the generated rule files.
func allRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	var rules []rulefmt.Rule
	for _, f := range ruleFiles {
		for _, g := range loadRuleFile(t, f).Groups {
			rules = append(rules, g.Rules...)
		}
	}
	return rules
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    gridPos     `json:"gridPos"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// overlaps tells whether two panels share a grid cell; neighbours only touch.
func (g gridPos) overlaps(h gridPos) bool {
	return g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Query      string      `json:"query"`
	Datasource *datasource `json:"datasource"`
}

// loadDashboards returns the generated dashboards by file name, with their raw JSON.
func loadDashboards(t *testing.T) (map[string]dashboard, map[string][]byte) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no dashboards in dashboards/")
	}
	dashboards, raw := map[string]dashboard{}, map[string][]byte{}
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(content, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		dashboards[filepath.Base(p)], raw[filepath.Base(p)] = d, content
	}
	return dashboards, raw
}

// grafanaIntervals stand in for Grafana's range variables so that dashboard queries parse as PromQL.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1d")

// expression is one PromQL expression of a rule or a dashboard, named for error messages.
type expression struct {
	where string
	expr  string
}

// allExpressions returns every PromQL expression of the generated rules and dashboards.
func allExpressions(t *testing.T) []expression {
	t.Helper()
	var exprs []expression
	for _, r := range allRules(t) {
		exprs = append(exprs, expression{where: r.Alert + r.Record, expr: r.Expr})
	}
	dashboards, _ := loadDashboards(t)
	for _, name := range sortedKeys(dashboards) {
		for _, p := range dashboards[name].Panels {
			for _, target := range p.Targets {
				exprs = append(exprs, expression{
					where: name + ": " + p.Title + " (" + target.RefID + ")",
					expr:  grafanaIntervals.Replace(target.Expr),
				})
			}
		}
	}
	return exprs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
