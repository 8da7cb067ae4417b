package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

const chartDir = "helm/gke-disruption-exporter"

// helm runs the pinned Helm with its own empty configuration, cache and data directories.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(testenv.Binary(t, "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache",
		"HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// helmTemplate renders the chart into the install's namespace with the --set values.
func helmTemplate(t *testing.T, set ...string) manifests {
	t.Helper()
	args := []string{"template", "gke-disruption-exporter", chartDir, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeYAML(t, helm(t, args...))
}

func decodeYAML(t *testing.T, s string) manifests {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out manifests
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("decoding helm output: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// chartFlavours are the chart's values that render what each overlay does.
var chartFlavours = map[string][]string{
	"overlays/prometheus-operator":       {"prometheusOperator.enabled=true", "dashboards.enabled=true"},
	"overlays/google-managed-prometheus": {"googleManagedPrometheus.enabled=true"},
}

func TestChartLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	for _, set := range chartFlavours {
		helm(t, "lint", "--strict", chartDir, "--set", strings.Join(set, ","))
	}
}

// TestChartMatchesKustomize renders the chart with each flavour's values and the overlay of that flavour, and
// compares the objects: the same objects, field for field, apart from Helm's own labels, the Namespace (made by
// `helm install --create-namespace`) and kustomize's content hashes in generated names.
func TestChartMatchesKustomize(t *testing.T) {
	for dir, set := range chartFlavours {
		t.Run(dir, func(t *testing.T) {
			want := normalize(t, build(t, dir))
			got := normalize(t, helmTemplate(t, set...))
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					t.Errorf("the chart lacks %s", k)
					continue
				}
				if g != w {
					t.Errorf("%s differs:\nchart:     %s\nkustomize: %s", k, g, w)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("the chart renders %s, the overlay does not", k)
				}
			}
		})
	}
}

// helmLabels are the labels the chart adds to every object.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// generatedName is a kustomize generator's name with its content hash.
var generatedName = regexp.MustCompile(`^(gke-disruption-exporter-actions-(?:policy|web-config))-[a-z0-9]{10}$`)

// normalize maps kind/namespace/name to the object as canonical JSON, ready to compare.
func normalize(t *testing.T, m manifests) map[string]string {
	t.Helper()
	hashed := map[string]string{}
	for _, u := range m {
		if g := generatedName.FindStringSubmatch(u.GetName()); g != nil {
			hashed[u.GetName()] = g[1]
		}
	}
	out := map[string]string{}
	for _, u := range m {
		if u.GetKind() == "Namespace" {
			continue
		}
		labels := u.GetLabels()
		for _, l := range helmLabels {
			delete(labels, l)
		}
		u.SetLabels(labels)
		if u.GetKind() == "Secret" {
			// kustomize wraps base64 at 76 characters, Helm does not: the same bytes.
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for k, v := range data {
				data[k] = strings.ReplaceAll(v, "\n", "")
			}
			if err := unstructured.SetNestedStringMap(u.Object, data, "data"); err != nil {
				t.Fatal(err)
			}
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		for from, to := range hashed {
			s = strings.ReplaceAll(s, `"`+from+`"`, `"`+to+`"`)
		}
		// Re-encode so that both sides have the same key order and number formatting.
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		canon, _ := json.Marshal(v)
		name := u.GetName()
		if to, ok := hashed[name]; ok {
			name = to
		}
		out[u.GetKind()+" "+key(u.GetNamespace(), name)] = string(canon)
	}
	return out
}

// TestChartValues renders the chart with every value set and checks that each reaches its object.
func TestChartValues(t *testing.T) {
	values := `
image: {repository: registry.example.com/gde, tag: v9.8.7, pullPolicy: Always}
cluster:
  extraArgs: [--cloudmonitoring.project=my-project]
  resources: {requests: {cpu: 100m, memory: 1Gi}, limits: {memory: 2Gi}}
  priorityClassName: ""
  nodeSelector: {cloud.google.com/gke-nodepool: system}
  tolerations: [{key: dedicated, value: system, effect: NoSchedule}]
  serviceAccount: {annotations: {iam.gke.io/gcp-service-account: gde@my-project.iam.gserviceaccount.com}}
node:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: cloud.google.com/gke-accelerator, operator: Exists}]}]}}}
actions:
  priorityClassName: high
  policy: "dryRun: false\npools: []\n"
  webConfig: "basic_auth_users: {}\n"
  scrape: {username: scraper, password: s3cret}
  networkPolicy: {enabled: false}
  serviceAccount: {annotations: {iam.gke.io/gcp-service-account: gde-actions@my-project.iam.gserviceaccount.com}}
prometheusOperator: {enabled: true, labels: {release: kube-prometheus-stack}}
dashboards: {enabled: true, namespace: monitoring, annotations: {grafana_folder: GKE}}
`
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	m := decodeYAML(t, helm(t, "template", "gke-disruption-exporter", chartDir, "--namespace", "observability", "-f", file))

	clusterPod := m.podTemplateIn(t, clusterWorkload, "observability").Spec
	c := clusterPod.Containers[0]
	if c.Image != "registry.example.com/gde:v9.8.7" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("cluster image %s (%s), want registry.example.com/gde:v9.8.7 (Always)", c.Image, c.ImagePullPolicy)
	}
	if c.Args[len(c.Args)-1] != "--cloudmonitoring.project=my-project" || c.Args[0] != "cluster" {
		t.Errorf("cluster args %v, want the base's with --cloudmonitoring.project=my-project appended", c.Args)
	}
	if got := c.Resources.Requests.Memory().String(); got != "1Gi" {
		t.Errorf("cluster memory request %s, want 1Gi", got)
	}
	if clusterPod.PriorityClassName != "" {
		t.Errorf("cluster priorityClassName %q, want none", clusterPod.PriorityClassName)
	}
	if clusterPod.NodeSelector["cloud.google.com/gke-nodepool"] != "system" || len(clusterPod.Tolerations) != 1 {
		t.Errorf("cluster nodeSelector %v, tolerations %v", clusterPod.NodeSelector, clusterPod.Tolerations)
	}
	if clusterPod.Affinity == nil || clusterPod.Affinity.NodeAffinity == nil {
		t.Error("cluster lost the base's node affinity")
	}
	var sa corev1.ServiceAccount
	decode(t, m.must(t, "ServiceAccount", "observability", clusterWorkload.name), &sa)
	if sa.Annotations["iam.gke.io/gcp-service-account"] != "gde@my-project.iam.gserviceaccount.com" {
		t.Errorf("cluster ServiceAccount annotations %v", sa.Annotations)
	}
	var actionsSA corev1.ServiceAccount
	decode(t, m.must(t, "ServiceAccount", "observability", "gke-disruption-exporter-actions"), &actionsSA)
	if actionsSA.Annotations["iam.gke.io/gcp-service-account"] != "gde-actions@my-project.iam.gserviceaccount.com" {
		t.Errorf("actions ServiceAccount annotations %v", actionsSA.Annotations)
	}

	nodePod := m.podTemplateIn(t, nodeWorkload, "observability").Spec
	if len(nodePod.Tolerations) != 1 || nodePod.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("node tolerations %v, want only nvidia.com/gpu", nodePod.Tolerations)
	}
	if terms := nodePod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 {
		t.Errorf("node affinity terms %v, want the one given", terms)
	}
	if nodePod.PriorityClassName != "system-node-critical" {
		t.Errorf("node priorityClassName %q", nodePod.PriorityClassName)
	}

	if p := m.podTemplateIn(t, actionsWorkload, "observability").Spec.PriorityClassName; p != "high" {
		t.Errorf("actions priorityClassName %q, want high", p)
	}
	var policy corev1.ConfigMap
	decode(t, m.must(t, "ConfigMap", "observability", "gke-disruption-exporter-actions-policy"), &policy)
	if policy.Data["policy.yaml"] != "dryRun: false\npools: []\n" {
		t.Errorf("policy %q", policy.Data["policy.yaml"])
	}
	var web, scrape corev1.Secret
	decode(t, m.must(t, "Secret", "observability", "gke-disruption-exporter-actions-web-config"), &web)
	decode(t, m.must(t, "Secret", "observability", "gke-disruption-exporter-actions-scrape"), &scrape)
	if string(web.Data["web-config.yml"]) != "basic_auth_users: {}\n" || string(scrape.Data["username"]) != "scraper" || string(scrape.Data["password"]) != "s3cret" {
		t.Errorf("web config %q, scrape %q:%q", web.Data["web-config.yml"], scrape.Data["username"], scrape.Data["password"])
	}
	if np := m.ofKind("NetworkPolicy"); len(np) != 0 {
		t.Error("NetworkPolicy rendered with actions.networkPolicy.enabled=false")
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		for _, u := range m.ofKind(kind) {
			if u.GetLabels()["release"] != "kube-prometheus-stack" || u.GetNamespace() != "observability" {
				t.Errorf("%s %s: labels %v in %s", kind, u.GetName(), u.GetLabels(), u.GetNamespace())
			}
		}
	}
	dash := m.must(t, "ConfigMap", "monitoring", "gke-disruption-exporter-dashboards")
	if dash.GetLabels()["grafana_dashboard"] != "1" || dash.GetAnnotations()["grafana_folder"] != "GKE" {
		t.Errorf("dashboards ConfigMap labels %v, annotations %v", dash.GetLabels(), dash.GetAnnotations())
	}
	for _, u := range m.ofKind("RoleBinding") {
		var b struct {
			Subjects []struct{ Namespace string } `json:"subjects"`
		}
		data, _ := json.Marshal(u.Object)
		_ = json.Unmarshal(data, &b)
		for _, s := range b.Subjects {
			if s.Namespace == namespace {
				t.Errorf("RoleBinding %s still binds a subject in %s", u.GetName(), namespace)
			}
		}
	}
}

// podTemplateIn is podTemplate for an install in another namespace.
func (m manifests) podTemplateIn(t *testing.T, w workload, ns string) corev1.PodTemplateSpec {
	t.Helper()
	var moved manifests
	for _, u := range m {
		if u.GetKind() == w.kind && u.GetName() == w.name && u.GetNamespace() == ns {
			c := u.DeepCopy()
			c.SetNamespace(namespace)
			moved = append(moved, c)
		}
	}
	return moved.podTemplate(t, w)
}

// TestChartDefaultImageIsAppVersion checks that the image tag follows the chart's appVersion unless set.
func TestChartDefaultImageIsAppVersion(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	data, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	for _, w := range workloads {
		if img := helmTemplate(t).podTemplate(t, w).Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+chart.AppVersion) {
			t.Errorf("%s image %s, want the tag %s", w.command, img, chart.AppVersion)
		}
	}
}

// TestChartSchemaRejects checks that values.schema.json turns away values of the wrong shape with a clear error.
func TestChartSchemaRejects(t *testing.T) {
	for _, set := range []string{"cluster.extraArgs=--oops", "node.tolerations=none", "image.tag=", "prometheusOperator.enabled=yes", "clsuter.extraArgs={--x}"} {
		args := []string{"template", "x", chartDir, "--set", set}
		cmd := exec.Command(testenv.Binary(t, "helm"), args...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if set == "image.tag=" {
			if err != nil {
				t.Errorf("--set %s: %v\n%s", set, err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(string(out), "schema") {
			t.Errorf("--set %s: accepted (err %v)\n%.300s", set, err, out)
		}
	}
}

// TestChartInstallUpgradeRollback installs the chart on a real API server, upgrades it with a new policy and
// extra args, and rolls it back.
func TestChartInstallUpgradeRollback(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	kc := []string{"--kubeconfig", api.Kubeconfig, "--namespace", "monitoring-gde"}
	helm(t, append([]string{"install", "gde", chartDir, "--create-namespace"}, kc...)...)

	policy := func() string {
		cm, err := api.Client.CoreV1().ConfigMaps("monitoring-gde").Get(ctx, "gke-disruption-exporter-actions-policy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["policy.yaml"]
	}
	clusterArgs := func() []string {
		d, err := api.Client.AppsV1().Deployments("monitoring-gde").Get(ctx, clusterWorkload.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	shipped, err := os.ReadFile("base/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := policy(); got != string(shipped) {
		t.Fatalf("installed policy %q, want the shipped one", got)
	}
	ds, err := api.Client.AppsV1().DaemonSets("monitoring-gde").Get(ctx, nodeWorkload.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "" && tol.Operator == corev1.TolerationOpExists }) {
		t.Errorf("installed DaemonSet tolerations %v lack the keyless Exists", ds.Spec.Template.Spec.Tolerations)
	}

	helm(t, append([]string{"upgrade", "gde", chartDir, "--set", "actions.policy=dryRun: false", "--set", "cluster.extraArgs={--cloudmonitoring.project=p}"}, kc...)...)
	if got := policy(); got != "dryRun: false" {
		t.Errorf("upgraded policy %q", got)
	}
	if args := clusterArgs(); !slices.Contains(args, "--cloudmonitoring.project=p") {
		t.Errorf("upgraded cluster args %v", args)
	}

	helm(t, append([]string{"rollback", "gde", "1", "--wait=false"}, kc...)...)
	if got := policy(); got != string(shipped) {
		t.Errorf("rolled-back policy %q, want the shipped one", got)
	}
	if args := clusterArgs(); slices.Contains(args, "--cloudmonitoring.project=p") {
		t.Errorf("rolled-back cluster args %v", args)
	}
	history := helm(t, append([]string{"history", "gde", "-o", "json"}, kc...)...)
	var revisions []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(history), &revisions); err != nil || len(revisions) != 3 || revisions[2].Status != "deployed" {
		t.Errorf("history %s (%v), want three revisions, the last deployed", history, err)
	}

	// The installed objects are the chart's, and they pass the API server's validation of a server-side apply.
	c := clusterOn(t, api)
	for _, u := range decodeYAML(t, helm(t, append([]string{"get", "manifest", "gde"}, kc...)...)) {
		c.apply(t, u, true)
	}
}
