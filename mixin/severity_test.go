package mixin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSeverityAgreesWithRunbook reads every alert's severity and its runbook's "Act": an alert is info exactly
// when its runbook says there is nothing to do (kubernetes-mixin's convention), so that nobody is paged, or told
// to look, for what needs no one.
func TestSeverityAgreesWithRunbook(t *testing.T) {
	content, err := os.ReadFile(filepath.Join(repoRoot, "docs/runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	acts := map[string]string{}
	act := regexp.MustCompile(`(?s)\*\*Act\*\*: (.*?)(\n\n|$)`)
	for _, section := range strings.Split(string(content), "\n## ")[1:] {
		name, body, _ := strings.Cut(section, "\n")
		if m := act.FindStringSubmatch(body); m != nil {
			acts[strings.TrimSpace(name)] = m[1]
		}
	}
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		a, ok := acts[r.Alert]
		if !ok {
			t.Errorf("%s: its runbook has no **Act**", r.Alert)
			continue
		}
		nothing := strings.HasPrefix(strings.ToLower(a), "nothing")
		if info := r.Labels["severity"] == "info"; info != nothing {
			t.Errorf("%s: severity %s, but its runbook's Act says %q", r.Alert, r.Labels["severity"], a[:min(len(a), 80)])
		}
	}
}
