package mixin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// contractAlerts is the alert table of the contract: every alert's severity and the action it asks for.
var contractAlerts = map[string]struct{ severity, action string }{
	"GKENodeMaintenanceScheduled":         {"info", ""},
	"GKENodeMaintenanceWindowApproaching": {"warning", "perform-maintenance"},
	"GKENodeMaintenanceNotReschedulable":  {"warning", "drain"},
	"GKENodeMaintenanceInProgress":        {"info", ""},
	"GKENodeMaintenanceStuck":             {"critical", ""},
	"GKENodeTerminationImminent":          {"warning", ""},
	"GKESpotNodePreempted":                {"warning", ""},
	"GKETPUSliceMaintenanceScheduled":     {"warning", ""},
	// The action is the failed node's: perform-maintenance or drain, set by the expression.
	"GKENodeHardwareFailureMaintenance": {"critical", ""},
	"GKEHostRepeatedFailures":           {"warning", ""},
	// GKE's Error for a faulty-host report (report-faulty-host).
	"GKENodeReportFaultyHostFailed": {"warning", ""},
	// The action is the failed node's: report-faulty-host or drain, set by the expression.
	"GKENodeGPUFailed":                {"critical", ""},
	"GKENodeGPUErrors":                {"warning", ""},
	"GKEGPUFaultsCorrelated":          {"critical", ""},
	"GKENodePoolInterruptionsHigh":    {"warning", ""},
	"GKEDisruptionExporterDown":       {"warning", ""},
	"GKEDisruptionCollectorFailing":   {"warning", ""},
	"GKEDisruptionActionFailed":       {"warning", ""},
	"GKEWorkloadMaintenanceScheduled": {"info", ""},
	"GKEReadinessFinding":             {"warning", ""},
	"GKENodeAgentMissing":             {"warning", ""},
	"GKEDisruptionActionsStalled":     {"warning", ""},
	// The other planned disruptions: upgrades and maximum run durations.
	"GKENodePoolUpgradeCollidesWithMaintenance": {"warning", ""},
	"GKENodePoolUpgradeStuck":                   {"warning", ""},
	"GKENodeTerminationApproaching":             {"warning", ""},
	// Beyond the contract's table: what the system cannot see.
	"GKEDisruptionMetadataPathUnsupported": {"warning", ""},
	"GKEDisruptionCloudMonitoringStale":    {"warning", ""},
	"GKEDisruptionWatchFailing":            {"warning", ""},
}

const runbooksPath = "docs/runbooks.md"

func TestAlertsMatchContract(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		want, ok := contractAlerts[r.Alert]
		if !ok {
			t.Errorf("%s is not in the contract's alert table", r.Alert)
			continue
		}
		if got := r.Labels["severity"]; got != want.severity {
			t.Errorf("%s: severity %q, want %q", r.Alert, got, want.severity)
		}
		if got := r.Labels["gke_disruption_action"]; got != want.action {
			t.Errorf("%s: gke_disruption_action %q, want %q", r.Alert, got, want.action)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s has no %s annotation", r.Alert, a)
			}
		}
		if want := "#" + strings.ToLower(r.Alert); !strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s: runbook_url %q does not end in %s", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	for name := range contractAlerts {
		if !seen[name] {
			t.Errorf("contract alert %s is missing", name)
		}
	}
}

// TestRunbooksCoverAlerts checks that docs/runbooks.md has one section per alert, whose heading gives the anchor
// the alert's runbook_url points at, and no section for an alert that does not exist.
func TestRunbooksCoverAlerts(t *testing.T) {
	content, err := os.ReadFile(filepath.Join(repoRoot, runbooksPath))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var current string
	for _, line := range strings.Split(string(content), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			current = strings.TrimSpace(name)
			if _, dup := sections[current]; dup {
				t.Errorf("%s: section %s appears twice", runbooksPath, current)
			}
			sections[current] = ""
			continue
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	for name := range contractAlerts {
		body, ok := sections[name]
		if !ok {
			t.Errorf("%s has no section for %s", runbooksPath, name)
			continue
		}
		for _, part := range []string{"Meaning", "Check", "Act"} {
			if !regexp.MustCompile(`(?m)^\*\*` + part + `\*\*`).MatchString(body) {
				t.Errorf("%s: section %s lacks its **%s** part", runbooksPath, name, part)
			}
		}
	}
	for name := range sections {
		if _, ok := contractAlerts[name]; !ok && strings.HasPrefix(name, "GKE") {
			t.Errorf("%s has a section for %s, which is no alert", runbooksPath, name)
		}
	}
}

// unitTestFile is the part of a promtool test file that says which alerts it checks.
type unitTestFile struct {
	Tests []struct {
		AlertRuleTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsUnitTested requires, for every alert, a promtool case where it does not fire and one where it does.
func TestEveryAlertIsUnitTested(t *testing.T) {
	files, err := filepath.Glob("tests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	quiet, firing := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf unitTestFile
		if err := yaml.Unmarshal(content, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, group := range tf.Tests {
			for _, c := range group.AlertRuleTests {
				if len(c.ExpAlerts) == 0 {
					quiet[c.Alertname] = true
				} else {
					firing[c.Alertname] = true
				}
			}
		}
	}
	for name := range contractAlerts {
		if !quiet[name] {
			t.Errorf("no unit test has %s not firing", name)
		}
		if !firing[name] {
			t.Errorf("no unit test has %s firing", name)
		}
	}
}
