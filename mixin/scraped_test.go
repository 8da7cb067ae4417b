package mixin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"gopkg.in/yaml.v3"
)

// TestScrapedRuleResources runs tests/scraped/ against the groups of each rule resource, with the series labelled
// as the scrape configurations shipped next to it label them, in every order of rule groups that matters.
func TestScrapedRuleResources(t *testing.T) {
	promtool := testenv.Binary(t, "promtool")
	tests, err := filepath.Glob("tests/scraped/*.yaml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no tests in tests/scraped: %v", err)
	}
	for _, resource := range []string{"rules/prometheusrule.yaml", "rules/gmp-rules.yaml"} {
		t.Run(filepath.Base(resource), func(t *testing.T) {
			var r ruleResource
			readYAML(t, resource, &r)
			dir := t.TempDir()
			groups, err := yaml.Marshal(map[string]any{"groups": r.Spec.Groups})
			if err != nil {
				t.Fatal(err)
			}
			ruleFile := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(ruleFile, groups, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, test := range tests {
				t.Run(filepath.Base(test), func(t *testing.T) {
					runInEveryOrder(t, promtool, test, []string{ruleFile})
				})
			}
		})
	}
}
