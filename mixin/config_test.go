package mixin

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// evaluate evaluates a jsonnet snippet that may import the mixin's sources.
func evaluate(t *testing.T, snippet string) string {
	t.Helper()
	out, err := newVM().EvaluateAnonymousSnippet("test.jsonnet", snippet)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigOverrides renders the mixin with every knob of config.libsonnet changed and checks that the rules
// follow: another cluster label in every aggregation and join, other selectors, windows and thresholds.
func TestConfigOverrides(t *testing.T) {
	out := evaluate(t, `
		local mixin = (import 'mixin.libsonnet') + { _config+:: {
			clusterExporterSelector: 'job="cluster-x"',
			nodeAgentSelector: 'job="node-x"',
			actionsSelector: 'job="actions-x"',
			requiredJobSelectors: [self.clusterExporterSelector],
			clusterLabel: 'k8s_cluster',
			performMaintenanceLeadTime: '1h30m',
			drainLeadTime: '45m',
			maintenanceStuckThreshold: '3h',
			interruptionsWindow: '1d',
			interruptionsThreshold: 7,
			interruptionsThresholdByType: {},
			actionFailedWindow: '1h',
			runbookURLPattern: 'https://runbooks.example/%s',
		} };
		{ groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }`)
	type rule struct {
		Alert, Record, Expr, For string
		Annotations              map[string]string
	}
	var file struct {
		Groups []struct{ Rules []rule }
	}
	if err := json.Unmarshal([]byte(out), &file); err != nil {
		t.Fatal(err)
	}
	rules := map[string]rule{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			rules[name] = r
			node, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
				var labels []string
				switch e := n.(type) {
				case *parser.AggregateExpr:
					labels = e.Grouping
				case *parser.BinaryExpr:
					if e.VectorMatching != nil && e.VectorMatching.On {
						labels = e.VectorMatching.MatchingLabels
					}
				case *parser.VectorSelector:
					for _, m := range e.LabelMatchers {
						if m.Name == "job" && !strings.HasSuffix(m.Value, "-x") {
							t.Errorf("%s selects job %q, not one of the configured jobs", name, m.Value)
						}
					}
				}
				if slices.Contains(labels, "cluster") {
					t.Errorf("%s still groups or joins by cluster: %s", name, n)
				}
				if len(labels) > 0 && !slices.Contains(labels, "k8s_cluster") && !(len(labels) == 1 && labels[0] == "le") {
					t.Errorf("%s groups or joins without the cluster label: %s", name, n)
				}
				return nil
			})
		}
	}

	for name, want := range map[string]string{
		"GKENodeMaintenanceWindowApproaching": "time() + 5400",
		"GKENodeMaintenanceNotReschedulable":  "time() + 2700",
		"GKENodePoolInterruptionsHigh":        "node_pool_type_reason:gke_node_pool_interruptions:increase1d > 7",
		"GKEDisruptionActionFailed":           "[1h]",
	} {
		if !strings.Contains(rules[name].Expr, want) {
			t.Errorf("%s does not contain %q:\n%s", name, want, rules[name].Expr)
		}
	}
	if strings.Contains(rules["GKEDisruptionExporterDown"].Expr, `absent(up{job="actions-x"})`) {
		t.Error("GKEDisruptionExporterDown still requires the actions job")
	}
	if got := rules["GKENodeMaintenanceStuck"].For; got != "3h" {
		t.Errorf("GKENodeMaintenanceStuck waits %s, want 3h", got)
	}
	if got := rules["GKESpotNodePreempted"].Annotations["runbook_url"]; got != "https://runbooks.example/gkespotnodepreempted" {
		t.Errorf("runbook_url = %q", got)
	}
}

func TestInterruptionsWindowMustBeRecorded(t *testing.T) {
	_, err := newVM().EvaluateAnonymousSnippet("test.jsonnet",
		`((import 'mixin.libsonnet') + { _config+:: { interruptionsWindow: '2h' } }).prometheusAlerts`)
	if err == nil || !strings.Contains(err.Error(), "interruptionsWindow must be one of interruptionsWindows (1d, 1h, 7d)") {
		t.Errorf("an unrecorded window gave %v, want an error naming interruptionsWindow", err)
	}
}

func TestSeconds(t *testing.T) {
	for duration, want := range map[string]string{"45s": "45", "2h": "7200", "1h30m": "5400", "7d": "604800", "1w": "604800"} {
		if got := evaluate(t, `(import 'lib/utils.libsonnet').seconds('`+duration+`')`); strings.TrimSpace(got) != want {
			t.Errorf("seconds(%s) = %s, want %s", duration, got, want)
		}
	}
	for _, bad := range []string{"", "90", "1.5h", "5ms", "h"} {
		if _, err := newVM().EvaluateAnonymousSnippet("test.jsonnet", `(import 'lib/utils.libsonnet').seconds('`+bad+`')`); err == nil {
			t.Errorf("seconds(%q) gave no error", bad)
		}
	}
}
