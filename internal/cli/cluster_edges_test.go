package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/prometheus/common/promslog"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// asUser is a client and metadata client that act as user (impersonated by the admin).
func asUser(t *testing.T, api *testenv.APIServer, user string) (kubernetes.Interface, metadata.Interface) {
	t.Helper()
	cfg := rest.CopyConfig(api.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, meta
}

// TestEdgeConfigMapGetOnly: an operator's role grants everything the docs list, but the disruption-handling
// ConfigMap only by `get` on its name (the usual way to grant one object). The preflight reads it with a get and
// passes; the workloads collector lists and watches it and is denied. audit then waits out its whole sync timeout
// (a minute by default) and exits 2 with "nodes, pods, owners and PodDisruptionBudgets not read within 1m0s",
// naming neither RBAC nor the ConfigMap; status hangs the same minute and then says "pods and their owners not
// read", although pods were readable.
func TestEdgeConfigMapGetOnly(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	const user = "cm-getter"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "statefulsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	rbac := api.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := gke.NamespaceDisruptionHandling
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{gke.ConfigMapDisruptionHandling}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gke.ConfigMapDisruptionHandling},
		Data: map[string]string{"gracefulTermination": "true"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client, meta := asUser(t, api, user)
	testenv.Eventually(t, 30*time.Second, "the grants in force", func() error {
		_, err := client.CoreV1().ConfigMaps(ns).Get(ctx, gke.ConfigMapDisruptionHandling, metav1.GetOptions{})
		if err == nil {
			_, err = client.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
		}
		return err
	})

	t.Run("audit", func(t *testing.T) {
		err := Audit(ctx, promslog.NewNopLogger(), client, meta, &bytes.Buffer{},
			AuditOptions{FailOn: readiness.Warning, Output: OutputTable, Config: readinessConfig, SyncTimeout: 5 * time.Second})
		if exitCode(err) != ExitAPI || !strings.Contains(err.Error(), "permission denied (RBAC)") || !strings.Contains(err.Error(), "ConfigMap") {
			t.Errorf("got exit %d: %v; want exit 2 naming the RBAC denial of the ConfigMap's list/watch", exitCode(err), err)
		}
	})
	t.Run("status", func(t *testing.T) {
		var out bytes.Buffer
		err := Status(ctx, client, meta, &out, StatusOptions{Output: OutputTable, Now: clock, SyncTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Workloads unknown: permission denied (RBAC)") {
			t.Errorf("want the ConfigMap's RBAC denial named at once, got:\n%s", out.String())
		}
	})
}

// TestEdgeWatchAPIServerGone: the API server goes away under `status --watch` and stays away. The screen keeps
// the last frame, with nothing on it or on stderr saying it is stale, for as long as the outage lasts; the
// minute re-render even keeps its relative times ageing, so it looks live. An operator watching for a node to go
// into maintenance is told nothing has changed. kubectl get -w ends with an error instead.
func TestEdgeWatchAPIServerGone(t *testing.T) {
	api := testenv.StartAPIServer(t)
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	createNodes(t, api.Client, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gke-a3-0",
		Labels: map[string]string{gke.LabelNodePool: "a3-train",
			gke.LabelScheduledMaintenanceTime: strconv.FormatInt(time.Now().Add(3*time.Hour).Unix(), 10)}}}})
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, api.Client, meta, out, false, StatusOptions{Output: OutputTable, Now: time.Now, SyncTimeout: 30 * time.Second,
			PolicyFile: policyFile(t)})
	}()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 30*time.Second, "the first frame", func() error {
		if !strings.Contains(out.String(), "gke-a3-0") {
			return fmt.Errorf("output %q", out.String())
		}
		return nil
	})
	before := len(out.String())
	api.StopAPIServer()

	var ended error
	testenv.Eventually(t, 75*time.Second, "the outage shown or the watch ended with it", func() error {
		select {
		case err := <-done:
			done <- err
			ended = err
			if err == nil {
				return nil
			}
			if exitCode(err) == ExitAPI && !strings.Contains(err.Error(), "\n") {
				return nil
			}
			return fmt.Errorf("watch ended with %v", err)
		default:
		}
		if since := out.String()[before:]; strings.Contains(strings.ToLower(since), "api server") {
			return nil
		}
		return fmt.Errorf("nothing said since the API server stopped; last frame still shown:\n%s", out.String()[before-min(before, 400):])
	})
	if ended == nil {
		select {
		case err := <-done:
			done <- err
			if err == nil {
				t.Errorf("the watch ended with exit 0 while the API server was gone")
			}
		default:
		}
	}
}

// TestEdgeAuditUnknownNamespace: `audit -n servng` (a typo of the team's namespace) in a pipeline prints
// "No readiness findings." and exits 0: the gate passes having checked nothing, and nothing says the namespace
// does not exist. A workload in the real namespace fails the same gate.
func TestEdgeAuditUnknownNamespace(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	core := api.Client.CoreV1()
	if _, err := core.ConfigMaps(gke.NamespaceDisruptionHandling).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gke.ConfigMapDisruptionHandling}, Data: map[string]string{"gracefulTermination": "true"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNodes(t, api.Client, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gke-l4-0",
		Labels: map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"}}}})
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "serving"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(5)
	if _, err := core.Pods("serving").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "infer"},
		Spec: corev1.PodSpec{NodeName: "gke-l4-0", TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: "example.com/infer"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := runAuditIn(t, api, readiness.Warning, OutputTable, "serving"); exitCode(err) != ExitFindings {
		t.Fatalf("the real namespace: %v, want exit 1", err)
	}
	out, err := runAuditIn(t, api, readiness.Warning, OutputTable, "servng")
	msg := out
	if err != nil {
		msg += err.Error()
	}
	if !strings.Contains(msg, "servng") {
		t.Errorf("audit -n servng: exit %d, output %q; want the missing namespace named (or exit 2)", exitCode(err), out)
	}
}

// actionsDeploymentWith is an actions Deployment with one container and volume, as a chart or kustomization might
// write it.
func actionsDeploymentWith(namespace string, c corev1.Container, volumes ...corev1.Volume) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/component": "actions"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gke-disruption-exporter-actions", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes}}},
	}
}

// setupPolicyNamespace creates the actions namespace and a policy ConfigMap in it.
func setupPolicyNamespace(t *testing.T, api *testenv.APIServer, ns, cm, key, doc string) {
	t.Helper()
	ctx := context.Background()
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm},
		Data: map[string]string{key: doc}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func replaceDeployment(t *testing.T, api *testenv.APIServer, d *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	deployments := api.Client.AppsV1().Deployments(d.Namespace)
	if err := deployments.Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "old Deployment gone", func() error {
		if _, err := deployments.Get(ctx, d.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.New("still there")
		}
		return nil
	})
	if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEdgeStatusPolicyOnProjectedVolume: the actions Deployment mounts its policy ConfigMap through a projected
// volume (how charts combine a ConfigMap with the web config Secret in one directory). The actions service reads
// it fine; status says "Budgets unknown: … is on volume config, which is not a ConfigMap".
func TestEdgeStatusPolicyOnProjectedVolume(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ns := "gke-disruption-exporter"
	setupPolicyNamespace(t, api, ns, "policy-9b7c", "policy.yaml", fleetPolicy)
	replaceDeployment(t, api, actionsDeploymentWith(ns, corev1.Container{Name: "actions", Image: "example.com/gke-disruption-exporter",
		Args:         []string{"actions", "--config.file=/etc/gke-disruption-exporter/policy.yaml"},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/gke-disruption-exporter"}}},
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "policy-9b7c"}}},
		}}}}))
	out, err := runStatus(t, api, StatusOptions{Output: OutputTable})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Policy: ConfigMap gke-disruption-exporter/policy-9b7c key policy.yaml"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
}

// TestEdgeStatusPolicyFlagSplitAcrossCommandAndArgs (passes): the image's command ends in `--config.file` and the
// Deployment's args start with its value, then `--dry-run`: the two-token form is read across command and args.
func TestEdgeStatusPolicyFlagSplitAcrossCommandAndArgs(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ns := "gke-disruption-exporter"
	setupPolicyNamespace(t, api, ns, "policy-4d2f", "rules.yaml", fleetPolicy)
	replaceDeployment(t, api, actionsDeploymentWith(ns, corev1.Container{Name: "actions", Image: "example.com/gke-disruption-exporter",
		Command:      []string{"/bin/gke-disruption-exporter", "actions", "--config.file"},
		Args:         []string{"/policy/rules.yaml", "--dry-run"},
		VolumeMounts: []corev1.VolumeMount{{Name: "policy", MountPath: "/policy/"}}},
		corev1.Volume{Name: "policy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "policy-4d2f"}}}}))
	out, err := runStatus(t, api, StatusOptions{Output: OutputTable})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Policy: ConfigMap gke-disruption-exporter/policy-4d2f key rules.yaml", "Now: dry run, window closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

// TestEdgeWatchNodeRecreated (passes): a node deleted and re-created under the same name with another maintenance
// time is redrawn with the new time, not the old one, and counted once.
func TestEdgeWatchNodeRecreated(t *testing.T) {
	api := testenv.StartAPIServer(t)
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, api.Client, meta, out, true, StatusOptions{Output: OutputTable, Now: clock, SyncTimeout: 30 * time.Second,
			PolicyFile: policyFile(t)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch ended with %v", err)
		}
	}()
	last := func() string {
		f := strings.Split(out.String(), clearScreen)
		return f[len(f)-1]
	}
	waitLast := func(step string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, step, func() error {
			l := last()
			for _, w := range want {
				if !strings.Contains(l, w) {
					return fmt.Errorf("last frame lacks %q:\n%s", w, l)
				}
			}
			return nil
		})
	}
	node := func(at time.Duration) []*corev1.Node {
		return []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gke-a3-0", Labels: map[string]string{gke.LabelNodePool: "a3-train",
			gke.LabelAccelerator: "nvidia-h100-80gb", gke.LabelScheduledMaintenanceTime: epoch(at)}}}}
	}
	waitLast("the empty frame", "No nodes with maintenance pending")
	createNodes(t, api.Client, node(2*time.Hour))
	waitLast("the node", "  in 2h00m  ", "Cluster cap: 0/1 disrupted")
	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), "gke-a3-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLast("the node gone", "No nodes with maintenance pending")
	createNodes(t, api.Client, node(5*time.Hour))
	waitLast("the node back", "  in 5h00m  ", "Cluster cap: 0/1 disrupted", "a3-train  1 ")
	if l := last(); strings.Contains(l, "  in 2h00m  ") || strings.Count(l, "gke-a3-0 ") != 1 {
		t.Errorf("the re-created node is drawn with its old state or twice:\n%s", l)
	}
}
