package mixin

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestPromtoolCheckRules lints the generated rule files with promtool, every lint fatal.
func TestPromtoolCheckRules(t *testing.T) {
	promtool := testenv.Binary(t, "promtool")
	args := []string{"check", "rules", "--lint=all", "--lint-fatal"}
	for _, f := range ruleFiles {
		args = append(args, filepath.Join(repoRoot, f))
	}
	if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestPromtoolUnitTests runs the rule unit tests in tests/ against the generated rule files, in every order of
// rule groups that matters (evalOrders).
func TestPromtoolUnitTests(t *testing.T) {
	promtool := testenv.Binary(t, "promtool")
	files, err := filepath.Glob("tests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no rule unit tests in tests/")
	}
	var rules []string
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, abs)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			runInEveryOrder(t, promtool, f, rules)
		})
	}
}
