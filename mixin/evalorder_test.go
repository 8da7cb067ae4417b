package mixin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// Prometheus evaluates each rule group on its own timer, so a group that reads another group's recorded series
// sees them from the same instant or from up to one interval before, depending on the phase between the two
// timers. promtool evaluates every group at the same instant, in a random order unless group_eval_order fixes
// one. evalOrder is one such order, named for the failure messages.
type evalOrder struct {
	name   string
	groups []string
}

// groupDependencies returns the groups in file order and, for each group, the other groups whose recorded series
// it reads.
func groupDependencies(t *testing.T, groups []rulefmt.RuleGroup) ([]string, map[string][]string) {
	t.Helper()
	recordedBy := map[string]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recordedBy[r.Record] = g.Name
			}
		}
	}
	var names []string
	reads := map[string][]string{}
	for _, g := range groups {
		names = append(names, g.Name)
		for _, r := range g.Rules {
			expr, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Record+r.Alert, err)
			}
			for _, name := range seriesRead(t, r.Record+r.Alert, expr) {
				if producer, ok := recordedBy[name]; ok && producer != g.Name && !slices.Contains(reads[g.Name], producer) {
					reads[g.Name] = append(reads[g.Name], producer)
				}
			}
		}
	}
	return names, reads
}

// seriesRead returns the metric names a rule's expr selects. A selector without a metric name, or one of the ALERTS
// series alerting rules write, could read any group's output: the analysis of which groups depend on which cannot
// follow it, so it fails the test rather than guess.
func seriesRead(t *testing.T, rule string, expr parser.Expr) []string {
	t.Helper()
	var names []string
	for _, vs := range parser.ExtractSelectors(expr) {
		name := metricName(vs)
		if name == "" || name == "ALERTS" || name == "ALERTS_FOR_STATE" {
			t.Fatalf("%s selects %s: which rule groups it depends on is unknown", rule, expr)
		}
		names = append(names, name)
	}
	return names
}

// metricName is the name a selector's matchers ask for, empty when they ask for none by equality.
func metricName(matchers []*labels.Matcher) string {
	for _, m := range matchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// evalOrders returns the orders of groups that matter: every group after the groups it reads (no recorded series
// lags), every group before them (every recorded series read across groups lags one interval), and, for each
// group whose series others read, that group alone lagging.
func evalOrders(t *testing.T, groups []rulefmt.RuleGroup) []evalOrder {
	t.Helper()
	names, reads := groupDependencies(t, groups)
	// Producers first: a depth-first walk that places each group after what it reads. Rule groups that read each
	// other in a cycle cannot all be current; the walk places them in file order.
	var forward []string
	visiting := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if slices.Contains(forward, name) || visiting[name] {
			return
		}
		visiting[name] = true
		for _, p := range reads[name] {
			visit(p)
		}
		forward = append(forward, name)
	}
	for _, n := range names {
		visit(n)
	}
	reverse := slices.Clone(forward)
	slices.Reverse(reverse)
	orders := []evalOrder{{"producers first", forward}, {"consumers first", reverse}}

	var producers []string
	for _, n := range names {
		for _, ps := range reads {
			if slices.Contains(ps, n) && !slices.Contains(producers, n) {
				producers = append(producers, n)
			}
		}
	}
	for _, p := range producers {
		rest := slices.DeleteFunc(slices.Clone(forward), func(s string) bool { return s == p })
		orders = append(orders, evalOrder{"only " + p + " lagging", append(rest, p)})
	}
	return orders
}

// ruleGroupsOf reads the rule groups of rule files.
func ruleGroupsOf(t *testing.T, paths ...string) []rulefmt.RuleGroup {
	t.Helper()
	var groups []rulefmt.RuleGroup
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Groups []rulefmt.RuleGroup `yaml:"groups"`
		}
		if err := yaml.Unmarshal(content, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		groups = append(groups, f.Groups...)
	}
	return groups
}

// runInEveryOrder runs the promtool unit test file test against ruleFiles once for every order of groups that
// matters to it. The file's own rule_files are replaced by ruleFiles, so a test runs unchanged against any rendering.
//
// A test group's result depends only on the rule groups it asserts on and those they read, directly or through
// others: the others are left out of its rule file, and of the orders only those in which the kept groups read
// different others a step late are run. Neither changes what a test can see; both spare promtool most of its work.
func runInEveryOrder(t *testing.T, promtool, test string, ruleFiles []string) {
	t.Helper()
	content, err := os.ReadFile(test)
	if err != nil {
		t.Fatal(err)
	}
	var unitTest map[string]any
	if err := yaml.Unmarshal(content, &unitTest); err != nil {
		t.Fatalf("%s: %v", test, err)
	}
	if _, ok := unitTest["group_eval_order"]; ok {
		t.Fatalf("%s sets group_eval_order: the test runs in every order that matters", test)
	}
	testGroups, ok := unitTest["tests"].([]any)
	if !ok || len(testGroups) == 0 {
		t.Fatalf("%s has no tests", test)
	}
	groups := ruleGroupsOf(t, ruleFiles...)
	orders := evalOrders(t, groups)
	_, reads := groupDependencies(t, groups)
	dir := t.TempDir()

	// Test groups that depend on the same rule groups run together.
	var needs []string
	batches := map[string][]any{}
	for _, tg := range testGroups {
		need := strings.Join(groupsNeeded(t, test, groups, reads, tg), ",")
		if _, ok := batches[need]; !ok {
			needs = append(needs, need)
		}
		batches[need] = append(batches[need], tg)
	}
	var failed []string
	runs := 0
	for b, need := range needs {
		kept := strings.Split(need, ",")
		if need == "" {
			kept = nil
		}
		ruleFile := filepath.Join(dir, fmt.Sprintf("rules-%d.yaml", b))
		writeRuleGroups(t, ruleFile, kept, ruleFiles)
		unitTest["rule_files"] = []string{ruleFile}
		unitTest["tests"] = batches[need]
		seen := map[string]bool{}
		for i, order := range orders {
			projected := slices.DeleteFunc(slices.Clone(order.groups), func(g string) bool { return !slices.Contains(kept, g) })
			if key := lags(projected, reads); seen[key] {
				continue
			} else {
				seen[key] = true
			}
			unitTest["group_eval_order"] = projected
			out, err := yaml.Marshal(unitTest)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("%d-%d-%s", b, i, filepath.Base(test)))
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			runs++
			if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
				failed = append(failed, fmt.Sprintf("groups evaluated %s (%s): %v\n%s", order.name, strings.Join(projected, ", "), err, out))
			}
		}
	}
	t.Logf("%s: %d runs of promtool", test, runs)
	if len(failed) > 0 {
		t.Errorf("promtool test rules %s:\n%s", test, strings.Join(failed, "\n"))
	}
}

// lags names what an order of groups means to the rules: for each group, which of the groups it reads it reads a
// step late. Orders with the same lags evaluate alike.
func lags(order []string, reads map[string][]string) string {
	var late []string
	for i, consumer := range order {
		for _, producer := range reads[consumer] {
			if j := slices.Index(order, producer); j > i {
				late = append(late, consumer+"<"+producer)
			}
		}
	}
	slices.Sort(late)
	return strings.Join(late, ",")
}

// groupsNeeded returns, in file order, the rule groups a promtool test group's assertions depend on: those of the
// alerts it checks, those recording the series its expressions read, and, transitively, the groups they read.
func groupsNeeded(t *testing.T, test string, groups []rulefmt.RuleGroup, reads map[string][]string, testGroup any) []string {
	t.Helper()
	producedBy := map[string][]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			producedBy[r.Record+r.Alert] = append(producedBy[r.Record+r.Alert], g.Name)
		}
	}
	var tg struct {
		Alerts []struct {
			Alertname string `yaml:"alertname"`
		} `yaml:"alert_rule_test"`
		Exprs []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	}
	raw, err := yaml.Marshal(testGroup)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &tg); err != nil {
		t.Fatalf("%s: %v", test, err)
	}
	var names []string
	for _, a := range tg.Alerts {
		names = append(names, a.Alertname)
	}
	for _, e := range tg.Exprs {
		expr, err := promqlParser.ParseExpr(e.Expr)
		if err != nil {
			t.Fatalf("%s: %s: %v", test, e.Expr, err)
		}
		// An expression of a test may read the ALERTS series: it depends on the alerts its alertname matcher
		// selects, all of them without one.
		for _, vs := range parser.ExtractSelectors(expr) {
			switch name := metricName(vs); name {
			case "":
				t.Fatalf("%s: %s selects no metric by name: which rule groups it depends on is unknown", test, e.Expr)
			case "ALERTS", "ALERTS_FOR_STATE":
				for alert := range producedBy {
					if matchesAlertname(vs, alert) {
						names = append(names, alert)
					}
				}
			default:
				names = append(names, name)
			}
		}
	}
	need := map[string]bool{}
	var visit func(string)
	visit = func(g string) {
		if need[g] {
			return
		}
		need[g] = true
		for _, p := range reads[g] {
			visit(p)
		}
	}
	for _, n := range names {
		for _, g := range producedBy[n] {
			visit(g)
		}
	}
	var kept []string
	for _, g := range groups {
		if need[g.Name] && !slices.Contains(kept, g.Name) {
			kept = append(kept, g.Name)
		}
	}
	return kept
}

// matchesAlertname reports whether the ALERTS selector's alertname matchers accept alert. Recording rules' names
// are never alert names, so matching them is harmless.
func matchesAlertname(matchers []*labels.Matcher, alert string) bool {
	for _, m := range matchers {
		if m.Name == "alertname" && !m.Matches(alert) {
			return false
		}
	}
	return true
}

// writeRuleGroups writes the groups named keep, as ruleFiles have them, to one rule file.
func writeRuleGroups(t *testing.T, path string, keep []string, ruleFiles []string) {
	t.Helper()
	var kept []any
	for _, f := range ruleFiles {
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []map[string]any `yaml:"groups"`
		}
		if err := yaml.Unmarshal(content, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range file.Groups {
			if name, _ := g["name"].(string); slices.Contains(keep, name) {
				kept = append(kept, g)
			}
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": kept})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEvalOrders checks that the orders cover what they promise on the generated rules: in the first every
// group comes after the groups it reads, in the second before them.
func TestEvalOrders(t *testing.T) {
	groups := ruleGroupsOf(t, filepath.Join(repoRoot, "rules/rules.yaml"), filepath.Join(repoRoot, "rules/alerts.yaml"))
	_, reads := groupDependencies(t, groups)
	if len(reads) == 0 {
		t.Fatal("no group reads another group's recorded series: the orders test nothing")
	}
	orders := evalOrders(t, groups)
	for i, want := range []bool{true, false} {
		order := orders[i]
		for consumer, producers := range reads {
			for _, p := range producers {
				if after := slices.Index(order.groups, consumer) > slices.Index(order.groups, p); after != want {
					t.Errorf("order %q: %s after %s is %v, want %v", order.name, consumer, p, after, want)
				}
			}
		}
	}
	if len(orders[0].groups) != len(groups) {
		t.Errorf("order %q has %d groups, want %d", orders[0].name, len(orders[0].groups), len(groups))
	}
}
