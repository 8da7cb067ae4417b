package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// ruleResource is a PrometheusRule or Managed Service for Prometheus Rules resource, its groups kept generic to
// compare them with the rule files.
type ruleResource struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Groups []any `yaml:"groups"`
	} `yaml:"spec"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(content, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestRuleResourcesCarryTheRuleFiles checks that both Kubernetes resources hold exactly the groups of the rule
// files, which promtool checks and tests, rendered for the labels the shipped scrapers produce: the workload's
// namespace in exported_namespace, and in nothing else.
func TestRuleResourcesCarryTheRuleFiles(t *testing.T) {
	var want []any
	out := evaluate(t, `local m = (import 'mixin.libsonnet') { _config+:: { workloadNamespaceLabel: 'exported_namespace' } };
		{ groups: m.prometheusRules.groups + m.prometheusAlerts.groups }`)
	var rendered struct {
		Groups []any `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &rendered); err != nil {
		t.Fatal(err)
	}
	want = rendered.Groups
	var fromFiles []any
	for _, f := range ruleFiles {
		var file struct {
			Groups []any `yaml:"groups"`
		}
		readYAML(t, f, &file)
		fromFiles = append(fromFiles, file.Groups...)
	}
	if reflect.DeepEqual(fromFiles, want) {
		t.Error("the rule resources render like the rule files: the workload alerts would read namespace, which the shipped scrapers overwrite")
	}
	for path, kind := range map[string][2]string{
		"rules/prometheusrule.yaml": {"monitoring.coreos.com/v1", "PrometheusRule"},
		"rules/gmp-rules.yaml":      {"monitoring.googleapis.com/v1", "Rules"},
	} {
		var r ruleResource
		readYAML(t, path, &r)
		if r.APIVersion != kind[0] || r.Kind != kind[1] {
			t.Errorf("%s is %s %s, want %s %s", path, r.APIVersion, r.Kind, kind[0], kind[1])
		}
		if r.Metadata.Name == "" || r.Metadata.Namespace == "" {
			t.Errorf("%s lacks a name or namespace", path)
		}
		if !reflect.DeepEqual(r.Spec.Groups, want) {
			t.Errorf("%s: spec.groups differ from the groups of %v", path, ruleFiles)
		}
	}
}

// managedScopeLabels are the labels Managed Service for Prometheus sets on every selector of a namespaced Rules
// resource; it rejects a rule with another matcher on one of them, or with one of them as a rule label.
var managedScopeLabels = []string{"project_id", "location", "cluster", "namespace"}

func TestRulesFitManagedPrometheusScoping(t *testing.T) {
	for _, r := range allRules(t) {
		name := r.Alert + r.Record
		for _, l := range managedScopeLabels {
			if _, ok := r.Labels[l]; ok {
				t.Errorf("%s sets label %s, which Managed Service for Prometheus reserves", name, l)
			}
		}
		node, err := promqlParser.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			for _, m := range vs.LabelMatchers {
				for _, l := range managedScopeLabels {
					if m.Name == l && m.Type != labels.MatchEqual {
						t.Errorf("%s: matcher %s conflicts with Managed Service for Prometheus scoping", name, m)
					}
				}
			}
			return nil
		})
	}
}
