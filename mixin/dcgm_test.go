package mixin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestDCGMSource renders the rules with NVIDIA's dcgm-exporter as a second source of GPU faults (_config.dcgm, off
// in the generated files), lints them, and runs tests/dcgm/ against them in every order of rule groups that
// matters, as the rule files render them and as the rule resources do (for the shipped scrapers' labels).
func TestDCGMSource(t *testing.T) {
	promtool := testenv.Binary(t, "promtool")
	tests, err := filepath.Glob("tests/dcgm/*.yaml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no tests in tests/dcgm: %v", err)
	}
	for name, overrides := range map[string]string{
		"rule files":     "",
		"rule resources": "workloadNamespaceLabel: 'exported_namespace',",
	} {
		t.Run(name, func(t *testing.T) {
			rules := evaluate(t, `local m = (import 'mixin.libsonnet') { _config+:: { `+overrides+`
				dcgm+: { enabled: true, xidErrorsCount: true } } };
				{ groups: m.prometheusRules.groups + m.prometheusAlerts.groups }`)
			ruleFile := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(ruleFile, []byte(rules), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "check", "rules", "--lint=all", "--lint-fatal", ruleFile).CombinedOutput(); err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, out)
			}
			for _, test := range tests {
				t.Run(filepath.Base(test), func(t *testing.T) {
					runInEveryOrder(t, promtool, test, []string{ruleFile})
				})
			}
		})
	}
}
