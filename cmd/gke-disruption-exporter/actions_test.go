package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
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
	node, err := api.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gke-l4-0", Labels: map[string]string{"cloud.google.com/gke-nodepool": "l4-serve"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := api.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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
		if r := nodestate.Read(n); r.Phase != nodestate.Done || r.CordonedBy != "actions-0" || !n.Spec.Unschedulable {
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
