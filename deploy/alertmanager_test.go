package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// webhookCall is what the recorder saw of one webhook request.
type webhookCall struct {
	user, password string
	alerts         []map[string]string
}

// TestAlertmanagerExample runs the real Alertmanager with the example configuration, its webhook pointed at a
// recorder on loopback instead of the actions Service, and fires the contract's alerts at it: the automation
// alerts reach the webhook with credentials the base web config accepts, the others do not.
func TestAlertmanagerExample(t *testing.T) {
	example, err := os.ReadFile("examples/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := build(t, "base")
	var svc corev1.Service
	decode(t, m.must(t, "Service", namespace, actionsWorkload.name), &svc)
	serviceURL := fmt.Sprintf("http://%s.%s.svc:%d/webhook", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)
	if !bytes.Contains(example, []byte("url: "+serviceURL+"\n")) {
		t.Fatalf("the example does not post to the actions Service at %s", serviceURL)
	}
	checkNoResolved(t, example)

	var (
		mu    sync.Mutex
		calls []webhookCall
	)
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
			} `json:"alerts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			t.Errorf("webhook payload: %v", err)
		}
		call := webhookCall{}
		call.user, call.password, _ = r.BasicAuth()
		for _, a := range msg.Alerts {
			call.alerts = append(call.alerts, a.Labels)
		}
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
	}))
	defer recorder.Close()

	amURL := testenv.StartAlertmanager(t, strings.Replace(string(example), serviceURL, recorder.URL+"/webhook", 1))

	// The alerts that must not reach the webhook go first: had they been routed there, they would arrive no later
	// than the automation alerts waited for below.
	testenv.PostAlerts(t, amURL, time.Time{},
		map[string]string{"alertname": "GKENodeMaintenanceScheduled", "node": "gke-a3-1", "severity": "info"},
		map[string]string{"alertname": "GKENodeTerminationImminent", "node": "gke-a3-2", "severity": "warning"},
	)
	testenv.PostAlerts(t, amURL, time.Time{},
		map[string]string{"alertname": "GKENodeMaintenanceWindowApproaching", "gke_disruption_action": "perform-maintenance", "node": "gke-a3-1", "can_reschedule": "true"},
		map[string]string{"alertname": "GKENodeMaintenanceNotReschedulable", "gke_disruption_action": "drain", "node": "gke-l4-1"},
		map[string]string{"alertname": "GKENodeGPUFailed", "gke_disruption_action": "report-faulty-host", "fault_behavior": "XID", "xid": "79", "node": "gke-a4-1"},
	)
	var got []webhookCall
	testenv.Eventually(t, 60*time.Second, "Alertmanager posting the automation alerts to the webhook", func() error {
		mu.Lock()
		got = slices.Clone(calls)
		mu.Unlock()
		n := 0
		for _, c := range got {
			n += len(c.alerts)
		}
		if n < 3 {
			return fmt.Errorf("%d alerts received", n)
		}
		return nil
	})

	tmpl := m.podTemplate(t, actionsWorkload)
	c := tmpl.Spec.Containers[0]
	users := checkWebConfig(t, mountedData(t, m, tmpl.Spec, c, flagValue(c.Args, "--web.config.file"), "Secret"))
	var actions []string
	for _, call := range got {
		if err := bcrypt.CompareHashAndPassword([]byte(users[call.user]), []byte(call.password)); err != nil {
			t.Errorf("the base web config refuses the webhook's credentials of user %q: %v", call.user, err)
		}
		for _, a := range call.alerts {
			if a["gke_disruption_action"] == "" {
				t.Errorf("alert %v without gke_disruption_action reached the webhook", a)
			}
			actions = append(actions, a["gke_disruption_action"]+" "+a["node"])
		}
	}
	slices.Sort(actions)
	if want := []string{"drain gke-l4-1", "perform-maintenance gke-a3-1", "report-faulty-host gke-a4-1"}; !slices.Equal(actions, want) {
		t.Errorf("webhook received %v, want %v", actions, want)
	}
}

// checkNoResolved makes sure every webhook of the example sets send_resolved: false explicitly (Alertmanager's
// default for webhooks is true).
func checkNoResolved(t *testing.T, example []byte) {
	t.Helper()
	var cfg struct {
		Receivers []struct {
			Name     string `yaml:"name"`
			Webhooks []struct {
				SendResolved *bool `yaml:"send_resolved"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(example, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Receivers {
		for _, w := range r.Webhooks {
			if w.SendResolved == nil || *w.SendResolved {
				t.Errorf("receiver %s: webhook without send_resolved: false", r.Name)
			}
		}
	}
}

// TestAlertmanagerInhibitRules loads both example configurations into the real Alertmanager: while a node is in
// GKE maintenance its node alerts are inhibited, those of other nodes are not, and once the maintenance alert
// resolves nothing is inhibited any more.
func TestAlertmanagerInhibitRules(t *testing.T) {
	for name, file := range map[string]string{
		"production": "examples/alertmanager.yml",
		"demo":       filepath.Join(testenv.RepoRoot(), "examples", "alertmanager.yml"),
	} {
		t.Run(name, func(t *testing.T) {
			example, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			amURL := testenv.StartAlertmanager(t, string(example))
			maintained := map[string]string{"alertname": "GKENodeMaintenanceInProgress", "node": "gke-a3-1", "state": "ongoing", "severity": "info"}
			notReady := map[string]string{"alertname": "KubeNodeNotReady", "node": "gke-a3-1", "severity": "warning"}
			otherNotReady := map[string]string{"alertname": "KubeNodeNotReady", "node": "gke-a3-2", "severity": "warning"}
			testenv.PostAlerts(t, amURL, time.Time{}, maintained, notReady, otherNotReady)
			waitInhibited(t, amURL, notReady, true)
			waitInhibited(t, amURL, otherNotReady, false)

			testenv.PostAlerts(t, amURL, time.Now().Add(-time.Second), maintained)
			testenv.PostAlerts(t, amURL, time.Time{}, notReady)
			waitInhibited(t, amURL, notReady, false)
		})
	}
}

// TestAlertmanagerGPUCorrelationInhibits loads both example configurations into the real Alertmanager: while
// GKEGPUFaultsCorrelated fires for a topology block, or for a node pool without blocks, GKENodeGPUFailed of that
// block or pool in that cluster is inhibited, and of no other.
func TestAlertmanagerGPUCorrelationInhibits(t *testing.T) {
	for name, file := range map[string]string{
		"production": "examples/alertmanager.yml",
		"demo":       filepath.Join(testenv.RepoRoot(), "examples", "alertmanager.yml"),
	} {
		t.Run(name, func(t *testing.T) {
			example, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			amURL := testenv.StartAlertmanager(t, string(example))
			failed := func(cluster, node, pool, block string) map[string]string {
				a := map[string]string{"alertname": "GKENodeGPUFailed", "severity": "critical", "gke_disruption_action": "drain",
					"xid": "79", "cluster": cluster, "node": node, "node_pool": pool}
				if block != "" {
					a["block"] = block
				}
				return a
			}
			inBlock := failed("prod-a", "gke-a4-1", "a4-pool", "blk-1")
			otherBlock := failed("prod-a", "gke-a4-2", "a4-pool", "blk-2")
			otherCluster := failed("prod-b", "gke-a4-3", "a4-pool", "blk-1")
			inPool := failed("prod-a", "gke-a2-1", "a2-pool", "")
			blockInPool := failed("prod-a", "gke-a2-2", "a2-pool", "blk-9")
			testenv.PostAlerts(t, amURL, time.Time{},
				map[string]string{"alertname": "GKEGPUFaultsCorrelated", "severity": "critical", "cluster": "prod-a", "block": "blk-1"},
				map[string]string{"alertname": "GKEGPUFaultsCorrelated", "severity": "critical", "cluster": "prod-a", "node_pool": "a2-pool"},
				inBlock, otherBlock, otherCluster, inPool, blockInPool)
			waitInhibited(t, amURL, inBlock, true)
			waitInhibited(t, amURL, inPool, true)
			for _, a := range []map[string]string{otherBlock, otherCluster, blockInPool} {
				waitInhibited(t, amURL, a, false)
			}
		})
	}
}

// waitInhibited waits until Alertmanager reports the alert with labels as inhibited (or not).
func waitInhibited(t *testing.T, amURL string, labels map[string]string, want bool) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%s on %s inhibited: %v", labels["alertname"], labels["node"], want), func() error {
		resp, err := http.Get(amURL + "/api/v2/alerts?filter=" + url.QueryEscape(fmt.Sprintf("alertname=%q", labels["alertname"])) +
			"&filter=" + url.QueryEscape(fmt.Sprintf("node=%q", labels["node"])))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var alerts []struct {
			Status struct {
				InhibitedBy []string `json:"inhibitedBy"`
			} `json:"status"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
			return err
		}
		if len(alerts) != 1 {
			return fmt.Errorf("%d alerts", len(alerts))
		}
		if got := len(alerts[0].Status.InhibitedBy) > 0; got != want {
			return fmt.Errorf("inhibited by %v", alerts[0].Status.InhibitedBy)
		}
		return nil
	})
}
