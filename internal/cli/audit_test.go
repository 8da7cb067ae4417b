package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
	"github.com/prometheus/common/promslog"
)

var readinessConfig = readiness.Config{MinGracePeriod: 30 * time.Second, SpotNotice: 15 * time.Second}

func runAudit(t *testing.T, api *testenv.APIServer, failOn readiness.Severity, output string) (string, error) {
	t.Helper()
	return runAuditIn(t, api, failOn, output, "")
}

func runAuditIn(t *testing.T, api *testenv.APIServer, failOn readiness.Severity, output, namespace string) (string, error) {
	t.Helper()
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Audit(context.Background(), promslog.NewNopLogger(), api.Client, meta, &out,
		AuditOptions{FailOn: failOn, Output: output, Namespace: namespace, Config: readinessConfig, SyncTimeout: 30 * time.Second})
	return out.String(), err
}

func exitCode(err error) int {
	var e *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	}
	return -1
}

// TestAuditExitCodes grows a cluster from clean to warnings to errors and checks the output and --fail-on's exit
// code at each step, all read by the workloads collector from a real API server.
func TestAuditExitCodes(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	core := api.Client.CoreV1()

	// No GPU/TPU/Spot nodes: nothing to find, whatever --fail-on.
	out, err := runAudit(t, api, readiness.Warning, OutputTable)
	if code := exitCode(err); code != 0 {
		t.Fatalf("clean cluster: exit %d (%v)", code, err)
	}
	golden(t, "audit-clean.table", []byte(out))
	if out, _ := runAudit(t, api, readiness.Warning, OutputJSON); out != "[]\n" {
		t.Errorf("clean cluster as JSON: %q, want an empty list", out)
	}

	// A GPU node on an old GKE version, graceful termination on, a pod with short grace: warnings only.
	if _, err := core.ConfigMaps(gke.NamespaceDisruptionHandling).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gke.ConfigMapDisruptionHandling, Namespace: gke.NamespaceDisruptionHandling},
		Data:       map[string]string{"gracefulTermination": "true"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-l4-0",
		Labels: map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.KubeletVersion = "v1.30.5-gke.1014001"
	if _, err := core.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := "serving" // fixed: it is in the goldens
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod's workload is its top owner: ReplicaSet infer-7d9 is owned by Deployment infer.
	yes := true
	labels := map[string]string{"app": "infer"}
	rs, err := api.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "infer-7d9", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1",
			Kind: "Deployment", Name: "infer", UID: "0f6c5b2e-0000-4000-8000-000000000001", Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/infer"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(5)
	if _, err := core.Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "infer-7d9-x2k4p", Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "gke-l4-0", TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: "example.com/infer"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = runAudit(t, api, readiness.Error, OutputTable)
	if code := exitCode(err); code != 0 {
		t.Fatalf("warnings with --fail-on=error: exit %d (%v)", code, err)
	}
	golden(t, "audit-warnings.table", []byte(out))
	if _, err = runAudit(t, api, readiness.Warning, OutputTable); exitCode(err) != ExitFindings {
		t.Fatalf("warnings with --fail-on=warning: %v, want exit 1", err)
	}

	// A PodDisruptionBudget that allows no disruption, and graceful termination turned off: errors.
	zero := intstr.FromInt32(0)
	if _, err := api.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "infer"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "infer"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := core.ConfigMaps(gke.NamespaceDisruptionHandling).Delete(ctx, gke.ConfigMapDisruptionHandling, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = runAudit(t, api, readiness.Error, OutputTable)
	if exitCode(err) != ExitFindings {
		t.Fatalf("errors with --fail-on=error: %v, want exit 1", err)
	}
	golden(t, "audit-errors.table", []byte(out))
	out, _ = runAudit(t, api, readiness.Error, OutputJSON)
	golden(t, "audit-errors.json", []byte(out))

	// --namespace: another namespace's view keeps the cluster's own check only, and still fails on it.
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "training"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = runAuditIn(t, api, readiness.Error, OutputTable, "training")
	if exitCode(err) != ExitFindings {
		t.Fatalf("other namespace with a cluster error: %v, want exit 1", err)
	}
	golden(t, "audit-other-namespace.table", []byte(out))
	if out, _ := runAuditIn(t, api, readiness.Error, OutputTable, ns); out != string(mustRead(t, "audit-errors.table")) {
		t.Errorf("the findings' own namespace shows less than the whole cluster:\n%s", out)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
