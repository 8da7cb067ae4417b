package main

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestKubectlHabits runs status and audit as processes against a real API server the way a kubectl user types
// them: output formats, --no-headers, node names, client flags, kubeconfig precedence, -A, and the version and
// completion commands.
func TestKubectlHabits(t *testing.T) {
	api := testenv.StartAPIServer(t)
	readyNodeWithMaintenance(t, api, "gke-prod-l4-pool-1a2b3c4d-x7kq")
	if _, err := api.Client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gke-prod-default-pool-5e6f7a8b-q2wz", Labels: map[string]string{"cloud.google.com/gke-nodepool": "default-pool"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withNobody, _, _ := kubeconfigs(t, api)
	kc := "--kubeconfig=" + api.Kubeconfig
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		code, stdout, stderr := runMain(t, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q, stdout:\n%s", args, code, stderr, stdout)
		}
		return stdout
	}
	fails := func(t *testing.T, command, want string, args ...string) {
		t.Helper()
		code, stdout, stderr := runMain(t, args...)
		if code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, stdout)
		}
		oneLine(t, stderr, command, want)
	}

	t.Run("-o yaml", func(t *testing.T) {
		var r cli.Report
		if err := yaml.Unmarshal([]byte(ok(t, "status", kc, "-o", "yaml")), &r); err != nil || len(r.Nodes) != 1 || r.Nodes[0].Pool != "l4-serve" {
			t.Errorf("status -o yaml: %v, %+v", err, r)
		}
		ok(t, "audit", kc, "-o", "yaml")
	})
	t.Run("-o name", func(t *testing.T) {
		if got := ok(t, "status", kc, "-o", "name"); got != "node/gke-prod-l4-pool-1a2b3c4d-x7kq\n" {
			t.Errorf("status -o name: %q", got)
		}
	})
	t.Run("-o jsonpath", func(t *testing.T) {
		if got := ok(t, "status", kc, "--all", "-o", "jsonpath={.nodes[*].node}"); got != "gke-prod-l4-pool-1a2b3c4d-x7kq gke-prod-default-pool-5e6f7a8b-q2wz" {
			t.Errorf("status -o jsonpath: %q", got)
		}
		if got := ok(t, "audit", kc, "-o", "jsonpath={.items}"); got != "[]" {
			t.Errorf("audit -o jsonpath: %q", got)
		}
		fails(t, "status", "jsonpath", "status", kc, "-o", "jsonpath={.nodes[")
	})
	t.Run("-o custom-columns and --no-headers", func(t *testing.T) {
		if got := ok(t, "status", kc, "-o", "custom-columns=NODE:.node,POOL:.pool"); !strings.HasPrefix(got, "NODE ") || !strings.Contains(got, "gke-prod-l4-pool-1a2b3c4d-x7kq   l4-serve\n") {
			t.Errorf("status -o custom-columns:\n%s", got)
		}
		if got := ok(t, "status", kc, "-o", "custom-columns=NODE:.node", "--no-headers"); got != "gke-prod-l4-pool-1a2b3c4d-x7kq\n" {
			t.Errorf("status -o custom-columns --no-headers: %q", got)
		}
		got := ok(t, "status", kc, "--no-headers")
		if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "gke-prod-l4-pool-1a2b3c4d-x7kq ") {
			t.Errorf("status --no-headers:\n%s", got)
		}
		fails(t, "status", `unknown output format "xml"`, "status", kc, "-o", "xml")
	})
	t.Run("status NODE", func(t *testing.T) {
		got := ok(t, "status", kc, "gke-prod-default-pool-5e6f7a8b-q2wz", "--no-headers")
		if !strings.HasPrefix(got, "gke-prod-default-pool-5e6f7a8b-q2wz ") || strings.Contains(got, "l4-pool") {
			t.Errorf("status NODE:\n%s", got)
		}
		fails(t, "status", `node "gke-gone" not found`, "status", kc, "gke-gone")
	})
	t.Run("client flags", func(t *testing.T) {
		// --as impersonates with the kubeconfig's (admin) credentials: "nobody" may not list nodes.
		fails(t, "status", "permission denied (RBAC) listing nodes", "status", kc, "--as=nobody")
		fails(t, "audit", "permission denied (RBAC)", "audit", kc, "--as=nobody", "--as-group=nobodies")
		ok(t, "status", kc, "--request-timeout=20s")
		fails(t, "status", "loading kubeconfig", "status", kc, "--request-timeout=soon")
		fails(t, "status", "cannot reach the API server https://"+strings.Split(freeAddress(t), ":")[0], "status", kc, "--server=https://"+freeAddress(t))
		ok(t, "status", "--kubeconfig="+withNobody, "--context=nobody", "--user=admin")
	})
	t.Run("$KUBECONFIG", func(t *testing.T) {
		// In a pod: kubectl reads $KUBECONFIG before the in-cluster configuration.
		code, stdout, stderr := runMainEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig, "KUBERNETES_SERVICE_HOST=127.0.0.1",
			"KUBERNETES_SERVICE_PORT=" + strings.Split(freeAddress(t), ":")[1]}, "status", "-o", "name")
		if code != 0 || stderr != "" || stdout != "node/gke-prod-l4-pool-1a2b3c4d-x7kq\n" {
			t.Errorf("exit %d, stderr %q, stdout %q", code, stderr, stdout)
		}
	})
	t.Run("audit -A", func(t *testing.T) {
		ok(t, "audit", kc, "-A")
		fails(t, "audit", "exclude each other", "audit", kc, "-A", "-n", "default")
	})
	t.Run("version", func(t *testing.T) {
		for _, args := range [][]string{{"version"}, {"--version"}} {
			if got := ok(t, args...); !strings.HasPrefix(got, name+", version ") {
				t.Errorf("%v: %q", args, got)
			}
		}
	})
	t.Run("completion", func(t *testing.T) {
		want := map[string]string{"bash": "complete -F _" + name, "zsh": "#compdef " + name, "fish": "complete -c " + name}
		for shell, w := range want {
			if got := ok(t, "completion", shell); !strings.Contains(got, w) {
				t.Errorf("completion %s:\n%s", shell, got)
			}
		}
		code, stdout, _ := runMain(t, "--completion-bash", "sta")
		if code != 0 || !strings.Contains(stdout, "status") {
			t.Errorf("--completion-bash sta: exit %d, %q", code, stdout)
		}
	})
	t.Run("kubectl plugin", func(t *testing.T) {
		code, stdout, stderr := runMainEnv(t, []string{argv0Env + "=/usr/local/bin/" + pluginBinary}, "status", kc, "-o", "name")
		if code != 0 || stdout != "node/gke-prod-l4-pool-1a2b3c4d-x7kq\n" {
			t.Errorf("as %s: exit %d, stdout %q, stderr %q", pluginBinary, code, stdout, stderr)
		}
		code, stdout, _ = runMainEnv(t, []string{argv0Env + "=" + pluginBinary}, "--help")
		if code != 0 || !strings.HasPrefix(stdout, "usage: kubectl gke-disruption ") {
			t.Errorf("as %s --help: exit %d, stdout %.200q", pluginBinary, code, stdout)
		}
	})
}

// TestAuditKubectlHabits runs audit as a process against a real API server with a finding, the way a kubectl user
// types it: -o name, custom-columns, --no-headers, -l over nodes, the client flags and $KUBECONFIG.
func TestAuditKubectlHabits(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	for _, n := range []struct{ name, pool string }{{"gke-prod-a3-train-1a2b3c4d-x7kq", "a3-train"}, {"gke-prod-l4-serve-5e6f7a8b-q2wz", "l4-serve"}} {
		if _, err := api.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{"cloud.google.com/gke-nodepool": n.pool, "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gke-disruption-handling"},
		Data: map[string]string{"gracefulTermination": "true"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(5) // below --readiness.min-grace-period: grace_period_short
	if _, err := api.Client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
		Spec: v1.PodSpec{NodeName: "gke-prod-a3-train-1a2b3c4d-x7kq", TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "main", Image: "example.com/trainer"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := "--kubeconfig=" + api.Kubeconfig
	// finds runs audit expecting the finding: exit 1, stdout returned.
	finds := func(t *testing.T, args ...string) string {
		t.Helper()
		code, stdout, stderr := runMain(t, append([]string{"audit"}, args...)...)
		if code != 1 || !strings.Contains(stderr, "readiness findings at or above warning") {
			t.Fatalf("%v: exit %d, stderr %q; want 1 for the finding", args, code, stderr)
		}
		return stdout
	}
	if got := finds(t, kc, "-o", "name"); got != "pod/trainer\n" {
		t.Errorf("audit -o name: %q", got)
	}
	if got := finds(t, kc, "--no-headers"); got != "warning  grace_period_short  default  Pod  trainer  1\n" {
		t.Errorf("audit --no-headers: %q", got)
	}
	if got := finds(t, kc, "-o", "custom-columns=CHECK:.check,WORKLOAD:.workload,PODS:.pods"); got != "CHECK                WORKLOAD   PODS\ngrace_period_short   trainer    1\n" {
		t.Errorf("audit -o custom-columns:\n%s", got)
	}
	if got := finds(t, kc, "-o", "custom-columns=CHECK:.check", "--no-headers"); got != "grace_period_short\n" {
		t.Errorf("audit -o custom-columns --no-headers: %q", got)
	}
	// -l selects nodes, as kubectl get nodes -l: the other pool's nodes carry no finding.
	finds(t, kc, "-l", "cloud.google.com/gke-nodepool=a3-train")
	finds(t, kc, "--selector=cloud.google.com/gke-accelerator")
	if code, stdout, stderr := runMain(t, "audit", kc, "-l", "cloud.google.com/gke-nodepool=l4-serve"); code != 0 || stdout != "No readiness findings.\n" {
		t.Errorf("audit -l on the other pool: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	finds(t, kc, "--request-timeout=20s")
	for _, tc := range []struct{ want, flag string }{
		{"bad --selector", "-l=a in ("},
		{"loading kubeconfig", "--request-timeout=soon"},
		{"cannot reach the API server https://" + strings.Split(freeAddress(t), ":")[0], "--server=https://" + freeAddress(t)},
	} {
		code, stdout, stderr := runMain(t, "audit", kc, tc.flag)
		if code != 2 || stdout != "" {
			t.Errorf("audit %s: exit %d, stdout %q; want 2 and nothing", tc.flag, code, stdout)
		}
		oneLine(t, stderr, "audit", tc.want)
	}
	// In a pod: $KUBECONFIG before the in-cluster configuration.
	code, stdout, _ := runMainEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig, "KUBERNETES_SERVICE_HOST=127.0.0.1",
		"KUBERNETES_SERVICE_PORT=" + strings.Split(freeAddress(t), ":")[1]}, "audit", "-o", "name")
	if code != 1 || stdout != "pod/trainer\n" {
		t.Errorf("audit with $KUBECONFIG in a pod: exit %d, stdout %q", code, stdout)
	}
}
