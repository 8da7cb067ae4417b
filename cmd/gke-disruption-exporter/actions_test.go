package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	mdsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func writePolicy(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestActionsCommand runs the command as deployed (Lease in POD_NAMESPACE, identity POD_NAME) and drains a node on
// an alert posted to /webhook.
func TestActionsCommand(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ns := api.Namespace("actions")
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_NAME", "actions-0")
	ctx := context.Background()
	readyNodeWithMaintenance(t, api, "gke-l4-0")
	policy := writePolicy(t, "pools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}}]\ndrain: {timeout: 1m}\n")

	addr := freeAddress(t)
	startCommand(t, actionsCommand, "actions", "--kubeconfig="+api.Kubeconfig, "--config.file="+policy, "--web.listen-address="+addr)
	testenv.Eventually(t, 30*time.Second, "/-/ready answering 200", func() error {
		if code, _, err := get("http://" + addr + "/-/ready"); err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, %v", code, err)
		}
		return nil
	})

	body := []byte(`{"version":"4","status":"firing","receiver":"gke-disruption-actions","alerts":[{"status":"firing",` +
		`"labels":{"alertname":"GKENodeMaintenanceNotReschedulable","node":"gke-l4-0","gke_disruption_action":"drain","can_reschedule":"false"},` +
		`"startsAt":"2025-06-07T10:00:00Z","fingerprint":"f1"}]}`)
	testenv.Eventually(t, 30*time.Second, "the webhook accepting the alert (503 until the Lease is held)", func() error {
		resp, err := http.Post("http://"+addr+"/webhook", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("code %d", resp.StatusCode)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "node drained", func() error {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, "gke-l4-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := nodeview.Of(n).Record; r.Phase != nodeview.Done || r.CordonedBy != "actions-0" || !n.Spec.Unschedulable {
			return fmt.Errorf("state %q, cordoned by %q, unschedulable %v", r.Phase, r.CordonedBy, n.Spec.Unschedulable)
		}
		return nil
	})
	lease, err := api.Client.CoordinationV1().Leases(ns).Get(ctx, actions.DefaultLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Lease in POD_NAMESPACE: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "actions-0" {
		t.Errorf("Lease holder %v, want POD_NAME actions-0", lease.Spec.HolderIdentity)
	}
	_, metrics, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`gke_disruption_actions_total{action="drain",result="succeeded"} 1`,
		`gke_disruption_webhook_requests_total{code="200"} 1`,
		`gke_disruption_action_duration_seconds_count{action="drain"} 1`,
		`gke_disruption_actions_in_progress{action="drain"} 0`,
		`gke_disruption_actions_leader 1`,
		`gke_disruption_actions_config_last_reload_successful 1`,
		`gke_disruption_action_state{action="drain",node="gke-l4-0",state="done"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestActionsCommandRefusesBadPolicy(t *testing.T) {
	policy := writePolicy(t, "pools: [{name: serving, maxUnavailable: 150%}]\n")
	app := kingpin.New(name, "")
	run := actionsCommand(app)
	if _, err := app.Parse([]string{"actions", "--config.file=" + policy}); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), promslog.NewNopLogger())
	if err == nil || !strings.Contains(err.Error(), "pools[0].maxUnavailable") || !strings.Contains(err.Error(), "150%") {
		t.Errorf("start-up error %v should name the key and the value", err)
	}
}

// TestActionsCommandRefusesBadRepairGuardRails: a bad value of a repair guard rail stops the service at start-up,
// naming the key.
func TestActionsCommandRefusesBadRepairGuardRails(t *testing.T) {
	for policy, key := range map[string]string{
		"pools: [{name: gpu, repair: {maxPerNode: 0}}]\n":               "pools[0].repair.maxPerNode",
		"pools: [{name: gpu, repair: {correlation: {nodes: 1}}}]\n":     "pools[0].repair.correlation.nodes",
		"pools: [{name: gpu, repair: {maxPerHour: often}}]\n":           "pools[0].repair.maxPerHour",
		"pools: [{name: gpu}]\nrepair: {maxPerHour: 0}\n":               "repair.maxPerHour",
		"pools: [{name: gpu, repair: {correlation: {window: soon}}}]\n": "pools[0].repair.correlation.window",
	} {
		app := kingpin.New(name, "")
		run := actionsCommand(app)
		if _, err := app.Parse([]string{"actions", "--config.file=" + writePolicy(t, policy)}); err != nil {
			t.Fatal(err)
		}
		if err := run(context.Background(), promslog.NewNopLogger()); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("policy %q: start-up error %v should name %s", policy, err, key)
		}
	}
}

// readyNodeWithMaintenance creates a Ready node of pool l4-serve with maintenance scheduled.
func readyNodeWithMaintenance(t *testing.T, api *testenv.APIServer, name string) {
	t.Helper()
	ctx := context.Background()
	node, err := api.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"cloud.google.com/gke-nodepool": "l4-serve",
			"cloud.google.com/scheduled-maintenance-time": "1750000000"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := api.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runActions runs the actions command until ctx ends and returns its error.
func runActions(ctx context.Context, t *testing.T, args ...string) <-chan error {
	t.Helper()
	app := kingpin.New(name, "")
	run := actionsCommand(app)
	if _, err := app.Parse(append([]string{"actions"}, args...)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, promslog.NewNopLogger()) }()
	return done
}

// TestActionsCommandExitsWhenItCannotServe: a replica that cannot serve webhooks (port in use, bad web config)
// exits with the reason and never campaigns for the Lease.
func TestActionsCommandExitsWhenItCannotServe(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ns := api.Namespace("exits")
	t.Setenv("POD_NAMESPACE", ns)
	policy := writePolicy(t, "pools: [{name: all}]\n")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	badWebConfig := writePolicy(t, "tls_server_config: {cert_file: /nonexistent.pem}\nbasic_auth_users: [not a map]\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"port in use", []string{"--web.listen-address=" + taken.Addr().String()}, "address already in use"},
		{"bad web config", []string{"--web.listen-address=" + freeAddress(t), "--web.config.file=" + badWebConfig}, "serving webhooks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := runActions(ctx, t, append([]string{"--kubeconfig=" + api.Kubeconfig, "--config.file=" + policy}, tc.args...)...)
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("exit error %v, want one mentioning %q", err, tc.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("the command kept running although it cannot serve webhooks")
			}
			if _, err := api.Client.CoordinationV1().Leases(ns).Get(context.Background(), actions.DefaultLeaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a replica that cannot serve must not hold the Lease: %v", err)
			}
		})
	}
}

// TestActionsCommandReloadsPolicy: the policy is reloaded when the file changes and on SIGHUP; a bad file keeps
// the running policy and says so in gke_disruption_actions_config_last_reload_successful.
func TestActionsCommandReloadsPolicy(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Setenv("POD_NAMESPACE", api.Namespace("reload"))
	ctx := context.Background()
	readyNodeWithMaintenance(t, api, "gke-l4-reload")
	const paused = "paused: true\npools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}}]\ndrain: {timeout: 1m}\n"
	path := writePolicy(t, paused)
	addr := freeAddress(t)
	startCommand(t, actionsCommand, "actions", "--kubeconfig="+api.Kubeconfig, "--config.file="+path, "--web.listen-address="+addr,
		"--config.reload-interval=200ms")
	body := []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing",` +
		`"labels":{"alertname":"GKENodeMaintenanceNotReschedulable","node":"gke-l4-reload","gke_disruption_action":"drain"},` +
		`"startsAt":"2025-06-07T10:00:00Z"}]}`)
	testenv.Eventually(t, 30*time.Second, "the alert accepted by the leader", func() error {
		resp, err := http.Post("http://"+addr+"/webhook", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("code %d", resp.StatusCode)
		}
		return nil
	})
	waitMetrics := func(step string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, step, func() error {
			_, m, err := get("http://" + addr + "/metrics")
			if err != nil {
				return err
			}
			for _, w := range want {
				if !strings.Contains(m, w) {
					return fmt.Errorf("no %s", w)
				}
			}
			return nil
		})
	}
	waitMetrics("waiting while paused", `gke_disruption_actions_waiting{action="drain",pool="serving",reason="paused"} 1`)

	if err := os.WriteFile(path, []byte("pools: [{name: serving, maxUnavailable: 150%}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitMetrics("a bad file keeps the running policy", `gke_disruption_actions_config_last_reload_successful 0`,
		`gke_disruption_actions_waiting{action="drain",pool="serving",reason="paused"} 1`)

	if err := os.WriteFile(path, []byte(strings.Replace(paused, "paused: true\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitMetrics("the fixed file loaded", `gke_disruption_actions_config_last_reload_successful 1`)
	testenv.Eventually(t, 30*time.Second, "drained once unpaused", func() error {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, "gke-l4-reload", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := nodeview.Of(n).Record; r.Phase != nodeview.Done {
			return fmt.Errorf("state %q", r.Phase)
		}
		return nil
	})
}

// TestConfigWatcherReloadsOnSignal: with no file check due, a SIGHUP alone reloads the policy.
func TestConfigWatcherReloadsOnSignal(t *testing.T) {
	path := writePolicy(t, "pools: [{name: a}]\n")
	loaded := make(chan bool, 4)
	reg := prometheus.NewRegistry()
	w, err := actions.NewConfigWatcher(promslog.NewNopLogger(), path, time.Hour, func(c *config.Config) error { loaded <- c.Paused; return nil }, reg)
	if err != nil {
		t.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx, signals)
	if err := os.WriteFile(path, []byte("paused: true\npools: [{name: a}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	signals <- syscall.SIGHUP
	select {
	case paused := <-loaded:
		if !paused {
			t.Error("the reloaded policy is not the file's new content")
		}
	case <-time.After(time.Minute):
		t.Fatal("SIGHUP did not reload the policy")
	}
}

// TestActionsCommandRefusesAnotherCluster: the service learns its cluster from the metadata server (or --cluster)
// and refuses, with 400 and the reason, an alert that names another cluster.
func TestActionsCommandRefusesAnotherCluster(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Setenv("POD_NAMESPACE", api.Namespace("actions"))
	readyNodeWithMaintenance(t, api, "gke-l4-0")
	policy := writePolicy(t, "pools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}}]\n")
	md := mdsim.New(mdsim.Instance{Name: "n", ID: "1", Zone: "us-central1-a", ProjectID: "p1", NumericProjectID: "1",
		ClusterName: "prod-a", ClusterLocation: "us-central1"})
	ts := httptest.NewServer(md)
	t.Cleanup(func() { md.Close(); ts.Close() })
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))

	for _, tc := range []struct {
		name  string
		flags []string
		own   string
	}{
		{"from the metadata server", nil, "prod-a"},
		{"from --cluster", []string{"--cluster=prod-c"}, "prod-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddress(t)
			startCommand(t, actionsCommand, append([]string{"actions", "--kubeconfig=" + api.Kubeconfig, "--config.file=" + policy,
				"--web.listen-address=" + addr}, tc.flags...)...)
			body := []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing",` +
				`"labels":{"alertname":"GKENodeMaintenanceNotReschedulable","node":"gke-l4-0","gke_disruption_action":"drain","cluster":"prod-b"},` +
				`"startsAt":"2025-06-07T10:00:00Z"}]}`)
			var reply string
			testenv.Eventually(t, 30*time.Second, "the webhook refusing the alert", func() error {
				resp, err := http.Post("http://"+addr+"/webhook", "application/json", bytes.NewReader(body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				reply = string(b)
				if resp.StatusCode != http.StatusBadRequest {
					return fmt.Errorf("code %d: %s", resp.StatusCode, b)
				}
				return nil
			})
			if !strings.Contains(reply, `"prod-b"`) || !strings.Contains(reply, strconv.Quote(tc.own)) {
				t.Errorf("reply %q does not name both clusters", reply)
			}
			_, metrics, err := get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(metrics, `gke_disruption_webhook_requests_total{code="400"} 1`) {
				t.Errorf("/metrics does not count the refusal")
			}
			n, err := api.Client.CoreV1().Nodes().Get(context.Background(), "gke-l4-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable {
				t.Error("another cluster's alert cordoned the node")
			}
		})
	}
}
