package mixin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok {
					if producer, ok := recordedBy[vs.Name]; ok && producer != g.Name && !slices.Contains(reads[g.Name], producer) {
						reads[g.Name] = append(reads[g.Name], producer)
					}
				}
				return nil
			})
		}
	}
	return names, reads
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
// matters. The file's own rule_files are replaced by ruleFiles, so a test runs unchanged against any rendering.
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
	unitTest["rule_files"] = ruleFiles
	dir := t.TempDir()
	var failed []string
	for i, order := range evalOrders(t, ruleGroupsOf(t, ruleFiles...)) {
		unitTest["group_eval_order"] = order.groups
		out, err := yaml.Marshal(unitTest)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(test)))
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
			failed = append(failed, fmt.Sprintf("groups evaluated %s (%s): %v\n%s", order.name, strings.Join(order.groups, ", "), err, out))
		}
	}
	if len(failed) > 0 {
		t.Errorf("promtool test rules %s:\n%s", test, strings.Join(failed, "\n"))
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
