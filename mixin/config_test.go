package mixin

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// evaluate evaluates a jsonnet snippet that may import the mixin's sources.
func evaluate(t *testing.T, snippet string) string {
	t.Helper()
	out, err := newVM().EvaluateAnonymousSnippet("test.jsonnet", snippet)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigOverrides renders the mixin with every knob of config.libsonnet changed and checks that the rules
// follow: another cluster label in every aggregation and join, other selectors, windows and thresholds.
func TestConfigOverrides(t *testing.T) {
	out := evaluate(t, `
		local mixin = (import 'mixin.libsonnet') + { _config+:: {
			clusterExporterSelector: 'job="cluster-x"',
			nodeAgentSelector: 'job="node-x"',
			actionsSelector: 'job="actions-x"',
			requiredJobSelectors: [self.clusterExporterSelector],
			clusterLabel: 'k8s_cluster',
			performMaintenanceLeadTime: '1h30m',
			drainLeadTime: '45m',
			maintenanceStuckThreshold: '3h',
			interruptionsWindow: '1d',
			interruptionsThreshold: 7,
			interruptionsThresholdByType: {},
			actionFailedWindow: '1h',
			unknownRescheduleDrainLeadTime: '30m',
			signalGapTolerance: '20m',
			canRescheduleMemory: '3h',
			actionsCordonedThreshold: '2h',
			alerts+: { GKEDisruptionWatchFailing+: { severity: 'critical', 'for': '10m' } },
			runbookURLPattern: 'https://runbooks.example/%s',
			xidActions+: { '31': 'repair' },
			faultyHostReportMachineTypes: 'a3-highgpu-8g',
			gpuErrorsRepeatThreshold: 7,
			gpuErrorsRepeatWindow: '12h',
			gpuFaultsCorrelation: { nodes: 5, window: '30m', topologyLabel: 'subblock' },
			dcgm+: { enabled: true, selector: 'job="dcgm-x"', xidErrorsCount: true },
		} };
		{ groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }`)
	type rule struct {
		Alert, Record, Expr, For string
		Labels, Annotations      map[string]string
	}
	var file struct {
		Groups []struct{ Rules []rule }
	}
	if err := json.Unmarshal([]byte(out), &file); err != nil {
		t.Fatal(err)
	}
	rules := map[string]rule{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			rules[name] = r
			node, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
				var labels []string
				switch e := n.(type) {
				case *parser.AggregateExpr:
					labels = e.Grouping
				case *parser.BinaryExpr:
					if e.VectorMatching != nil && e.VectorMatching.On {
						labels = e.VectorMatching.MatchingLabels
					}
				case *parser.VectorSelector:
					for _, m := range e.LabelMatchers {
						if m.Name == "job" && !strings.HasSuffix(m.Value, "-x") {
							t.Errorf("%s selects job %q, not one of the configured jobs", name, m.Value)
						}
					}
				}
				if slices.Contains(labels, "cluster") {
					t.Errorf("%s still groups or joins by cluster: %s", name, n)
				}
				if len(labels) > 0 && !slices.Contains(labels, "k8s_cluster") && !(len(labels) == 1 && labels[0] == "le") {
					t.Errorf("%s groups or joins without the cluster label: %s", name, n)
				}
				return nil
			})
		}
	}

	for name, want := range map[string]string{
		"GKENodeMaintenanceWindowApproaching":                   "time() + 5400",
		"GKENodeMaintenanceNotReschedulable":                    "time() + 2700",
		"GKENodePoolInterruptionsHigh":                          "node_pool_type_reason:gke_node_pool_interruptions:increase1d > 7",
		"GKEDisruptionActionFailed":                             "[1h]",
		"GKEDisruptionActionsStalled":                           "[2h:1m]) >= 120",
		"node:gke_node_maintenance_start_timestamp_seconds:min": "[20m]",
		"node:gke_node_maintenance_can_reschedule:info":         "[3h]",
		"GKENodeGPUFailed":                                      `machine_type=~"a3-highgpu-8g"`,
		"GKENodeGPUErrors":                                      "[12h])) >= 7",
		"topology:gke_node_gpu_xid_repair:correlated":           "time() - 1800)",
		"GKEGPUFaultsCorrelated":                                "topology:gke_node_gpu_xid_repair:correlated",
		"node_xid:dcgm_xid_errors:seen":                         `DCGM_EXP_XID_ERRORS_COUNT{job="dcgm-x"}`,
	} {
		if !strings.Contains(rules[name].Expr, want) {
			t.Errorf("%s does not contain %q:\n%s", name, want, rules[name].Expr)
		}
	}
	if strings.Contains(rules["GKEDisruptionExporterDown"].Expr, `absent(up{job="actions-x"})`) {
		t.Error("GKEDisruptionExporterDown still requires the actions job")
	}
	if expr := rules["GKENodeGPUFailed"].Expr; !strings.Contains(expr, `xid=~"119|120|123|136|140|143|31|48|`) {
		t.Errorf("GKENodeGPUFailed does not repair Xid 31 as configured:\n%s", expr)
	}
	if expr := rules["topology:gke_node_gpu_xid_repair:correlated"].Expr; !strings.Contains(expr, ">= 5") || !strings.Contains(expr, "count by (k8s_cluster, subblock, node_pool)") {
		t.Errorf("the correlation does not count 5 nodes by subblock:\n%s", expr)
	}
	if got := rules["GKENodeMaintenanceStuck"].For; got != "3h" {
		t.Errorf("GKENodeMaintenanceStuck waits %s, want 3h", got)
	}
	if expr := rules["GKENodeMaintenanceNotReschedulable"].Expr; !strings.Contains(expr, "time() + 2700") || !strings.Contains(expr, "time() + 1800") {
		t.Errorf("GKENodeMaintenanceNotReschedulable lacks the lead times 45m and 30m (unknown):\n%s", expr)
	}
	if r := rules["GKEDisruptionWatchFailing"]; r.Labels["severity"] != "critical" || r.For != "10m" {
		t.Errorf("GKEDisruptionWatchFailing: severity %s for %s, want critical for 10m", r.Labels["severity"], r.For)
	}
	if got := rules["GKESpotNodePreempted"].Annotations["runbook_url"]; got != "https://runbooks.example/gkespotnodepreempted" {
		t.Errorf("runbook_url = %q", got)
	}
}

func TestInterruptionsWindowMustBeRecorded(t *testing.T) {
	_, err := newVM().EvaluateAnonymousSnippet("test.jsonnet",
		`((import 'mixin.libsonnet') + { _config+:: { interruptionsWindow: '2h' } }).prometheusAlerts`)
	if err == nil || !strings.Contains(err.Error(), "interruptionsWindow must be one of interruptionsWindows (1d, 1h, 7d)") {
		t.Errorf("an unrecorded window gave %v, want an error naming interruptionsWindow", err)
	}
}

// A value of xidActions (or unknownXidAction) that is no action, or a correlation by a label gke_node_info lacks,
// stops the rendering with the setting's name.
func TestGPUSettingsMustBeKnown(t *testing.T) {
	for override, want := range map[string]string{
		`xidActions+: { '79': 'reboot' }`:                  "every entry of xidActions is one of repair, alert, ignore",
		`unknownXidAction: 'page'`:                         "unknownXidAction is one of repair, alert, ignore",
		`gpuFaultsCorrelation+: { topologyLabel: 'rack' }`: "gpuFaultsCorrelation.topologyLabel is one of block, subblock",
	} {
		_, err := newVM().EvaluateAnonymousSnippet("test.jsonnet",
			`((import 'mixin.libsonnet') + { _config+:: { `+override+` } }).prometheusAlerts`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s gave %v, want an error saying %q", override, err, want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for duration, want := range map[string]string{"45s": "45", "2h": "7200", "1h30m": "5400", "7d": "604800", "1w": "604800"} {
		if got := evaluate(t, `(import 'lib/utils.libsonnet').seconds('`+duration+`')`); strings.TrimSpace(got) != want {
			t.Errorf("seconds(%s) = %s, want %s", duration, got, want)
		}
	}
	for _, bad := range []string{"", "90", "1.5h", "5ms", "h"} {
		if _, err := newVM().EvaluateAnonymousSnippet("test.jsonnet", `(import 'lib/utils.libsonnet').seconds('`+bad+`')`); err == nil {
			t.Errorf("seconds(%q) gave no error", bad)
		}
	}
}

// With showMultiCluster every alert says which cluster it is about, in the cluster label; without, none does.
func TestMultiClusterDescriptions(t *testing.T) {
	render := func(multi bool) map[string]string {
		out := evaluate(t, `((import 'mixin.libsonnet') + { _config+:: { showMultiCluster: `+strconv.FormatBool(multi)+`, clusterLabel: 'k8s_cluster' } }).prometheusAlerts`)
		var file struct {
			Groups []struct {
				Rules []struct {
					Alert       string
					Annotations map[string]string
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &file); err != nil {
			t.Fatal(err)
		}
		descriptions := map[string]string{}
		for _, g := range file.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" { // an alert group may record what only its alerts read
					descriptions[r.Alert] = r.Annotations["description"]
				}
			}
		}
		return descriptions
	}
	for name, d := range render(true) {
		// The interruption alert names the cluster Cloud Monitoring counted in, which it always knows.
		if name != "GKENodePoolInterruptionsHigh" && !strings.Contains(d, "on cluster {{ $labels.k8s_cluster }}") {
			t.Errorf("%s does not name the cluster: %s", name, d)
		}
	}
	for name, d := range render(false) {
		if strings.Contains(d, "on cluster") {
			t.Errorf("%s names a cluster with one cluster: %s", name, d)
		}
	}
}

// The dashboard settings reach every dashboard: title prefix, uid prefix, datasource regex.
func TestDashboardConfig(t *testing.T) {
	out := evaluate(t, `((import 'mixin.libsonnet') + { _config+:: {
		dashboardNamePrefix: 'Ops / ', dashboardUIDPrefix: 'ops-', datasourceFilterRegex: '/^prod-.*/',
	} }).grafanaDashboards`)
	var dashboards map[string]struct {
		UID, Title string
		Templating struct {
			List []struct{ Name, Regex string }
		}
	}
	if err := json.Unmarshal([]byte(out), &dashboards); err != nil {
		t.Fatal(err)
	}
	for name, d := range dashboards {
		if !strings.HasPrefix(d.UID, "ops-") || !strings.HasPrefix(d.Title, "Ops / ") {
			t.Errorf("%s: uid %q title %q lack the prefixes", name, d.UID, d.Title)
		}
		if d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Regex != "/^prod-.*/" {
			t.Errorf("%s: datasource variable %+v lacks the regex", name, d.Templating.List[0])
		}
	}
}
