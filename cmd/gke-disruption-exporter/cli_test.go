package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// mainEnv makes the test binary run main() with the arguments after "--", so a test can see the process's real
// exit code and stderr.
const mainEnv = "GKE_DISRUPTION_EXPORTER_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{name}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the binary's main with args and returns its exit code, stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "KUBECONFIG=/nonexistent")
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
// no rights, and "node-reader", a user who may read nodes and pods only (impersonation), one with a bad token and one pointing at a port nothing listens on.
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
		for _, user := range []string{"nobody", "node-reader"} {
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
	if code != 0 || strings.TrimSpace(stdout) != "[]" || stderr != "" {
		t.Errorf("status as admin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	testenv.Eventually(t, 30*time.Second, "status as node-reader", func() error {
		code, stdout, stderr := runMain(t, "status", "--kubeconfig="+withNobody, "--context=node-reader", "-o", "json")
		if code != 0 || strings.TrimSpace(stdout) != "[]" {
			return fmt.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
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

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
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
				continue // status needs only nodes: checked below
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

// grantNodeReader lets user node-reader list and watch nodes and pods, nothing else.
func grantNodeReader(t *testing.T, api *testenv.APIServer) {
	t.Helper()
	ctx := context.Background()
	if _, err := api.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "pods"},
			Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: "node-reader"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
