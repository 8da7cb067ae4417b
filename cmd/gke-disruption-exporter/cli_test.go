package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// mainEnv makes the test binary run main() with the arguments after "--", so a test can see the process's real
// exit code and stderr.
const mainEnv = "GKE_DISRUPTION_EXPORTER_RUN_MAIN"

// argv0Env, when set, is the program name main sees (os.Args[0]).
const argv0Env = "GKE_DISRUPTION_EXPORTER_ARGV0"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{cmp.Or(os.Getenv(argv0Env), name)}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	// status prints local time: the tests' processes, and the commands they run, read UTC.
	os.Setenv("TZ", "UTC")
	time.Local = time.UTC
	os.Exit(m.Run())
}

// runMain runs the binary's main with args and returns its exit code, stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runMainEnv(t, []string{"KUBECONFIG=/nonexistent"}, args...)
}

// runMainEnv is runMain with env added to the process's environment.
func runMainEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// kubeconfigs writes, next to the API server's admin kubeconfig, one with contexts "nobody", acting as a user with
// no rights, "node-reader", a user who may read nodes and pods only, and "deployment-reader", who may also read
// Deployments (impersonation, rights granted by the tests), one with a bad token and one pointing at a port nothing
// listens on.
func kubeconfigs(t *testing.T, api *testenv.APIServer) (withNobody, badToken, unreachable string) {
	t.Helper()
	dir := t.TempDir()
	write := func(file string, edit func(*clientcmdapi.Config)) string {
		cfg, err := clientcmd.LoadFromFile(api.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		path := filepath.Join(dir, file)
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	withNobody = write("nobody", func(k *clientcmdapi.Config) {
		for _, user := range []string{"nobody", "node-reader", "deployment-reader"} {
			admin := *k.AuthInfos["admin"]
			admin.Impersonate = user
			k.AuthInfos[user] = &admin
			ctx := *k.Contexts["localenv"]
			ctx.AuthInfo = user
			k.Contexts[user] = &ctx
		}
	})
	badToken = write("bad-token", func(k *clientcmdapi.Config) { k.AuthInfos["admin"].Token = "not-a-token" })
	unreachable = write("unreachable", func(k *clientcmdapi.Config) { k.Clusters["localenv"].Server = "https://" + freeAddress(t) })
	return withNobody, badToken, unreachable
}

// oneLine checks a failure's stderr: one line, naming the command, no stack trace or log record.
func oneLine(t *testing.T, stderr, command, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, name+" "+command+": ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q: want one line %q… containing %q", stderr, name+" "+command+": ", want)
	}
}

// TestTerminalCommandsExitCodes runs status and audit as processes against a real API server: --context selects a
// user, and every way of failing to read the cluster is exit 2 and one line.
func TestTerminalCommandsExitCodes(t *testing.T) {
	api := testenv.StartAPIServer(t)
	withNobody, badToken, unreachable := kubeconfigs(t, api)

	grantNodeReader(t, api)
	code, stdout, stderr := runMain(t, "status", "--kubeconfig="+withNobody, "--context=localenv", "-o", "json")
	report := statusReport(t, stdout)
	if code != 0 || len(report.Nodes) != 0 || stderr != "" || report.WorkloadsUnknown != "" ||
		!strings.Contains(report.BudgetsUnknown, `deployments.apps "gke-disruption-exporter-actions" not found`) {
		t.Errorf("status as admin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Reading nodes is enough for status: what else is denied is a header line, not a failure.
	testenv.Eventually(t, 30*time.Second, "status as node-reader", func() error {
		code, stdout, stderr := runMain(t, "status", "--kubeconfig="+withNobody, "--context=node-reader", "-o", "json")
		if code != 0 || stderr != "" {
			return fmt.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		report := statusReport(t, stdout)
		if len(report.Nodes) != 0 || report.Budgets != nil ||
			!strings.HasPrefix(report.WorkloadsUnknown, `permission denied (RBAC) listing PodDisruptionBudgets`) ||
			!strings.HasPrefix(report.BudgetsUnknown, `permission denied (RBAC) reading Deployment gke-disruption-exporter/gke-disruption-exporter-actions`) {
			return fmt.Errorf("stdout %s", stdout)
		}
		return nil
	})
	code, stdout, stderr = runMain(t, "audit", "--kubeconfig="+withNobody, "--context=localenv")
	if code != 0 || stdout != "No readiness findings.\n" || stderr != "" {
		t.Errorf("audit as admin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A usage error is exit 2 too, never audit's 1.
	if code, _, stderr := runMain(t, "audit", "--fail-on=bogus"); code != 2 || !strings.Contains(stderr, "bogus") {
		t.Errorf("audit --fail-on=bogus: exit %d, stderr %q; want 2 naming the value", code, stderr)
	}

	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("pools:\n  - name: all\n    maxUnavailable: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"bad policy file", "policy file " + policy + `: pools[0].maxUnavailable: "none" is neither a count`,
			[]string{"--kubeconfig=" + withNobody, "--context=localenv", "--config.file=" + policy}},
		{"RBAC denied", `permission denied (RBAC) listing nodes: nodes is forbidden: User "nobody" cannot list resource "nodes"`,
			[]string{"--kubeconfig=" + withNobody, "--context=nobody"}},
		{"RBAC denied a resource audit reads", `permission denied (RBAC) listing PodDisruptionBudgets: poddisruptionbudgets.policy is forbidden: User "node-reader"`,
			[]string{"--kubeconfig=" + withNobody, "--context=node-reader"}},
		{"bad credentials", "unauthorized listing nodes", []string{"--kubeconfig=" + badToken}},
		{"unreachable", "cannot reach the API server https://127.0.0.1:", []string{"--kubeconfig=" + unreachable}},
		{"unknown context", `context "elsewhere" does not exist`, []string{"--kubeconfig=" + withNobody, "--context=elsewhere"}},
	} {
		for _, command := range []string{"status", "audit"} {
			if tc.name == "RBAC denied a resource audit reads" && command == "status" {
				continue // status needs only nodes: checked above
			}
			if tc.name == "bad policy file" && command == "audit" {
				continue // a status flag
			}
			t.Run(tc.name+"/"+command, func(t *testing.T) {
				variants := [][]string{nil}
				if command == "status" {
					variants = append(variants, []string{"--watch"})
				}
				for _, extra := range variants {
					code, stdout, stderr := runMain(t, append(append([]string{command}, tc.args...), extra...)...)
					if code != 2 || stdout != "" {
						t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", extra, code, stdout)
					}
					oneLine(t, stderr, command, tc.want)
				}
			})
		}
	}
}

// statusReport parses status's JSON output.
func statusReport(t *testing.T, stdout string) cli.Report {
	t.Helper()
	var r cli.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Errorf("status -o json: %v in %q", err, stdout)
	}
	return r
}

// grantNodeReader lets user node-reader list and watch nodes and pods, nothing else.
func grantNodeReader(t *testing.T, api *testenv.APIServer) {
	t.Helper()
	grant(t, api, "node-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes", "pods"},
		Verbs: []string{"get", "list", "watch"}})
}

// grant gives user the rules through a ClusterRole and binding of its name.
func grant(t *testing.T, api *testenv.APIServer, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := api.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestStatusBudgets runs status as a process: budgets from the actions Deployment's ConfigMap, from a local file,
// and, when the Deployment is elsewhere or RBAC denies the ConfigMap, a header line and exit 0.
func TestStatusBudgets(t *testing.T) {
	api := testenv.StartAPIServer(t)
	withNobody, _, _ := kubeconfigs(t, api)
	ctx := context.Background()
	ns := "gke-disruption-exporter"
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const doc = "maxDisruptedNodes: 10\npools:\n  - name: serving\n    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}\n"
	if _, err := api.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "policy-7fk2"},
		Data: map[string]string{"policy.yaml": doc}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/component": "actions"}
	if _, err := api.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gke-disruption-exporter-actions"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "actions", Image: "example.com/gke-disruption-exporter",
					Args:         []string{"actions", "--config.file=/etc/gke-disruption-exporter/policy/policy.yaml"},
					VolumeMounts: []v1.VolumeMount{{Name: "policy", MountPath: "/etc/gke-disruption-exporter/policy"}}}},
				Volumes: []v1.Volume{{Name: "policy", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "policy-7fk2"}}}}},
			}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyNodeWithMaintenance(t, api, "gke-l4-0")
	admin := []string{"status", "--kubeconfig=" + withNobody, "--context=localenv"}

	code, stdout, stderr := runMain(t, admin...)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "Policy: ConfigMap gke-disruption-exporter/policy-7fk2 key policy.yaml") ||
		!strings.Contains(stdout, "Cluster cap: 0/10 disrupted") || !strings.Contains(stdout, "serving ") {
		t.Errorf("discovered: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}

	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("paused: true\n"+doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runMain(t, append(admin, "--config.file="+file, "-o", "json")...)
	if r := statusReport(t, stdout); code != 0 || stderr != "" || r.Budgets == nil || r.Budgets.Source != "file "+file || !r.Budgets.Paused ||
		len(r.Budgets.Pools) != 1 || r.Budgets.Pools[0].Nodes != 1 || len(r.Nodes) != 1 {
		t.Errorf("local file: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}

	code, stdout, _ = runMain(t, append(admin, "--actions.deployment=elsewhere/actions")...)
	if want := `Budgets unknown: reading Deployment elsewhere/actions: deployments.apps "actions" not found`; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("no Deployment: exit %d, want %q in\n%s", code, want, stdout)
	}

	grant(t, api, "deployment-reader",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}})
	testenv.Eventually(t, 30*time.Second, "status as deployment-reader", func() error {
		code, stdout, stderr := runMain(t, "status", "--kubeconfig="+withNobody, "--context=deployment-reader")
		want := `Budgets unknown: permission denied (RBAC) reading ConfigMap gke-disruption-exporter/policy-7fk2: configmaps "policy-7fk2" is forbidden`
		if code != 0 || stderr != "" || !strings.Contains(stdout, want) || !strings.Contains(stdout, "gke-l4-0 ") {
			return fmt.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
		}
		return nil
	})
}
