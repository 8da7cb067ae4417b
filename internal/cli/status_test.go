package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the tests' clock: every relative time in the goldens counts from it.
var now = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func epoch(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

// fleet is a node in each state status distinguishes.
func fleet() []*corev1.Node {
	node := func(name string, labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	}
	scheduled := node("gke-a3-0", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelAccelerator: "nvidia-h100-80gb",
		gke.LabelScheduledMaintenanceTime: epoch(3*time.Hour + 12*time.Minute)}, nil)
	reschedulable := node("gke-l4-1", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"},
		map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true",` +
			`"window_start_time":"` + now.Add(50*time.Minute).Format(time.RFC3339) + `","window_end_time":"` + now.Add(5*time.Hour).Format(time.RFC3339) +
			`","latest_window_start_time":"` + now.Add(96*time.Hour).Format(time.RFC3339) + `"}`})
	requested := node("gke-l4-2", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4",
		gke.LabelScheduledMaintenanceTime: epoch(72 * time.Hour), gke.LabelPerformMaintenance: "true"},
		map[string]string{nodeview.AnnotationAction: "perform-maintenance", nodeview.AnnotationState: "maintenance-requested",
			nodeview.AnnotationMaintenance: nodeview.LabelKey(epoch(72 * time.Hour))})
	ongoing := node("gke-v5e-0", map[string]string{gke.LabelNodePool: "v5e-slice", gke.LabelTPUAccelerator: "tpu-v5-lite-podslice",
		gke.LabelTPUTopology: "4x4", gke.LabelInstanceType: "ct5lp-hightpu-4t", gke.LabelActiveNodeMaintenance: "ONGOING"}, nil)
	ongoing.Spec.Taints = []corev1.Taint{{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}}
	done := node("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"},
		map[string]string{nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "done",
			nodeview.AnnotationCordonedBy: "actions-0", nodeview.AnnotationMaintenance: nodeview.LabelKey(epoch(-time.Hour))})
	done.Spec.Unschedulable = true
	quiet := node("gke-default-0", map[string]string{gke.LabelNodePool: "default"}, nil)
	return []*corev1.Node{quiet, done, ongoing, requested, reschedulable, scheduled}
}

// createNodes creates nodes and reports them Ready, as a kubelet would (a node that is not counts against
// budgets).
func createNodes(t *testing.T, client kubernetes.Interface, nodes []*corev1.Node) {
	t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

var yes = true

func controller(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

// runPod creates a running pod on node.
func runPod(t *testing.T, client kubernetes.Interface, namespace, name, node string, labels map[string]string, owners []metav1.OwnerReference) {
	t.Helper()
	if _, err := client.CoreV1().Pods(namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: owners},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "example.com/app"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createWorkloads runs, on the fleet's nodes: a JobSet's Job and a DaemonSet pod on gke-a3-0, two pods of a
// Deployment (through its ReplicaSet) and a bare pod on gke-l4-1, a Job with no owner on gke-l4-2, and a pod on the
// ordinary node gke-default-0.
func createWorkloads(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"training", "serving", "batch"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	template := func(labels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "main", Image: "example.com/app"}}}}
	}
	job := func(namespace, name string, owners []metav1.OwnerReference) *batchv1.Job {
		j, err := client.BatchV1().Jobs(namespace).Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
			Spec:       batchv1.JobSpec{Template: template(nil, corev1.RestartPolicyNever)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	train := job("training", "train-llm-workers-0", controller("jobset.x-k8s.io/v1alpha2", "JobSet", "train-llm", "5e1f0000-0000-4000-8000-000000000001"))
	runPod(t, client, "training", "train-llm-workers-0-0", "gke-a3-0", nil, controller("batch/v1", "Job", train.Name, train.UID))
	runPod(t, client, "kube-system", "nvidia-driver-installer-x", "gke-a3-0", nil,
		controller("apps/v1", "DaemonSet", "nvidia-driver-installer", "5e1f0000-0000-4000-8000-000000000002"))

	labels := map[string]string{"app": "web"}
	rs, err := client.AppsV1().ReplicaSets("serving").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9", OwnerReferences: controller("apps/v1", "Deployment", "web", "5e1f0000-0000-4000-8000-000000000003")},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(labels, corev1.RestartPolicyAlways)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-7d9-a", "web-7d9-b"} {
		runPod(t, client, "serving", name, "gke-l4-1", labels, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID))
	}
	runPod(t, client, "batch", "debug", "gke-l4-1", nil, nil)
	nightly := job("batch", "nightly", nil)
	runPod(t, client, "batch", "nightly-x", "gke-l4-2", nil, controller("batch/v1", "Job", nightly.Name, nightly.UID))
	runPod(t, client, "batch", "cpu-work", "gke-default-0", nil, nil)
}

// policyFile is the fleet's policy: the default pool is in none of its pools.
func policyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(fleetPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const fleetPolicy = `maxDisruptedNodes: 50%
windows:
  - days: [Sat, Sun]
    start: "02:00"
    end: "06:00"
pools:
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
    maxUnavailable: 1
    minAvailable: 2
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel
  - name: tpu
    nodeSelector: {cloud.google.com/gke-nodepool: v5e-slice}
    maxUnavailable: 50%
`

func runStatus(t *testing.T, api *testenv.APIServer, opts StatusOptions) (string, error) {
	t.Helper()
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts.Now, opts.SyncTimeout = clock, 30*time.Second
	var out bytes.Buffer
	err = Status(context.Background(), api.Client, meta, &out, opts)
	return out.String(), err
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestStatusGolden reads nodes in every state, the workloads on them and the policy's budgets back from a real
// API server and prints them in each format.
func TestStatusGolden(t *testing.T) {
	api := testenv.StartAPIServer(t)
	createNodes(t, api.Client, fleet())
	createWorkloads(t, api.Client)
	policy := policyFile(t)
	for _, tc := range []struct {
		file string
		opts StatusOptions
	}{
		{"status.table", StatusOptions{Output: OutputTable}},
		{"status.wide", StatusOptions{Output: OutputWide}},
		{"status.json", StatusOptions{Output: OutputJSON}},
		{"status-all.table", StatusOptions{Output: OutputTable, All: true}},
		{"status-pool.table", StatusOptions{Output: OutputTable, Pool: "l4-serve"}},
		{"status-selector.json", StatusOptions{Output: OutputJSON, Selector: gke.LabelAccelerator + "=nvidia-h100-80gb"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tc.opts.PolicyFile = policy
			out, err := runStatus(t, api, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.file, []byte(strings.ReplaceAll(out, policy, "POLICY")))
		})
	}
}

// actionsDeployment is the actions Deployment as deploy/base writes it, its policy in ConfigMap cmName under key.
func actionsDeployment(namespace, cmName string, mount corev1.VolumeMount, volume corev1.VolumeSource, args ...string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/component": "actions"}
	volume.ConfigMap.Name = cmName
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gke-disruption-exporter-actions", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{
					{Name: "sidecar", Image: "example.com/sidecar"},
					{Name: "actions", Image: "example.com/gke-disruption-exporter", Args: append([]string{"actions"}, args...),
						VolumeMounts: []corev1.VolumeMount{{Name: "web-config", MountPath: "/etc/gke-disruption-exporter/web"}, mount}},
				},
				Volumes: []corev1.Volume{
					{Name: "web-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web"}}},
					{Name: mount.Name, VolumeSource: volume},
				},
			}}},
	}
}

// TestStatusDiscoversPolicy follows the actions Deployment to its hashed policy ConfigMap (directly, through
// items, through a subPath mount), and prints one header line, exit 0, for each way that fails.
func TestStatusDiscoversPolicy(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	createNodes(t, api.Client, fleet())
	ns := "gke-disruption-exporter"
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	paused := strings.Replace(fleetPolicy, "maxDisruptedNodes: 50%\n", "paused: true\nmaxDisruptedNodes: 2\n", 1)
	for name, data := range map[string]map[string]string{
		"gke-disruption-exporter-actions-policy-5h2k8c": {"policy.yaml": paused},
		"policy-items":  {"rules": paused},
		"policy-broken": {"policy.yaml": "pools: []\n"},
	} {
		if _, err := api.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deploy := func(d *appsv1.Deployment) {
		t.Helper()
		deployments := api.Client.AppsV1().Deployments(ns)
		_ = deployments.Delete(ctx, d.Name, metav1.DeleteOptions{})
		testenv.Eventually(t, 30*time.Second, "old Deployment gone", func() error {
			if _, err := deployments.Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policyMount := corev1.VolumeMount{Name: "policy", MountPath: "/etc/gke-disruption-exporter/policy", ReadOnly: true}
	cmVolume := func(items ...corev1.KeyToPath) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{Items: items}}
	}
	header := func(out string) string {
		t.Helper()
		head, _, ok := strings.Cut(out, "\n\nNODE ")
		if !ok {
			t.Fatalf("no rows in\n%s", out)
		}
		return head
	}

	out, err := runStatus(t, api, StatusOptions{Output: OutputTable})
	if err != nil {
		t.Fatal(err)
	}
	if want := `Budgets unknown: reading Deployment gke-disruption-exporter/gke-disruption-exporter-actions: deployments.apps "gke-disruption-exporter-actions" not found (--config.file=PATH reads a local policy file)`; !strings.Contains(out, want+"\n") {
		t.Errorf("no Deployment: want the line %q in\n%s", want, out)
	}

	deploy(actionsDeployment(ns, "gke-disruption-exporter-actions-policy-5h2k8c", policyMount, cmVolume(),
		"--config.file=/etc/gke-disruption-exporter/policy/policy.yaml", "--web.listen-address=:9844", "--dry-run"))
	out, err = runStatus(t, api, StatusOptions{Output: OutputTable})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-discovered.table", []byte(out))

	for _, tc := range []struct {
		name, want string
		d          *appsv1.Deployment
	}{
		{"items", "Policy: ConfigMap gke-disruption-exporter/policy-items key rules (Deployment gke-disruption-exporter/gke-disruption-exporter-actions)\nNow: paused, window closed",
			actionsDeployment(ns, "policy-items", policyMount, cmVolume(corev1.KeyToPath{Key: "rules", Path: "conf/policy.yaml"}),
				"--config.file", "/etc/gke-disruption-exporter/policy/conf/policy.yaml")},
		{"subPath", "Policy: ConfigMap gke-disruption-exporter/policy-items key rules (Deployment gke-disruption-exporter/gke-disruption-exporter-actions)\nNow: paused, window closed",
			actionsDeployment(ns, "policy-items", corev1.VolumeMount{Name: "policy", MountPath: "/policy.yaml", SubPath: "rules"}, cmVolume(),
				"--config.file=/policy.yaml", "--dry-run", "--no-dry-run")},
		{"bad policy", "Budgets unknown: policy in ConfigMap gke-disruption-exporter/policy-broken key policy.yaml: pools: at least one pool is required",
			actionsDeployment(ns, "policy-broken", policyMount, cmVolume(), "--config.file=/etc/gke-disruption-exporter/policy/policy.yaml")},
		{"missing key", "Budgets unknown: ConfigMap gke-disruption-exporter/policy-items key policy.yaml: no such key",
			actionsDeployment(ns, "policy-items", policyMount, cmVolume(), "--config.file=/etc/gke-disruption-exporter/policy/policy.yaml")},
		{"missing ConfigMap", `Budgets unknown: reading ConfigMap gke-disruption-exporter/policy-gone: configmaps "policy-gone" not found`,
			actionsDeployment(ns, "policy-gone", policyMount, cmVolume(), "--config.file=/etc/gke-disruption-exporter/policy/policy.yaml")},
		{"no flag", "Budgets unknown: Deployment gke-disruption-exporter/gke-disruption-exporter-actions: no container is given --config.file",
			actionsDeployment(ns, "policy-items", policyMount, cmVolume())},
		{"not on the volume", "Budgets unknown: Deployment gke-disruption-exporter/gke-disruption-exporter-actions: the policy file /etc/policy.yaml is on no volume of container actions",
			actionsDeployment(ns, "policy-items", policyMount, cmVolume(), "--config.file=/etc/policy.yaml")},
		{"on a Secret", "Budgets unknown: Deployment gke-disruption-exporter/gke-disruption-exporter-actions: the policy file /etc/gke-disruption-exporter/web/policy.yaml is on volume web-config, which is not a ConfigMap",
			actionsDeployment(ns, "policy-items", policyMount, cmVolume(), "--config.file=/etc/gke-disruption-exporter/web/policy.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deploy(tc.d)
			out, err := runStatus(t, api, StatusOptions{Output: OutputTable})
			if err != nil {
				t.Fatalf("exit %d: %v", exitCode(err), err)
			}
			if !strings.Contains(header(out), tc.want) {
				t.Errorf("want %q in the header:\n%s", tc.want, out)
			}
		})
	}
}

// TestStatusPolicyFileErrors: a local policy file that cannot be read or parsed is one line, exit 2, before the
// API server is asked anything.
func TestStatusPolicyFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(bad, []byte("pools:\n  - name: a\n    maxUnavailable: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		bad:                        "policy file " + bad + ": pools[0].maxUnavailable",
		filepath.Join(bad, "nope"): "reading policy file",
	} {
		err := Status(context.Background(), nil, nil, &bytes.Buffer{}, StatusOptions{PolicyFile: file, Now: clock})
		if exitCode(err) != ExitAPI || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want one exit-2 line containing %q", file, err, want)
		}
	}
	err := Status(context.Background(), nil, nil, &bytes.Buffer{}, StatusOptions{ActionsDeployment: "just-a-name", Now: clock})
	if exitCode(err) != ExitAPI || !strings.Contains(err.Error(), "NAMESPACE/NAME") {
		t.Errorf("bad --actions.deployment: %v", err)
	}
}

func TestStatusBadSelector(t *testing.T) {
	err := Status(context.Background(), nil, nil, &bytes.Buffer{}, StatusOptions{Selector: "a in (", Now: clock})
	if e, ok := err.(*ExitError); !ok || e.Code != ExitAPI || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one-line exit-2 error", err)
	}
}

func TestRelative(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second:              "now",
		-20 * time.Second:             "now",
		5 * time.Minute:               "in 5m",
		3*time.Hour + 12*time.Minute:  "in 3h12m",
		-(90 * time.Minute):           "1h30m ago",
		47 * time.Hour:                "in 47h00m",
		73*time.Hour + 10*time.Minute: "in 3d1h",
	} {
		if got := relative(d); got != want {
			t.Errorf("relative(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestWatchRedraws drives --watch against a real API server: a GPU node gaining maintenance, a pod landing on it,
// the API server restarting, GKE starting the maintenance (the budgets' counts follow), then the node deleted, each
// redraw the table; a change that alters nothing shown draws nothing.
func TestWatchRedraws(t *testing.T) {
	api := testenv.StartAPIServer(t)
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	policy := policyFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, api.Client, meta, out, true, StatusOptions{Output: OutputTable, Now: clock, SyncTimeout: 30 * time.Second,
			PolicyFile: policy})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch ended with %v", err)
		}
	}()
	frames := func() []string { return strings.Split(out.String(), clearScreen)[1:] }
	waitFrames := func(n int, contains string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "frame "+strconv.Itoa(n), func() error {
			f := frames()
			if len(f) < n {
				return fmt.Errorf("%d frames", len(f))
			}
			if !strings.Contains(f[n-1], contains) {
				return fmt.Errorf("frame %d lacks %q:\n%s", n, contains, f[n-1])
			}
			return nil
		})
	}
	waitFrames(1, "No nodes with maintenance pending")

	// Created, then reported Ready: one frame or two, as the watch sees the two changes; the last counts it in the
	// header, with no row yet, and undisrupted.
	createNodes(t, api.Client, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gke-a3-0",
		Labels: map[string]string{gke.LabelNodePool: "a3-train", gke.LabelAccelerator: "nvidia-h100-80gb"}}}})
	var n int
	testenv.Eventually(t, 30*time.Second, "the node counted", func() error {
		f := frames()
		last := f[len(f)-1]
		for _, want := range []string{"a3-train  1", "Cluster cap: 0/1 disrupted", "No nodes with maintenance pending"} {
			if !strings.Contains(last, want) {
				return fmt.Errorf("frame %d lacks %q:\n%s", len(f), want, last)
			}
		}
		n = len(f)
		return nil
	})

	patch := func(body string) {
		t.Helper()
		if _, err := api.Client.CoreV1().Nodes().Patch(context.Background(), "gke-a3-0", "application/merge-patch+json",
			[]byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"metadata":{"labels":{"` + gke.LabelScheduledMaintenanceTime + `":"` + epoch(2*time.Hour) + `"}}}`)
	waitFrames(n+1, "  in 2h00m  ")
	row := func(frame int) string {
		for _, line := range strings.Split(frames()[frame-1], "\n") {
			if strings.HasPrefix(line, "gke-a3-0 ") {
				return line
			}
		}
		return ""
	}
	if r := row(n + 1); !strings.HasSuffix(r, "  -") {
		t.Errorf("frame %d: row %q, want no workloads on the empty GPU node", n+1, r)
	}

	// A pod landing on the node: the workloads collector's watch redraws, no node changed.
	runPod(t, api.Client, "default", "solo", "gke-a3-0", nil, nil)
	waitFrames(n+2, "default/solo")
	if r := row(n + 2); !strings.HasSuffix(r, "  default/solo") {
		t.Errorf("frame %d: row %q, want the pod's workload last", n+2, r)
	}

	// The API server restarting under the watch: the informer reconnects and later changes still redraw. While it
	// is away the frame may say so (STALE); once the watch is back, that line goes.
	api.Restart()
	// Reconnecting may take a few rounds of stale and fresh frames, and the workloads collector its own relist:
	// wait until the frames have settled on a fresh one with the pod's workload back.
	testenv.Eventually(t, 60*time.Second, "the watch back", func() error {
		before := len(frames())
		time.Sleep(3 * time.Second)
		f := frames()
		last := f[len(f)-1]
		if len(f) != before || strings.Contains(last, "STALE") || !strings.Contains(last, "default/solo") {
			return fmt.Errorf("%d frames, then %d; last:\n%s", before, len(f), last)
		}
		return nil
	})
	n = len(frames()) - 2

	// An annotation nobody shows: no redraw. The next change's frame must be the next one.
	patch(`{"metadata":{"annotations":{"example.com/unrelated":"x"}}}`)
	patch(`{"metadata":{"labels":{"` + gke.LabelActiveNodeMaintenance + `":"ONGOING"}}}`)
	waitFrames(n+3, "   ongoing   ")
	if f := frames()[n+2]; !strings.Contains(f, "Cluster cap: 1/1 disrupted") {
		t.Errorf("frame %d: want the node in maintenance counted against the cap:\n%s", n+3, f)
	}

	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), "gke-a3-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFrames(n+4, "No nodes with maintenance pending")
	if got := len(frames()); got != n+4 {
		t.Errorf("%d frames, want %d", got, n+4)
	}
}

// TestStatusOfMalformed: a garbage label or annotation announces no maintenance (as in the collectors and the
// actions service) and hides nothing else about the node.
func TestStatusOfMalformed(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-l4-9",
		Labels:      map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: "soon"},
		Annotations: map[string]string{gke.AnnotationUpcomingMaintenance: "{not json"}}}
	if s := StatusOf(nodeview.Of(n)); s.Interesting() || s.MaintenanceStart != nil {
		t.Errorf("malformed signals: %+v, want nothing pending", s)
	}
	n.Spec.Unschedulable = true
	if s := StatusOf(nodeview.Of(n)); !s.Interesting() || len(s.GKEState) != 1 || s.GKEState[0] != "cordoned" {
		t.Errorf("cordoned node with malformed signals: %+v", s)
	}
}

// TestRenderSlicesAndUnknownWorkloads renders, from nodes in memory, a rolling pool of two 2-host TPU slices (its
// budget counts slices) with a percentage minAvailable, a policy with no windows, and workloads that could not be
// read.
func TestRenderSlicesAndUnknownWorkloads(t *testing.T) {
	cfg, err := config.Parse([]byte(`
pools:
  - name: tpu
    nodeSelector: {cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice}
    maxUnavailable: 1
    minAvailable: 50%
`))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	for _, name := range []string{"slice-a-0", "slice-a-1", "slice-b-0", "slice-b-1"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			gke.LabelNodePool: name[:7], gke.LabelTPUAccelerator: "tpu-v5-lite-podslice", gke.LabelTPUTopology: "2x4",
			gke.LabelInstanceType: "ct5lp-hightpu-4t"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		nodes = append(nodes, n)
	}
	nodes[0].Labels[gke.LabelScheduledMaintenanceTime] = epoch(time.Hour)
	nodes[1].Spec.Unschedulable = true
	var out bytes.Buffer
	snap := Snapshot{Nodes: nodes, Policy: &Policy{Config: cfg, Source: "file policy.yaml"},
		WorkloadsUnknown: `permission denied (RBAC) listing pods: pods is forbidden: User "someone" cannot list resource "pods"`}
	if err := Render(&out, snap, StatusOptions{Output: OutputTable, Now: clock}); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-slices.table", out.Bytes())
}

// TestStatusDefaultTableFits reads, from a real API server, nodes in maintenance with long values (GKE node names,
// every GKE state, a long reason and replica name, workloads with long names): the default table fits 160 columns,
// and -o wide has each value whole.
func TestStatusDefaultTableFits(t *testing.T) {
	api := testenv.StartAPIServer(t)
	replica := "gke-disruption-exporter-actions-7d9f8c6b5-x2k4q"
	reason := "evicting training/train-llm-70b-pretrain-workers-0-0: Cannot evict pod as it would violate the pod's disruption budget."
	ours := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-ml-prod-a3-mega-pool-4f2c1a9b-x7kq",
		Labels: map[string]string{gke.LabelNodePool: "a3-mega-pool", gke.LabelAccelerator: "nvidia-h100-mega-80gb",
			gke.LabelScheduledMaintenanceTime: epoch(-5 * time.Minute), gke.LabelActiveNodeMaintenance: "ONGOING"},
		Annotations: map[string]string{nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "draining",
			nodeview.AnnotationClaimedBy: replica, nodeview.AnnotationCordonedBy: replica, nodeview.AnnotationReason: reason,
			nodeview.AnnotationMaintenance: nodeview.LabelKey(epoch(-5 * time.Minute))}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}}}}
	theirs := ours.DeepCopy()
	theirs.Name, theirs.Annotations = "gke-ml-prod-a3-mega-pool-4f2c1a9b-z9pd", nil
	createNodes(t, api.Client, []*corev1.Node{ours, theirs})
	if _, err := api.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "training"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{ours.Name, theirs.Name} {
		for _, name := range []string{"train-llm-70b-pretrain-long-run", "eval-llm-70b-checkpoint-sweeper", "notebook-research"} {
			runPod(t, api.Client, "training", name+"-"+node[len(node)-4:], node, nil, nil)
		}
	}
	policy := policyFile(t)
	out, err := runStatus(t, api, StatusOptions{Output: OutputTable, PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if w := len([]rune(line)); w > 160 {
			t.Errorf("default table line is %d columns wide, want at most 160:\n%s", w, line)
		}
	}
	for _, want := range []string{ours.Name + "  5m ago", "ongoing,terminating,cordoned", "draining", "actions ", "gke-maintenance-handler"} {
		if !strings.Contains(out, want) {
			t.Errorf("default table lacks %q:\n%s", want, out)
		}
	}
	wide, err := runStatus(t, api, StatusOptions{Output: OutputWide, PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"active-node-maintenance=ongoing,impending-termination,cordoned", "actions/" + replica,
		"a3-mega-pool", "nvidia-h100-mega-80gb", cell(reason, maxReasonWidth), "training/Pod/train-llm-70b-pretrain-long-run-x7kq"} {
		if !strings.Contains(wide, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, wide)
		}
	}
}

// TestStatusHeldBy shows who holds each node, read from a real API server: the actions service's replica for its
// own cordon, and the other hands: someone's plain cordon, Cluster Autoscaler's taint (a node with nothing else to
// show), GKE's maintenance handler.
func TestStatusHeldBy(t *testing.T) {
	api := testenv.StartAPIServer(t)
	node := func(name string, annotations map[string]string, unschedulable bool, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gke.LabelNodePool: "l4-serve"}, Annotations: annotations},
			Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
	}
	createNodes(t, api.Client, []*corev1.Node{
		node("gke-cordoned-by-someone", nil, true),
		node("gke-autoscaled-away", nil, false, corev1.Taint{Key: nodeview.TaintClusterAutoscalerToBeDeleted, Value: "1764576000", Effect: corev1.TaintEffectNoSchedule}),
		node("gke-in-gke-maintenance", nil, false, corev1.Taint{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}),
		node("gke-ours", map[string]string{nodeview.AnnotationAction: "drain", nodeview.AnnotationState: "done",
			nodeview.AnnotationClaimedBy: "actions-1", nodeview.AnnotationCordonedBy: "actions-0"}, true),
		node("gke-free", nil, false),
	})
	want := map[string]string{
		"gke-cordoned-by-someone": nodeview.OwnerCordon,
		"gke-autoscaled-away":     nodeview.OwnerClusterAutoscaler,
		"gke-in-gke-maintenance":  nodeview.OwnerGKEMaintenanceHandler,
		"gke-ours":                "actions/actions-0",
	}
	policy := policyFile(t)
	out, err := runStatus(t, api, StatusOptions{Output: OutputJSON, PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Nodes []struct{ Node, HeldBy string }
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range report.Nodes {
		got[n.Node] = n.HeldBy
	}
	if !maps.Equal(got, want) {
		t.Errorf("heldBy of the nodes shown %v, want %v", got, want)
	}
	for _, format := range []string{OutputTable, OutputWide} {
		out, err := runStatus(t, api, StatusOptions{Output: format, PolicyFile: policy, NoHeaders: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			name, _, _ := strings.Cut(line, " ")
			holder := want[name]
			if format == OutputTable {
				holder, _, _ = strings.Cut(holder, "/")
			}
			if !strings.Contains(line, "  "+holder+"  ") {
				t.Errorf("-o %s: row of %s does not show its holder %q:\n%s", format, name, holder, line)
			}
		}
	}
}

// TestStatusShowsGPUFaults: a critical GPU fault of the node's current boot and its unhealthy GPUs show in the
// GKE state of every table and as fields of their own in JSON; a fault left from an earlier boot shows nowhere.
func TestStatusShowsGPUFaults(t *testing.T) {
	fault := func(name, bootID, reason, conditionBoot string, allocatable string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			gke.LabelNodePool: "a4-train", gke.LabelAccelerator: "nvidia-b200", gke.LabelInstanceType: "a4-highgpu-8g"}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: bootID},
				Capacity:    corev1.ResourceList{gke.ResourceGPU: resource.MustParse("8")},
				Allocatable: corev1.ResourceList{gke.ResourceGPU: resource.MustParse(allocatable)},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
					{Type: gke.ConditionXidCriticalError, Status: corev1.ConditionTrue, Reason: reason, Message: conditionBoot,
						LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))}}}}
	}
	snap := Snapshot{Nodes: []*corev1.Node{
		fault("gke-a4-0", "boot-1", `{"79":true,"48":true}`, "boot-1", "7"),
		fault("gke-a4-1", "boot-2", `{"79":true}`, "boot-1", "8"), // repaired: the condition is stale
		fault("gke-a4-2", "boot-1", `garbled`, "boot-1", "8"),
	}, PolicyUnknown: "no policy in this test", WorkloadsUnknown: "no pods in this test"}
	var wide bytes.Buffer
	if err := Render(&wide, snap, StatusOptions{Output: OutputWide, Now: clock}); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-gpu.wide", wide.Bytes())

	rows := jsonRows(t, snap)
	if r := rows["gke-a4-0"]; fmt.Sprint(r.GPUXids) != "[48 79]" || r.GPUXidSince == nil || !r.GPUXidSince.Equal(now.Add(-10*time.Minute)) ||
		r.UnhealthyGPUs != 1 || strings.Join(r.GKEState, ",") != "gpu-xid=48+79,gpus-unhealthy=1" {
		t.Errorf("faulty node: %+v", r)
	}
	if r, ok := rows["gke-a4-1"]; ok {
		t.Errorf("a repaired node with a stale condition is listed: %+v", r)
	}
	if r := rows["gke-a4-2"]; r.GPUXids != nil || r.GPUXidSince == nil || strings.Join(r.GKEState, ",") != "gpu-xid=?" {
		t.Errorf("node whose Xids do not read: %+v", r)
	}
}

// TestStatusShowsGKEWork: GKE's own work on a node (an upgrade's drain) and a VM's planned end show in the GKE
// state and as JSON fields; a node with neither is not listed for them.
func TestStatusShowsGKEWork(t *testing.T) {
	gpu := func(name string, labels, annotations map[string]string) *corev1.Node {
		l := map[string]string{gke.LabelNodePool: "l4", gke.LabelAccelerator: "nvidia-l4", gke.LabelInstanceType: "g2-standard-8"}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: annotations},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	snap := Snapshot{Nodes: []*corev1.Node{
		gpu("gke-l4-0", map[string]string{gke.LabelOperationType: "drain"},
			map[string]string{gke.AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES"}`}),
		gpu("gke-l4-1", nil, map[string]string{gke.AnnotationMachineTerminationDatetime: "2026-12-09T10:00:00Z"}),
		gpu("gke-l4-2", nil, nil),
	}, PolicyUnknown: "no policy in this test", WorkloadsUnknown: "no pods in this test"}
	rows := jsonRows(t, snap)
	if r := rows["gke-l4-0"]; fmt.Sprint(r.GKEOperations) != "[drain upgrade_nodes]" || strings.Join(r.GKEState, ",") != "gke-operation=drain+upgrade_nodes" {
		t.Errorf("node GKE upgrades: %+v", r)
	}
	if r := rows["gke-l4-1"]; r.PlannedTermination == nil || r.PlannedTermination.Unix() != 1796810400 ||
		strings.Join(r.GKEState, ",") != "planned-termination=2026-12-09T10:00:00Z" {
		t.Errorf("flex-start node: %+v", r)
	}
	if r, ok := rows["gke-l4-2"]; ok {
		t.Errorf("a quiet node is listed: %+v", r)
	}
	var wide bytes.Buffer
	if err := Render(&wide, snap, StatusOptions{Output: OutputWide, Now: clock}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gke-operation=drain+upgrade_nodes", "planned-termination=2026-12-09T10:00:00Z"} {
		if !strings.Contains(wide.String(), want) {
			t.Errorf("wide output lacks %s:\n%s", want, wide.String())
		}
	}
}

// jsonRows renders snap as JSON and reads its node rows back, by node.
func jsonRows(t *testing.T, snap Snapshot) map[string]NodeStatus {
	t.Helper()
	var js bytes.Buffer
	if err := Render(&js, snap, StatusOptions{Output: OutputJSON, Now: clock}); err != nil {
		t.Fatal(err)
	}
	var report Report
	if err := json.Unmarshal(js.Bytes(), &report); err != nil {
		t.Fatal(err)
	}
	rows := map[string]NodeStatus{}
	for _, r := range report.Nodes {
		rows[r.Node] = r
	}
	return rows
}
