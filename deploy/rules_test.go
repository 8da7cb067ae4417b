package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// copies maps each source to its copy inside a component or the chart (see doc.go); a source ending in / is a
// directory, copied file by file.
var copies = map[string]string{
	"../rules/prometheusrule.yaml":               "components/prometheus-operator/prometheusrule.yaml",
	"../rules/gmp-rules.yaml":                    "components/google-managed-prometheus/gmp-rules.yaml",
	"../dashboards/operator-gmp/":                "components/prometheus-operator/dashboards/",
	"base/":                                      chartDir + "/files/base/",
	"components/google-managed-prometheus/":      chartDir + "/files/components/google-managed-prometheus/",
	"components/prometheus-operator/":            chartDir + "/files/components/prometheus-operator/",
	"components/prometheus-operator/dashboards/": chartDir + "/files/dashboards/",
}

func TestSourceCopiesUpToDate(t *testing.T) {
	for source, dest := range copies {
		pairs := map[string]string{source: dest}
		if strings.HasSuffix(source, "/") {
			pairs = map[string]string{}
			entries, err := os.ReadDir(source)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				// The kustomizations stay behind: the chart renders their resources itself.
				if !e.IsDir() && e.Name() != "kustomization.yaml" {
					pairs[source+e.Name()] = dest + e.Name()
				}
			}
			if got, _ := filepath.Glob(dest + "*"); len(got) != len(pairs) {
				t.Errorf("%s holds %d files, %s %d: run `go generate ./deploy`", dest, len(got), source, len(pairs))
			}
		}
		for src, dst := range pairs {
			want, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Errorf("%v: run `go generate ./deploy`", err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s: run `go generate ./deploy`", dst, src)
			}
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
