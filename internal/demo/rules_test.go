package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func renderRules(t *testing.T, cfg RuleConfig) map[string]rulefmt.Rule {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := RenderRules(path, cfg); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rendered rules: %v", errs)
	}
	rules := map[string]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules[r.Alert+r.Record] = r
		}
	}
	return rules
}

func TestRenderRulesScalesTime(t *testing.T) {
	rules := renderRules(t, RuleConfig{TimeScale: 300, Config: map[string]any{"drainLeadTime": "3h"}})
	for name, want := range map[string]string{
		"GKENodeMaintenanceScheduled": "1s",  // 5m / 300
		"GKENodeMaintenanceStuck":     "24s", // 2h / 300
		"GKEDisruptionExporterDown":   "3s",  // 15m / 300
	} {
		if got := rules[name].For.String(); got != want {
			t.Errorf("%s for %s, want %s", name, got, want)
		}
	}
	if expr := rules["GKENodeMaintenanceWindowApproaching"].Expr; !strings.Contains(expr, "time() + 288") {
		t.Errorf("perform-maintenance lead time not 24h/300 = 288s:\n%s", expr)
	}
	if expr := rules["GKENodeMaintenanceNotReschedulable"].Expr; !strings.Contains(expr, "time() + 36") {
		t.Errorf("drain lead time not the override 3h/300 = 36s:\n%s", expr)
	}
	if _, ok := rules["node:gke_node_maintenance_start_timestamp_seconds:min"]; !ok {
		t.Error("recording rules missing")
	}
	floored := renderRules(t, RuleConfig{TimeScale: 300, MinFor: 3 * time.Second})
	if got := floored["GKENodeMaintenanceScheduled"].For.String(); got != "3s" {
		t.Errorf("for %s, want the 3s floor", got)
	}
	if got := floored["GKENodeMaintenanceStuck"].For.String(); got != "24s" {
		t.Errorf("for %s above the floor changed: want 24s", got)
	}
}

func TestRenderRulesUnscaledMatchesShipped(t *testing.T) {
	rules := renderRules(t, RuleConfig{TimeScale: 1})
	if got := rules["GKENodeMaintenanceScheduled"].For.String(); got != "5m" {
		t.Errorf("for %s, want the shipped 5m", got)
	}
	if expr := rules["GKENodeMaintenanceWindowApproaching"].Expr; !strings.Contains(expr, "time() + 86400") {
		t.Errorf("lead time changed:\n%s", expr)
	}
}

func TestRenderRulesBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := RenderRules(path, RuleConfig{}); err == nil || !strings.Contains(err.Error(), "time scale 0") {
		t.Errorf("zero scale: %v", err)
	}
	err := RenderRules(path, RuleConfig{TimeScale: 1, Config: map[string]any{"drainLeadTime": "soon"}})
	if err == nil || !strings.Contains(err.Error(), "unsupported duration soon") {
		t.Errorf("bad duration: %v", err)
	}
	if _, statErr := os.Stat(path); !os.IsNotExist(statErr) {
		t.Error("a failed render wrote a file")
	}
}

// The rendered rules are the mixin's own with every duration setting scaled, not rewritten rules: gap
// tolerances, memories, lead times and thresholds follow the story's clock as the alerts' for do.
func TestRenderRulesScalesEveryDurationSetting(t *testing.T) {
	rules := renderRules(t, RuleConfig{TimeScale: 300, MinFor: 3 * time.Second})
	for name, want := range map[string][]string{
		"node:gke_node_maintenance_start_timestamp_seconds:min": {"[3s]"},         // 15m floored to 3s
		"node:gke_node_info:last_seen":                          {"time() - 6"},   // 30m
		"node:gke_node_maintenance_can_reschedule:info":         {"[12s]"},        // 1h
		"GKENodeMaintenanceNotReschedulable":                    {"time() + 12)"}, // unknown lead 1h
		"GKEDisruptionActionsStalled":                           {"[72s:3s]", "[288s:3s]"},
	} {
		for _, w := range want {
			if !strings.Contains(rules[name].Expr, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, rules[name].Expr)
			}
		}
	}
	shipped := renderRules(t, RuleConfig{TimeScale: 1})
	if len(shipped) != len(rules) {
		t.Errorf("%d rules scaled, %d shipped", len(rules), len(shipped))
	}
	for name := range shipped {
		if _, ok := rules[name]; !ok {
			t.Errorf("%s missing from the scaled rules", name)
		}
	}
}
