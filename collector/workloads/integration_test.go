package workloads

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

var allFamilies = []string{
	"gke_workload_nodes", "gke_workload_next_maintenance_timestamp_seconds", "gke_workload_nodes_in_maintenance",
	"gke_readiness_findings",
}

var testConfig = readiness.Config{MinGracePeriod: 60 * time.Second, SpotNotice: 15 * time.Second}

type exporter struct {
	t   *testing.T
	url string
}

func startExporter(t *testing.T, api *testenv.APIServer, opts ...Option) *exporter {
	t.Helper()
	logger := promslog.NewNopLogger()
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := New(logger, api.Client, meta, testConfig, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	srv := httptest.NewServer(collector.NewSet(logger, reg, map[string]collector.Collector{"workloads": c}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	testenv.Eventually(t, 30*time.Second, "initial lists synced", func() error {
		if !c.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return &exporter{t: t, url: srv.URL}
}

func (e *exporter) waitFor(step, want string, names ...string) {
	e.t.Helper()
	if len(names) == 0 {
		names = allFamilies
	}
	testenv.Eventually(e.t, 30*time.Second, step, func() error {
		return testutil.ScrapeAndCompare(e.url, strings.NewReader(want), names...)
	})
}

// fixture creates objects in a real API server.
type fixture struct {
	t      *testing.T
	client kubernetes.Interface
	ctx    context.Context
}

func newFixture(t *testing.T, api *testenv.APIServer) *fixture {
	return &fixture{t: t, client: api.Client, ctx: context.Background()}
}

func (f *fixture) check(err error, what string) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// node creates a node with labels, reporting kubelet version v.
func (f *fixture) node(name, version string, labels map[string]string) {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	f.check(err, "creating node "+name)
	n.Status.NodeInfo.KubeletVersion = version
	_, err = f.client.CoreV1().Nodes().UpdateStatus(f.ctx, n, metav1.UpdateOptions{})
	f.check(err, "reporting the version of node "+name)
}

func (f *fixture) patchNode(name, patch string) {
	f.t.Helper()
	_, err := f.client.CoreV1().Nodes().Patch(f.ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	f.check(err, "patching node "+name)
}

func (f *fixture) namespace(name string) {
	f.t.Helper()
	_, err := f.client.CoreV1().Namespaces().Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	f.check(err, "creating namespace "+name)
}

type podSpec struct {
	namespace, name, node string
	owner                 *metav1.OwnerReference
	labels                map[string]string
	grace                 int64
	tolerations           []corev1.Toleration
}

func (f *fixture) pod(p podSpec) {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels},
		Spec: corev1.PodSpec{
			NodeName:                      p.node,
			TerminationGracePeriodSeconds: &p.grace,
			Tolerations:                   p.tolerations,
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if p.owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*p.owner}
	}
	_, err := f.client.CoreV1().Pods(p.namespace).Create(f.ctx, pod, metav1.CreateOptions{})
	f.check(err, "creating pod "+p.name)
}

func (f *fixture) deletePod(namespace, name string) {
	f.t.Helper()
	zero := int64(0)
	f.check(f.client.CoreV1().Pods(namespace).Delete(f.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}), "deleting pod "+name)
}

func controller(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// deployment creates a Deployment and its ReplicaSet (no controllers run): the pods' owner chain is two levels.
func (f *fixture) deployment(namespace, name string, labels map[string]string) *metav1.OwnerReference {
	f.t.Helper()
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	d, err := f.client.AppsV1().Deployments(namespace).Create(f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	f.check(err, "creating deployment "+name)
	rs, err := f.client.AppsV1().ReplicaSets(namespace).Create(f.ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-5d8f7", Namespace: namespace,
			OwnerReferences: []metav1.OwnerReference{*controller("apps/v1", "Deployment", d.Name, d.UID)}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	f.check(err, "creating replicaset of "+name)
	return controller("apps/v1", "ReplicaSet", rs.Name, rs.UID)
}

// job creates a Job, owned by owner when given.
func (f *fixture) job(namespace, name string, owner *metav1.OwnerReference) *metav1.OwnerReference {
	f.t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	j, err := f.client.BatchV1().Jobs(namespace).Create(f.ctx, j, metav1.CreateOptions{})
	f.check(err, "creating job "+name)
	return controller("batch/v1", "Job", j.Name, j.UID)
}

func (f *fixture) pdb(namespace, name string, labels map[string]string, maxUnavailable int32) {
	f.t.Helper()
	mu := intstr.FromInt32(maxUnavailable)
	_, err := f.client.PolicyV1().PodDisruptionBudgets(namespace).Create(f.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, MaxUnavailable: &mu},
	}, metav1.CreateOptions{})
	f.check(err, "creating pdb "+name)
}

func (f *fixture) gracefulTermination(data map[string]string) {
	f.t.Helper()
	cms := f.client.CoreV1().ConfigMaps(gke.NamespaceDisruptionHandling)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gke.ConfigMapDisruptionHandling}, Data: data}
	_, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = cms.Create(f.ctx, cm, metav1.CreateOptions{})
	}
	f.check(err, "writing the disruption-handling ConfigMap")
}

const (
	newVersion = "v1.33.5-gke.1080000"
	oldVersion = "v1.30.5-gke.1014001"
)

var (
	gpuLabels  = map[string]string{gke.LabelNodePool: "a3", gke.LabelAccelerator: "nvidia-h100-80gb"}
	tpuLabels  = map[string]string{gke.LabelNodePool: "v5p", gke.LabelTPUAccelerator: "tpu-v5p-slice", gke.LabelTPUTopology: "2x2x2"}
	spotLabels = map[string]string{gke.LabelNodePool: "spot", gke.LabelSpot: "true"}
	ordinary   = map[string]string{gke.LabelNodePool: "default"}
)

func with(labels map[string]string, extra ...string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		out[extra[i]] = extra[i+1]
	}
	return out
}

// TestGoldenChecks runs every check against a workload that fails it and one that passes it.
func TestGoldenChecks(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, with(gpuLabels, gke.LabelScheduledMaintenanceTime, "1764547200"))
	f.node("gpu-1", newVersion, with(gpuLabels, gke.LabelActiveNodeMaintenance, "ONGOING"))
	f.node("gpu-old", oldVersion, gpuLabels)
	f.node("tpu-0", newVersion, with(tpuLabels, gke.LabelScheduledMaintenanceTime, "1764540000"))
	f.node("tpu-1", newVersion, with(tpuLabels, gke.LabelScheduledMaintenanceTime, "1764550000"))
	f.node("spot-0", newVersion, spotLabels)
	f.node("plain-0", oldVersion, ordinary)
	f.namespace("train")
	f.namespace("serve")

	// A Deployment over two GPU nodes (ReplicaSet → Deployment), one of them in maintenance: all ready.
	serve := f.deployment("serve", "inference", map[string]string{"app": "inference"})
	for i, n := range []string{"gpu-0", "gpu-1"} {
		f.pod(podSpec{namespace: "serve", name: fmt.Sprintf("inference-%d", i), node: n, owner: serve,
			labels: map[string]string{"app": "inference"}, grace: 120,
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}})
	}
	f.pdb("serve", "inference", map[string]string{"app": "inference"}, 1)
	// A JobSet's Job over the TPU slice (Job → JobSet), with too short a grace and a keyless Exists toleration.
	jobset := controller("jobset.x-k8s.io/v1alpha2", "JobSet", "train-llm", "8f1c2d3e-0000-4000-8000-000000000001")
	slice := f.job("train", "train-llm-slice-0", jobset)
	for i, n := range []string{"tpu-0", "tpu-1"} {
		f.pod(podSpec{namespace: "train", name: fmt.Sprintf("train-llm-slice-0-%d", i), node: n, owner: slice,
			labels: map[string]string{"jobset": "train-llm"}, grace: 30,
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}})
	}
	// A batch Job on Spot asking for more grace than the notice, under a PDB that allows no disruption.
	batch := f.job("train", "embeddings", nil)
	f.pod(podSpec{namespace: "train", name: "embeddings-0", node: "spot-0", owner: batch,
		labels: map[string]string{"app": "embeddings"}, grace: 60})
	f.pdb("train", "embeddings", map[string]string{"app": "embeddings"}, 0)
	// A bare pod on a GPU node too old to announce maintenance; it tolerates the taint by name.
	f.pod(podSpec{namespace: "train", name: "notebook", node: "gpu-old", grace: 3600,
		tolerations: []corev1.Toleration{{Key: gke.TaintImpendingTermination, Operator: corev1.TolerationOpExists}}})
	// A Spot pod within the notice: no finding.
	f.pod(podSpec{namespace: "train", name: "quick", node: "spot-0", grace: 10})
	// Pods of no interest: on an ordinary node (whatever their settings), a DaemonSet's, an unbound one.
	f.pod(podSpec{namespace: "train", name: "web", node: "plain-0", grace: 0,
		tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}})
	f.pod(podSpec{namespace: "train", name: "agent", node: "gpu-0", grace: 0,
		owner: controller("apps/v1", "DaemonSet", "agent", "8f1c2d3e-0000-4000-8000-000000000002")})
	f.pod(podSpec{namespace: "train", name: "pending", grace: 0})

	e := startExporter(t, api)
	golden, err := os.ReadFile("testdata/workloads.prom")
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("series of every check", string(golden))

	// The golden file is valid exposition as promtool sees it.
	check := exec.Command(testenv.Binary(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(string(golden))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the golden file: %v\n%s", err, out)
	}
}

// TestNodeGainsMaintenance: a workload on nodes without maintenance has no next-maintenance series until a node
// gains it; then it follows the node.
func TestNodeGainsMaintenance(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	f.node("gpu-1", newVersion, gpuLabels)
	f.namespace("serve")
	owner := f.deployment("serve", "inference", map[string]string{"app": "inference"})
	for i := range 2 {
		f.pod(podSpec{namespace: "serve", name: fmt.Sprintf("inference-%d", i), node: fmt.Sprintf("gpu-%d", i), owner: owner, grace: 120})
	}
	e := startExporter(t, api)
	names := allFamilies[:3]
	nodes := `# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
gke_workload_nodes{namespace="serve",workload="inference",workload_kind="Deployment"} 2
`
	next := `# HELP gke_workload_next_maintenance_timestamp_seconds Earliest scheduled maintenance among the workload's GPU, TPU and Spot nodes.
# TYPE gke_workload_next_maintenance_timestamp_seconds gauge
gke_workload_next_maintenance_timestamp_seconds{namespace="serve",workload="inference",workload_kind="Deployment"} %d
`
	inMaintenance := `# HELP gke_workload_nodes_in_maintenance Of the workload's GPU, TPU and Spot nodes, those in host maintenance now.
# TYPE gke_workload_nodes_in_maintenance gauge
gke_workload_nodes_in_maintenance{namespace="serve",workload="inference",workload_kind="Deployment"} 1
`
	e.waitFor("no maintenance, no next-maintenance series", nodes, names...)

	f.patchNode("gpu-1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"1764550000"}}}`)
	e.waitFor("maintenance scheduled on one node", nodes+fmt.Sprintf(next, 1764550000), names...)

	f.patchNode("gpu-0", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"1764540000"}}}`)
	e.waitFor("an earlier maintenance on the other", nodes+fmt.Sprintf(next, 1764540000), names...)

	f.patchNode("gpu-0", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":null,"cloud.google.com/active-node-maintenance":"ONGOING"}}}`)
	e.waitFor("one node in maintenance", nodes+fmt.Sprintf(next, 1764550000)+inMaintenance, names...)

	f.patchNode("gpu-0", `{"metadata":{"labels":{"cloud.google.com/active-node-maintenance":null}}}`)
	f.patchNode("gpu-1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"garbage"}}}`)
	e.waitFor("maintenance over, an unreadable label ignored", nodes, names...)
}

// TestPodMovesNodes: a pod deleted and created again on another node counts there, and its old node no longer.
func TestPodMovesNodes(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, with(gpuLabels, gke.LabelScheduledMaintenanceTime, "1764540000"))
	f.node("gpu-1", newVersion, with(gpuLabels, gke.LabelScheduledMaintenanceTime, "1764550000"))
	f.node("plain-0", newVersion, ordinary)
	f.namespace("train")
	owner := f.job("train", "finetune", nil)
	spec := podSpec{namespace: "train", name: "finetune-0", node: "gpu-0", owner: owner, grace: 30}
	f.pod(spec)
	e := startExporter(t, api)
	want := `# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
gke_workload_nodes{namespace="train",workload="finetune",workload_kind="Job"} 1
# HELP gke_workload_next_maintenance_timestamp_seconds Earliest scheduled maintenance among the workload's GPU, TPU and Spot nodes.
# TYPE gke_workload_next_maintenance_timestamp_seconds gauge
gke_workload_next_maintenance_timestamp_seconds{namespace="train",workload="finetune",workload_kind="Job"} %d
# HELP gke_readiness_findings Pods of the workload (1 for checks of the cluster) failing a readiness check; see docs/readiness.md.
# TYPE gke_readiness_findings gauge
gke_readiness_findings{check="graceful_termination_disabled"} 1
gke_readiness_findings{check="grace_period_short",namespace="train",workload="finetune",workload_kind="Job"} 1
`
	e.waitFor("on gpu-0", fmt.Sprintf(want, 1764540000))

	f.deletePod("train", "finetune-0")
	spec.node = "gpu-1"
	f.pod(spec)
	e.waitFor("moved to gpu-1", fmt.Sprintf(want, 1764550000))

	f.deletePod("train", "finetune-0")
	spec.node = "plain-0"
	f.pod(spec)
	e.waitFor("moved to an ordinary node", `# HELP gke_readiness_findings Pods of the workload (1 for checks of the cluster) failing a readiness check; see docs/readiness.md.
# TYPE gke_readiness_findings gauge
gke_readiness_findings{check="graceful_termination_disabled"} 1
`)
}

// TestGracefulTerminationConfigMap follows kube-system/gke-disruption-handling created, changed and deleted.
func TestGracefulTerminationConfigMap(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	e := startExporter(t, api)
	disabled := `# HELP gke_readiness_findings Pods of the workload (1 for checks of the cluster) failing a readiness check; see docs/readiness.md.
# TYPE gke_readiness_findings gauge
gke_readiness_findings{check="graceful_termination_disabled"} 1
`
	names := []string{"gke_readiness_findings"}
	e.waitFor("missing ConfigMap", disabled, names...)

	// Another ConfigMap in kube-system is not the one.
	_, err := api.Client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "other"}, Data: map[string]string{"gracefulTermination": "true"}}, metav1.CreateOptions{})
	f.check(err, "creating another ConfigMap")
	f.gracefulTermination(map[string]string{"gracefulTermination": "false"})
	e.waitFor("ConfigMap created, turned off", disabled, names...)

	f.gracefulTermination(map[string]string{"gracefulTermination": "true"})
	e.waitFor("turned on", "", names...)

	f.gracefulTermination(map[string]string{"gracefulTermination": "maybe"})
	e.waitFor("an unreadable value is not on", disabled, names...)

	f.gracefulTermination(map[string]string{"gracefulTermination": "true"})
	e.waitFor("on again", "", names...)

	f.check(api.Client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), gke.ConfigMapDisruptionHandling, metav1.DeleteOptions{}), "deleting the ConfigMap")
	e.waitFor("ConfigMap deleted", disabled, names...)

	f.check(api.Client.CoreV1().Nodes().Delete(context.Background(), "gpu-0", metav1.DeleteOptions{}), "deleting the node")
	e.waitFor("no GPU/TPU node left: nothing to terminate gracefully", "", names...)
}

// TestOwnerAndBudgetChanges: a ReplicaSet adopted by a Deployment moves its pods to the Deployment; a
// PodDisruptionBudget created, loosened and deleted after the pods changes their findings.
func TestOwnerAndBudgetChanges(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	f.namespace("serve")
	f.gracefulTermination(map[string]string{"gracefulTermination": "true"})
	labels := map[string]string{"app": "inference"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	rs, err := api.Client.AppsV1().ReplicaSets("serve").Create(f.ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "inference-7c9d", Namespace: "serve"},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	f.check(err, "creating the replicaset")
	f.pod(podSpec{namespace: "serve", name: "inference-7c9d-x", node: "gpu-0", labels: labels, grace: 120,
		owner: controller("apps/v1", "ReplicaSet", rs.Name, rs.UID)})
	e := startExporter(t, api)
	nodes := `# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
gke_workload_nodes{namespace="serve",workload="%s",workload_kind="%s"} 1
`
	e.waitFor("an orphan ReplicaSet is the workload", fmt.Sprintf(nodes, "inference-7c9d", "ReplicaSet"))

	d, err := api.Client.AppsV1().Deployments("serve").Create(f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inference", Namespace: "serve"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	f.check(err, "creating the deployment")
	rs.OwnerReferences = []metav1.OwnerReference{*controller("apps/v1", "Deployment", d.Name, d.UID)}
	_, err = api.Client.AppsV1().ReplicaSets("serve").Update(f.ctx, rs, metav1.UpdateOptions{})
	f.check(err, "adopting the replicaset")
	e.waitFor("adopted by the Deployment", fmt.Sprintf(nodes, "inference", "Deployment"))

	f.pdb("serve", "inference", labels, 0)
	blocked := `# HELP gke_readiness_findings Pods of the workload (1 for checks of the cluster) failing a readiness check; see docs/readiness.md.
# TYPE gke_readiness_findings gauge
gke_readiness_findings{check="pdb_blocks_drain",namespace="serve",workload="inference",workload_kind="Deployment"} 1
`
	names := []string{"gke_readiness_findings"}
	e.waitFor("a budget allowing no disruption", blocked, names...)

	pdb, err := api.Client.PolicyV1().PodDisruptionBudgets("serve").Get(f.ctx, "inference", metav1.GetOptions{})
	f.check(err, "reading the pdb")
	one := intstr.FromInt32(1)
	pdb.Spec.MaxUnavailable = &one
	_, err = api.Client.PolicyV1().PodDisruptionBudgets("serve").Update(f.ctx, pdb, metav1.UpdateOptions{})
	f.check(err, "loosening the pdb")
	e.waitFor("the budget allows one", "", names...)

	f.check(api.Client.PolicyV1().PodDisruptionBudgets("serve").Delete(f.ctx, "inference", metav1.DeleteOptions{}), "deleting the pdb")
	f.pdb("serve", "everything", nil, 0) // an empty selector selects every pod of the namespace
	e.waitFor("an empty selector", blocked, names...)
}

// TestRecoversFromAPIServerRestart: series stay while the API server is down, and changes made after it is back
// are followed (the watches relist).
func TestRecoversFromAPIServerRestart(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	f.namespace("train")
	f.gracefulTermination(map[string]string{"gracefulTermination": "true"})
	f.pod(podSpec{namespace: "train", name: "a", node: "gpu-0", grace: 600})
	e := startExporter(t, api)
	nodes := `# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
`
	line := "gke_workload_nodes{namespace=\"train\",workload=\"%s\",workload_kind=\"Pod\"} 1\n"
	names := []string{"gke_workload_nodes"}
	e.waitFor("before the restart", nodes+fmt.Sprintf(line, "a"), names...)

	api.StopAPIServer()
	e.waitFor("kept while the API server is down", nodes+fmt.Sprintf(line, "a"), names...)
	api.StartAgain()

	f.deletePod("train", "a")
	f.pod(podSpec{namespace: "train", name: "b", node: "gpu-0", grace: 600})
	e.waitFor("changes after the restart", nodes+fmt.Sprintf(line, "b"), names...)
}

// TestBrokenWatchesAreVisible stops the API server: the workloads collector counts its watch errors per resource and,
// once they have failed for longer than the failure grace, reports failure while serving the last known series; it
// recovers when the API server is back and its watches deliver again.
func TestBrokenWatchesAreVisible(t *testing.T) {
	api := testenv.StartAPIServer(t)
	e := startExporter(t, api, WithFailureGrace(500*time.Millisecond))
	success := func(v int) string {
		return fmt.Sprintf(`# HELP gke_disruption_collector_success Whether a collector's part of the scrape succeeded.
# TYPE gke_disruption_collector_success gauge
gke_disruption_collector_success{collector="workloads"} %d
`, v)
	}
	e.waitFor("healthy", success(1), "gke_disruption_collector_success")

	api.StopAPIServer()
	e.waitFor("failing after the grace", success(0), "gke_disruption_collector_success")
	testenv.Eventually(t, 30*time.Second, "watch errors counted for pods", func() error {
		body, err := e.scrapeText()
		if err != nil {
			return err
		}
		if !strings.Contains(body, `gke_disruption_watch_errors_total{resource="pods"}`) ||
			strings.Contains(body, `gke_disruption_watch_errors_total{resource="pods"} 0`) {
			return fmt.Errorf("no pod watch errors counted")
		}
		return nil
	})

	api.StartAgain()
	e.waitFor("healthy again", success(1), "gke_disruption_collector_success")
}

func (e *exporter) scrapeText() (string, error) {
	resp, err := http.Get(e.url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestLeaderWorkerSetLeaderOnOrdinaryNode: the GPU workers of a LeaderWorkerSet whose leader pod runs on an ordinary
// node (whose pods the collector does not keep) belong to the LeaderWorkerSet: by the label its controller puts
// on every pod, and without it through the leader pod's metadata. A JobSet's pod is named by its label where the
// walk stops short.
func TestLeaderWorkerSetLeaderOnOrdinaryNode(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	f := newFixture(t, api)
	f.node("gpu-0", newVersion, gpuLabels)
	f.node("gpu-1", newVersion, gpuLabels)
	f.node("cpu-0", newVersion, ordinary)
	f.namespace("serve")
	f.gracefulTermination(map[string]string{"gracefulTermination": "true"})

	// What the LeaderWorkerSet controller makes (it does not run here): a leader StatefulSet owned by the
	// LeaderWorkerSet, its pod the group's leader, which owns the group's worker StatefulSet.
	group := func(lws string, labelWorkers bool) {
		t.Helper()
		lwsRef := controller("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws, types.UID("9a1e0000-0000-4000-8000-"+fmt.Sprintf("%012x", len(lws))))
		leaderSet := f.statefulSet("serve", lws, lwsRef)
		f.pod(podSpec{namespace: "serve", name: lws + "-0", node: "cpu-0", grace: 600, owner: leaderSet,
			labels: map[string]string{"leaderworkerset.sigs.k8s.io/name": lws, "leaderworkerset.sigs.k8s.io/worker-index": "0"}})
		leader, err := api.Client.CoreV1().Pods("serve").Get(f.ctx, lws+"-0", metav1.GetOptions{})
		f.check(err, "reading the leader pod")
		workerSet := f.statefulSet("serve", lws+"-0", controller("v1", "Pod", leader.Name, leader.UID))
		for i, node := range []string{"gpu-0", "gpu-1"} {
			labels := map[string]string{"app": lws}
			if labelWorkers {
				labels["leaderworkerset.sigs.k8s.io/name"] = lws
				labels["leaderworkerset.sigs.k8s.io/worker-index"] = fmt.Sprint(i + 1)
			}
			f.pod(podSpec{namespace: "serve", name: fmt.Sprintf("%s-0-%d", lws, i+1), node: node, grace: 600, owner: workerSet, labels: labels})
		}
	}
	group("llm", true)
	// A Job of a JobSet the collector has not seen (here: never created).
	f.pod(podSpec{namespace: "serve", name: "train-slice-0-0-x", node: "gpu-0", grace: 600,
		labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "train"},
		owner:  controller("batch/v1", "Job", "train-slice-0", "8f1c2d3e-0000-4000-8000-00000000000a")})
	e := startExporter(t, api)
	const header = `# HELP gke_workload_nodes GPU, TPU and Spot nodes the workload's pods run on.
# TYPE gke_workload_nodes gauge
`
	e.waitFor("the labelled workers named by their LeaderWorkerSet", header+`gke_workload_nodes{namespace="serve",workload="llm",workload_kind="LeaderWorkerSet"} 2
gke_workload_nodes{namespace="serve",workload="train",workload_kind="JobSet"} 1
`, "gke_workload_nodes")

	group("bare", false)
	e.waitFor("unlabelled workers followed through their leader's metadata", header+`gke_workload_nodes{namespace="serve",workload="bare",workload_kind="LeaderWorkerSet"} 2
gke_workload_nodes{namespace="serve",workload="llm",workload_kind="LeaderWorkerSet"} 2
gke_workload_nodes{namespace="serve",workload="train",workload_kind="JobSet"} 1
`, "gke_workload_nodes")
}

// statefulSet creates a StatefulSet owned by owner (no controller runs: it makes no pods).
func (f *fixture) statefulSet(namespace, name string, owner *metav1.OwnerReference) *metav1.OwnerReference {
	f.t.Helper()
	labels := map[string]string{"statefulset": name}
	s, err := f.client.AppsV1().StatefulSets(namespace).Create(f.ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}},
	}, metav1.CreateOptions{})
	f.check(err, "creating statefulset "+name)
	return controller("apps/v1", "StatefulSet", s.Name, s.UID)
}
