package mixin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"gopkg.in/yaml.v3"
)

// TestScrapedRuleResources runs tests/scraped/ against the groups of each rule resource, with the series labelled
// as the scrape configurations shipped next to it label them.
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
				content, err := os.ReadFile(test)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, filepath.Base(test))
				if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(content), "RULE_FILE", ruleFile)), 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
					t.Errorf("promtool test rules %s with %s: %v\n%s", test, resource, err, out)
				}
			}
		})
	}
}
