package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// actionsProcess is the actions command run as a process of its own, so a test can stop and resume it.
type actionsProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testenv.SyncBuffer
}

func startActionsProcess(t *testing.T, kubeconfig, namespace, podName, policy string, extra ...string) *actionsProcess {
	t.Helper()
	addr := freeAddress(t)
	args := append([]string{"-test.run=^$", "--", "actions", "--kubeconfig=" + kubeconfig, "--config.file=" + policy,
		"--web.listen-address=" + addr, "--log.level=debug"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "POD_NAMESPACE="+namespace, "POD_NAME="+podName)
	p := &actionsProcess{cmd: cmd, addr: addr, stderr: &testenv.SyncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("logs of %s:\n%s", podName, p.stderr.String())
		}
	})
	return p
}

func (p *actionsProcess) url(path string) string { return "http://" + p.addr + path }

// TestActionsFrozenLeaderWritesNothing stops the leading replica (SIGSTOP) until the other has taken the Lease,
// frees the budget slot its waiting alert was waiting for, and resumes it (SIGCONT): the paused replica, whose
// leader election has not yet noticed it lost the Lease, must neither claim the node nor answer ready.
func TestActionsFrozenLeaderWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Lease to expire")
	}
	api := testenv.StartAPIServer(t)
	ns := api.Namespace("fence")
	ctx := context.Background()
	readyNodeWithMaintenance(t, api, "gke-l4-fence-0")
	readyNodeWithMaintenance(t, api, "gke-l4-fence-1")
	policy := writePolicy(t, "pools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}, maxUnavailable: 1}]\ndrain: {timeout: 1m}\n")

	a := startActionsProcess(t, api.Kubeconfig, ns, "actions-a", policy)
	testenv.Eventually(t, time.Minute, "actions-a ready (leading)", func() error {
		if code, _, err := get(a.url("/-/ready")); err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, %v", code, err)
		}
		return nil
	})
	b := startActionsProcess(t, api.Kubeconfig, ns, "actions-b", policy)

	body := []byte(`{"version":"4","status":"firing","alerts":[` +
		`{"status":"firing","labels":{"alertname":"GKENodeMaintenanceNotReschedulable","node":"gke-l4-fence-0","gke_disruption_action":"drain"},"startsAt":"2025-06-07T10:00:00Z"},` +
		`{"status":"firing","labels":{"alertname":"GKENodeMaintenanceNotReschedulable","node":"gke-l4-fence-1","gke_disruption_action":"drain"},"startsAt":"2025-06-07T10:00:00Z"}]}`)
	resp, err := http.Post(a.url("/webhook"), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %d", resp.StatusCode)
	}
	// One node is drained; the other waits for the pool's only slot.
	var drained, waiting string
	testenv.Eventually(t, time.Minute, "one node drained, the other waiting", func() error {
		_, m, err := get(a.url("/metrics"))
		if err != nil {
			return err
		}
		if !strings.Contains(m, `gke_disruption_actions_waiting{action="drain",pool="serving",reason="pool_budget"} 1`) {
			return fmt.Errorf("no alert waiting for the pool budget")
		}
		drained, waiting = "", ""
		for _, name := range []string{"gke-l4-fence-0", "gke-l4-fence-1"} {
			n, err := api.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch nodeview.Of(n).Record.Phase {
			case nodeview.Done:
				drained = name
			case "":
				waiting = name
			}
		}
		if drained == "" || waiting == "" {
			return fmt.Errorf("drained %q, waiting %q", drained, waiting)
		}
		return nil
	})

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "actions-b taking the Lease", func() error {
		lease, err := api.Client.CoordinationV1().Leases(ns).Get(ctx, actions.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h != "actions-b" {
			return fmt.Errorf("holder %v", h)
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, "actions-b ready", func() error {
		if code, _, err := get(b.url("/-/ready")); err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, %v", code, err)
		}
		return nil
	})
	// The operator clears the drained node: the slot the paused replica's alert waits for is free.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, drained, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = false
		for k := range n.Annotations {
			if nodeview.OwnAnnotation(k) {
				delete(n.Annotations, k)
			}
		}
		_, err = api.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before, err := api.Client.CoreV1().Nodes().Get(ctx, waiting, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Until its leader election gives up, the resumed replica still has its alert and sees the slot free.
	testenv.Eventually(t, time.Minute, "actions-a no longer leading", func() error {
		_, m, err := get(a.url("/metrics"))
		if err != nil {
			return err
		}
		if !strings.Contains(m, "gke_disruption_actions_leader 0") {
			return fmt.Errorf("still leading")
		}
		return nil
	})
	after, err := api.Client.CoreV1().Nodes().Get(ctx, waiting, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := nodeview.Of(after).Record; r.Phase != "" || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the paused replica wrote after it lost the Lease: %s state %q claimed by %q (resourceVersion %s -> %s)",
			waiting, r.Phase, r.ClaimedBy, before.ResourceVersion, after.ResourceVersion)
	}
	if code, _, _ := get(a.url("/-/ready")); code == http.StatusOK {
		t.Error("the resumed replica answers ready without the Lease")
	}
}
