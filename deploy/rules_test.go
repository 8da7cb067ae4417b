package deploy

import (
	"bytes"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ruleCopies maps each rule resource the mixin generates to its copy inside a component (see doc.go).
var ruleCopies = map[string]string{
	"../rules/prometheusrule.yaml": "components/prometheus-operator/prometheusrule.yaml",
	"../rules/gmp-rules.yaml":      "components/google-managed-prometheus/gmp-rules.yaml",
}

func TestRuleCopiesUpToDate(t *testing.T) {
	for source, dest := range ruleCopies {
		want, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: run `go generate ./deploy`", dest, source)
		}
	}
}

// TestInstallsCarryRules checks that each install has the rules of its Prometheus flavour, with alerts, in the
// namespace of the scrape configuration (Managed Service for Prometheus evaluates Rules over that namespace only).
func TestInstallsCarryRules(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			m := build(t, dir)
			rules := append(m.ofKind("PrometheusRule"), m.ofKind("Rules")...)
			if len(rules) != 1 {
				t.Fatalf("%d rule resources, want 1", len(rules))
			}
			r := rules[0]
			scrapeKind := map[string]string{"PrometheusRule": "ServiceMonitor", "Rules": "PodMonitoring"}[r.GetKind()]
			if len(m.ofKind(scrapeKind)) == 0 {
				t.Errorf("%s without %s: the rules and the scrape configuration are for different Prometheus", r.GetKind(), scrapeKind)
			}
			if r.GetNamespace() != namespace {
				t.Errorf("%s in namespace %q, want %q", r.GetKind(), r.GetNamespace(), namespace)
			}
			groups, _, _ := unstructured.NestedSlice(r.Object, "spec", "groups")
			alerts := 0
			for _, g := range groups {
				rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, rule := range rs {
					if _, ok := rule.(map[string]any)["alert"]; ok {
						alerts++
					}
				}
			}
			if alerts == 0 {
				t.Errorf("%s has no alerts", r.GetKind())
			}
		})
	}
}
