package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
	"github.com/prometheus/common/promslog"
)

func TestHandlerConflicts(t *testing.T) {
	node := func(name, pool string) *nodeview.View {
		return nodeview.Of(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gke.LabelNodePool: pool}}})
	}
	onHandler := []*nodeview.View{node("a1", "a3-train"), node("a2", "a3-train"), node("l1", "l4-serve"), node("x1", "other")}
	const pools = "pools:\n- name: training\n  nodeSelector: {cloud.google.com/gke-nodepool: a3-train}\n  strategy: parallel\n" +
		"- name: serving\n  nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}\n  strategy: rolling\n"
	for _, tc := range []struct {
		name   string
		policy string
		dryRun bool
		want   string
	}{
		{name: "drain first", policy: pools + "performMaintenance:\n  drainFirst: true\n", want: "a3-train,l4-serve"},
		{name: "GKE's handler drains alone", policy: pools + "performMaintenance:\n  drainFirst: false\n"},
		{name: "dry run in the file", policy: "dryRun: true\n" + pools + "performMaintenance:\n  drainFirst: true\n"},
		{name: "dry run flag", policy: pools + "performMaintenance:\n  drainFirst: true\n", dryRun: true},
		{name: "pools the policy does not match", policy: "pools:\n- name: x\n  nodeSelector: {team: x}\n  strategy: parallel\n" +
			"performMaintenance:\n  drainFirst: true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			got := handlerConflicts(&Policy{Config: cfg, DryRunFlag: tc.dryRun}, onHandler)
			if strings.Join(got, ",") != tc.want {
				t.Errorf("got %v, want %q", got, tc.want)
			}
		})
	}
	if got := handlerConflicts(nil, onHandler); got != nil {
		t.Errorf("no policy: %v", got)
	}
}

// TestAuditMaintenanceHandlerConflict: on a real API server, GKE's maintenance handler runs on one pool's nodes and
// the actions policy drains that pool first; audit names the pool with the fix and fails a warning gate; -l keeps it
// to the selected nodes; without drainFirst, or without the handler's pods, there is nothing to find.
func TestAuditMaintenanceHandlerConflict(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	gpu := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gke.LabelNodePool: pool, gke.LabelAccelerator: "nvidia-h100-80gb"}}}
	}
	createNodes(t, api.Client, []*corev1.Node{gpu("gke-prod-a3-train-1", "a3-train"), gpu("gke-prod-l4-serve-1", "l4-serve")})
	// The cluster's own check would fail the gate too: graceful termination on.
	if _, err := api.Client.CoreV1().ConfigMaps(gke.NamespaceDisruptionHandling).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gke.ConfigMapDisruptionHandling}, Data: map[string]string{"gracefulTermination": "true"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePolicy := func(name, drainFirst string) string {
		path := filepath.Join(dir, name)
		doc := "pools:\n- name: all\n  nodeSelector: {}\n  strategy: rolling\nperformMaintenance:\n  drainFirst: " + drainFirst + "\n"
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	drainFirst, handlerAlone := writePolicy("drain-first.yaml", "true"), writePolicy("handler-alone.yaml", "false")
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	audit := func(opts AuditOptions) (string, error) {
		t.Helper()
		opts.FailOn, opts.Config, opts.SyncTimeout = readiness.Warning, readinessConfig, 30*time.Second
		if opts.Output == "" {
			opts.Output = OutputTable
		}
		var out bytes.Buffer
		err := Audit(ctx, promslog.NewNopLogger(), api.Client, meta, &out, opts)
		return out.String(), err
	}

	// No handler pods: nothing to find, whatever the policy.
	if out, err := audit(AuditOptions{PolicyFile: drainFirst}); err != nil || out != "No readiness findings.\n" {
		t.Fatalf("without GKE's handler: %v\n%s", err, out)
	}

	labels := map[string]string{"k8s-app": "maintenance-handler", "name": "maintenance-handler"}
	runPod(t, api.Client, nodeview.MaintenanceHandlerNamespace, "maintenance-handler-x7kq", "gke-prod-a3-train-1", labels, nil)
	out, err := audit(AuditOptions{PolicyFile: drainFirst})
	if exitCode(err) != ExitFindings {
		t.Fatalf("handler and drainFirst: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"WARNING " + CheckMaintenanceHandlerConflict, "drainFirst: false", "NODE-POOL\n  a3-train\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "l4-serve") {
		t.Errorf("a pool without GKE's handler named:\n%s", out)
	}
	out, _ = audit(AuditOptions{PolicyFile: drainFirst, Output: OutputJSON})
	var results []CheckResult
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != 1 || results[0].Check != CheckMaintenanceHandlerConflict ||
		strings.Join(results[0].Pools, ",") != "a3-train" || results[0].Workloads == nil {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	if out, _ := audit(AuditOptions{PolicyFile: drainFirst, NoHeaders: true}); !strings.HasPrefix(out, "warning  "+CheckMaintenanceHandlerConflict+"  -  NodePool  a3-train  -\n") {
		t.Errorf("--no-headers: %q", out)
	}
	// -l over nodes: the other pool's nodes hold no conflict.
	if out, err := audit(AuditOptions{PolicyFile: drainFirst, Selector: gke.LabelNodePool + "=l4-serve"}); err != nil || out != "No readiness findings.\n" {
		t.Errorf("-l on the other pool: %v\n%s", err, out)
	}
	if out, err := audit(AuditOptions{PolicyFile: handlerAlone}); err != nil || out != "No readiness findings.\n" {
		t.Errorf("GKE's handler drains alone: %v\n%s", err, out)
	}
	// No actions Deployment: nothing of this service drains.
	if out, err := audit(AuditOptions{}); err != nil || out != "No readiness findings.\n" {
		t.Errorf("without the actions service: %v\n%s", err, out)
	}
	// The actions Deployment's own policy, discovered as status discovers it.
	ns := "gke-disruption-exporter"
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policyDoc, err := os.ReadFile(drainFirst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "policy-5h2k8c"},
		Data: map[string]string{"policy.yaml": string(policyDoc)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mount := corev1.VolumeMount{Name: "policy", MountPath: "/etc/gke-disruption-exporter/policy", ReadOnly: true}
	d := actionsDeployment(ns, "policy-5h2k8c", mount, corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}},
		"--config.file=/etc/gke-disruption-exporter/policy/policy.yaml")
	if _, err := api.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := audit(AuditOptions{}); exitCode(err) != ExitFindings || !strings.Contains(out, "NODE-POOL\n  a3-train\n") {
		t.Errorf("the actions Deployment's policy: %v\n%s", err, out)
	}
}
