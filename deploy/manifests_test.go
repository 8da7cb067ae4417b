package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// workload is one command of the binary as design.md defines it.
type workload struct {
	kind, name, command string
	port                int32
}

var (
	clusterWorkload = workload{"Deployment", "gke-disruption-exporter-cluster", "cluster", 9842}
	nodeWorkload    = workload{"DaemonSet", "gke-disruption-exporter-node", "node", 9843}
	actionsWorkload = workload{"Deployment", "gke-disruption-exporter-actions", "actions", 9844}
	workloads       = []workload{clusterWorkload, nodeWorkload, actionsWorkload}
)

// podTemplate returns the workload's pod template.
func (m manifests) podTemplate(t *testing.T, w workload) corev1.PodTemplateSpec {
	t.Helper()
	u := m.must(t, w.kind, namespace, w.name)
	if w.kind == "DaemonSet" {
		var ds appsv1.DaemonSet
		decode(t, u, &ds)
		return ds.Spec.Template
	}
	var d appsv1.Deployment
	decode(t, u, &d)
	return d.Spec.Template
}

func TestInstallsRender(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			m := build(t, dir)
			for _, w := range workloads {
				t.Run(w.command, func(t *testing.T) {
					tmpl := m.podTemplate(t, w)
					checkHardened(t, tmpl.Spec)
					checkCommand(t, tmpl.Spec, w)
					checkService(t, m, tmpl, w)
				})
			}
			checkReplicas(t, m)
			checkNode(t, m)
			checkActions(t, m)
			checkClusterCritical(t, m)
			checkScheduling(t, m)
			checkNetworkPolicy(t, m)
			checkScrapeConfig(t, m)
		})
	}
}

// checkHardened holds every pod to the restricted Pod Security profile's container settings.
func checkHardened(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile is not RuntimeDefault")
	}
	if len(spec.InitContainers) > 0 {
		t.Errorf("unexpected init containers %v", spec.InitContainers)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s: no securityContext", c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s: privileged", c.Name)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: capabilities are %+v, want drop [ALL] and nothing added", c.Name, sc.Capabilities)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("container %s: no %s request", c.Name, r)
			}
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("container %s: no memory limit", c.Name)
		}
		if !strings.HasPrefix(c.Image, "ghcr.io/gke-disruption-exporter/gke-disruption-exporter:") {
			t.Errorf("container %s: image %q is not the project's", c.Name, c.Image)
		}
	}
}

// checkCommand checks the command, its listen port and its probes against design.md.
func checkCommand(t *testing.T, spec corev1.PodSpec, w workload) {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("command %v overrides the image's entrypoint", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != w.command {
		t.Fatalf("args %v do not start with the command %q", c.Args, w.command)
	}
	if listen := fmt.Sprintf("--web.listen-address=:%d", w.port); !slices.Contains(c.Args, listen) {
		t.Errorf("args %v lack %s", c.Args, listen)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != w.port {
		t.Errorf("ports %+v, want one named http on %d", c.Ports, w.port)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		switch {
		case p == nil:
			t.Errorf("no %s probe", name)
		case p.HTTPGet != nil && p.HTTPGet.Port != intstr.FromString("http"):
			t.Errorf("%s probe on port %v, want http", name, p.HTTPGet.Port)
		case p.TCPSocket != nil && p.TCPSocket.Port != intstr.FromString("http"):
			t.Errorf("%s probe on port %v, want http", name, p.TCPSocket.Port)
		}
	}
}

// checkService checks that the workload's Service reaches its pods on the command's port.
func checkService(t *testing.T, m manifests, tmpl corev1.PodTemplateSpec, w workload) {
	t.Helper()
	var svc corev1.Service
	decode(t, m.must(t, "Service", namespace, w.name), &svc)
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("Service selector %v does not select the pod labels %v", svc.Spec.Selector, tmpl.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != w.port || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("Service ports %+v, want %d to http", svc.Spec.Ports, w.port)
	}
}

func checkReplicas(t *testing.T, m manifests) {
	t.Helper()
	for name, want := range map[string]int32{clusterWorkload.name: 1, actionsWorkload.name: 2} {
		var d appsv1.Deployment
		decode(t, m.must(t, "Deployment", namespace, name), &d)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
			t.Errorf("Deployment %s: replicas %v, want %d", name, d.Spec.Replicas, want)
		}
	}
}

// checkNode checks how the node command reaches the metadata server and its name, and that it has no API access.
func checkNode(t *testing.T, m manifests) {
	t.Helper()
	spec := m.podTemplate(t, nodeWorkload).Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("node: hostNetwork %v with dnsPolicy %q, want true with ClusterFirstWithHostNet", spec.HostNetwork, spec.DNSPolicy)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("node: pod mounts a service account token")
	}
	var sa corev1.ServiceAccount
	decode(t, m.must(t, "ServiceAccount", namespace, spec.ServiceAccountName), &sa)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("node: ServiceAccount %s mounts its token", sa.Name)
	}
	c := spec.Containers[0]
	if !slices.Contains(c.Args, "--node.name=$(NODE_NAME)") {
		t.Errorf("node: args %v lack --node.name=$(NODE_NAME)", c.Args)
	}
	checkFieldEnv(t, c, "NODE_NAME", "spec.nodeName")
	checkNodeOutlivesWorkloads(t, m, spec)
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, u := range m.ofKind(kind) {
			var b rbacv1.RoleBinding
			decode(t, u, &b)
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == spec.ServiceAccountName {
					t.Errorf("node: %s %s binds its ServiceAccount", kind, key(u.GetNamespace(), u.GetName()))
				}
			}
		}
	}
}

func checkFieldEnv(t *testing.T, c corev1.Container, name, fieldPath string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != fieldPath {
				t.Errorf("%s: env %s is not from the downward API field %s", c.Name, name, fieldPath)
			}
			return
		}
	}
	t.Errorf("%s: no env %s", c.Name, name)
}

// checkActions checks the actions Deployment's identity, policy and web config, and its disruption budget.
func checkActions(t *testing.T, m manifests) {
	t.Helper()
	tmpl := m.podTemplate(t, actionsWorkload)
	c := tmpl.Spec.Containers[0]
	checkFieldEnv(t, c, "POD_NAME", "metadata.name")
	checkFieldEnv(t, c, "POD_NAMESPACE", "metadata.namespace")

	// Each file flag must name a key of the ConfigMap or Secret mounted at its directory, and that object must be
	// in the build.
	for flag, kind := range map[string]string{"--config.file": "ConfigMap", "--web.config.file": "Secret"} {
		path := flagValue(c.Args, flag)
		if path == "" {
			t.Errorf("actions: no %s", flag)
			continue
		}
		if data := mountedData(t, m, tmpl.Spec, c, path, kind); data == "" {
			t.Errorf("actions: %s=%s is not a key of a mounted %s", flag, path, kind)
		}
	}

	var pdb policyv1.PodDisruptionBudget
	decode(t, m.must(t, "PodDisruptionBudget", namespace, actionsWorkload.name), &pdb)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("actions: PodDisruptionBudget selector %v does not select the pods", pdb.Spec.Selector)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("actions: PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	aa := tmpl.Spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatal("actions: no pod anti-affinity")
	}
	term := aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err != nil || !sel.Matches(labels.Set(tmpl.Labels)) || term.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("actions: anti-affinity %+v does not spread its own pods over hosts", term)
	}
}

func flagValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// mountedData returns the content of the key that path names in the ConfigMap or Secret mounted at its directory.
func mountedData(t *testing.T, m manifests, spec corev1.PodSpec, c corev1.Container, path, kind string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		file, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok || strings.Contains(file, "/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case kind == "ConfigMap" && v.ConfigMap != nil:
				var cm corev1.ConfigMap
				decode(t, m.must(t, kind, namespace, v.ConfigMap.Name), &cm)
				return cm.Data[file]
			case kind == "Secret" && v.Secret != nil:
				var s corev1.Secret
				decode(t, m.must(t, kind, namespace, v.Secret.SecretName), &s)
				return string(s.Data[file]) + s.StringData[file]
			}
		}
	}
	return ""
}

// GKE nodes as the scheduler sees them: the labels and taints GKE puts on each kind of node pool.
var (
	gpuNode = node("gpu", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
		corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
	tpuNode = node("tpu", map[string]string{"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice", "cloud.google.com/gke-tpu-topology": "2x2x2"},
		corev1.Taint{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
	spotNode = node("spot", map[string]string{"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-provisioning": "spot"},
		corev1.Taint{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	preemptibleNode = node("preemptible", map[string]string{"cloud.google.com/gke-preemptible": "true"},
		corev1.Taint{Key: "cloud.google.com/gke-preemptible", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	// A Spot GPU node in graceful termination.
	terminatingNode = node("terminating", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-spot": "true"},
		corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: "cloud.google.com/impending-node-termination", Effect: corev1.TaintEffectNoSchedule})
	standardNode = node("standard", map[string]string{"cloud.google.com/gke-nodepool": "default-pool"})
	// Pools tainted by their owners (gcloud ... --node-taints=dedicated=ml:NoSchedule), and a NoExecute taint.
	dedicatedNode = node("dedicated", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
		corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule})
	noExecuteNode = node("no-execute", map[string]string{"cloud.google.com/gke-spot": "true"},
		corev1.Taint{Key: "example.com/team", Value: "research", Effect: corev1.TaintEffectNoExecute})
	dedicatedStandardNode = node("dedicated-standard", map[string]string{"cloud.google.com/gke-nodepool": "batch"},
		corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule})
)

func node(name string, l map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints}}
}

// checkScheduling places each workload on the sample nodes: the node command on exactly the nodes that cannot
// live-migrate, the others never on accelerator nodes.
func checkScheduling(t *testing.T, m manifests) {
	t.Helper()
	all := []*corev1.Node{gpuNode, tpuNode, spotNode, preemptibleNode, terminatingNode, standardNode, dedicatedNode, noExecuteNode, dedicatedStandardNode}
	want := map[workload][]string{
		nodeWorkload:    {"gpu", "tpu", "spot", "preemptible", "terminating", "dedicated", "no-execute"},
		clusterWorkload: {"standard"},
		actionsWorkload: {"standard"},
	}
	for _, w := range workloads {
		spec := m.podTemplate(t, w).Spec
		var got []string
		for _, n := range all {
			if schedulable(t, spec, n) {
				got = append(got, n.Name)
			}
		}
		if !slices.Equal(got, want[w]) {
			t.Errorf("%s schedules on %v, want %v", w.command, got, want[w])
		}
	}
}

// schedulable is the scheduler's verdict from required node affinity, nodeSelector and taints.
func schedulable(t *testing.T, spec corev1.PodSpec, n *corev1.Node) bool {
	t.Helper()
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		matched := false
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if termMatches(t, term, n.Labels) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(klog.Background(), &taint, false)
		}) {
			return false
		}
	}
	return true
}

var selectorOperators = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
}

func termMatches(t *testing.T, term corev1.NodeSelectorTerm, l map[string]string) bool {
	t.Helper()
	if len(term.MatchFields) > 0 {
		t.Fatalf("matchFields %v cannot be evaluated here", term.MatchFields)
	}
	sel := labels.NewSelector()
	for _, r := range term.MatchExpressions {
		op, ok := selectorOperators[r.Operator]
		if !ok {
			t.Fatalf("node affinity operator %q cannot be evaluated here", r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			t.Fatalf("node affinity %+v: %v", r, err)
		}
		sel = sel.Add(*req)
	}
	return sel.Matches(labels.Set(l))
}

// checkNetworkPolicy checks that only selected monitoring pods reach the actions pods, on the actions port.
func checkNetworkPolicy(t *testing.T, m manifests) {
	t.Helper()
	tmpl := m.podTemplate(t, actionsWorkload)
	var np networkingv1.NetworkPolicy
	decode(t, m.must(t, "NetworkPolicy", namespace, actionsWorkload.name), &np)
	if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || !sel.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("NetworkPolicy podSelector %v does not select the actions pods", np.Spec.PodSelector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("NetworkPolicy admits nothing: Alertmanager cannot reach the webhook")
	}
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.IntValue() != int(actionsWorkload.port) {
			t.Errorf("ingress[%d] ports %+v, want only %d", i, rule.Ports, actionsWorkload.port)
		}
		if len(rule.From) == 0 {
			t.Errorf("ingress[%d] admits every source", i)
		}
		for j, peer := range rule.From {
			if peer.NamespaceSelector == nil || peer.PodSelector == nil || peer.IPBlock != nil {
				t.Errorf("ingress[%d].from[%d] %+v is not a pod selector within a namespace selector", i, j, peer)
				continue
			}
			for _, s := range []*metav1.LabelSelector{peer.NamespaceSelector, peer.PodSelector} {
				if sel, err := metav1.LabelSelectorAsSelector(s); err != nil || sel.Empty() {
					t.Errorf("ingress[%d].from[%d] selector %v matches everything", i, j, s)
				}
			}
		}
	}
}

// checkScrapeConfig checks that the build's Prometheus flavour scrapes every command, the actions service with the
// credentials that are in the build.
func checkScrapeConfig(t *testing.T, m manifests) {
	t.Helper()
	monitors := append(m.ofKind("ServiceMonitor"), m.ofKind("PodMonitoring")...)
	if len(monitors) != len(workloads) {
		t.Fatalf("%d scrape configurations, want one per command (%d)", len(monitors), len(workloads))
	}
	for _, w := range workloads {
		i := slices.IndexFunc(monitors, func(u *unstructured.Unstructured) bool {
			return u.GetName() == w.name && u.GetNamespace() == namespace
		})
		if i < 0 {
			t.Errorf("no scrape configuration named %s", w.name)
			continue
		}
		u := monitors[i]
		target := m.podTemplate(t, w).Labels
		if u.GetKind() == "ServiceMonitor" {
			var svc corev1.Service
			decode(t, m.must(t, "Service", namespace, w.name), &svc)
			target = svc.Labels
		}
		matchLabels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(target)) {
			t.Errorf("%s %s selects %v, not %v", u.GetKind(), u.GetName(), matchLabels, target)
		}
		endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
		if len(endpoints) != 1 {
			t.Errorf("%s %s: %d endpoints, want 1", u.GetKind(), u.GetName(), len(endpoints))
			continue
		}
		ep := endpoints[0].(map[string]any)
		if ep["port"] != "http" {
			t.Errorf("%s %s scrapes port %v, want http", u.GetKind(), u.GetName(), ep["port"])
		}
		checkDropsRuntimeSeries(t, u, ep, w == nodeWorkload)
		if w == nodeWorkload {
			checkNodeTargetLabel(t, u, ep)
		}
		_, auth := ep["basicAuth"]
		if auth != (w == actionsWorkload) {
			t.Errorf("%s %s: basic auth %v, want it only for actions", u.GetKind(), u.GetName(), auth)
		}
		if auth {
			secret, _, _ := unstructured.NestedString(ep, "basicAuth", "password", "name")
			if u.GetKind() == "PodMonitoring" {
				secret, _, _ = unstructured.NestedString(ep, "basicAuth", "password", "secret", "name")
			}
			m.must(t, "Secret", namespace, secret)
		}
	}
}

// checkNodeTargetLabel checks that node agents' targets carry the node name as label node: the exporter-down alert
// leaves out agents whose node is in maintenance by joining on it.
func checkNodeTargetLabel(t *testing.T, u *unstructured.Unstructured, ep map[string]any) {
	t.Helper()
	if u.GetKind() == "PodMonitoring" {
		metadata, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "targetLabels", "metadata")
		if !slices.Contains(metadata, "node") {
			t.Errorf("%s %s: targetLabels.metadata %v lacks node", u.GetKind(), u.GetName(), metadata)
		}
		return
	}
	rules, _, _ := unstructured.NestedSlice(ep, "relabelings")
	for _, r := range rules {
		rule := r.(map[string]any)
		source, _, _ := unstructured.NestedStringSlice(rule, "sourceLabels")
		if rule["targetLabel"] == "node" && slices.Equal(source, []string{"__meta_kubernetes_pod_node_name"}) {
			return
		}
	}
	t.Errorf("%s %s: no relabeling of __meta_kubernetes_pod_node_name to node", u.GetKind(), u.GetName())
}

// checkDropsRuntimeSeries checks that the node agents' scrape drops their Go runtime and process series, and only
// those, and that the other scrapes keep everything.
func checkDropsRuntimeSeries(t *testing.T, u *unstructured.Unstructured, ep map[string]any, wantDrop bool) {
	t.Helper()
	field := "metricRelabelings"
	if u.GetKind() == "PodMonitoring" {
		field = "metricRelabeling"
	}
	rules, _, _ := unstructured.NestedSlice(ep, field)
	var dropped []*regexp.Regexp
	for _, r := range rules {
		rule := r.(map[string]any)
		source, _, _ := unstructured.NestedStringSlice(rule, "sourceLabels")
		if !strings.EqualFold(fmt.Sprint(rule["action"]), "drop") || !slices.Equal(source, []string{"__name__"}) {
			t.Errorf("%s %s: unexpected relabeling %v", u.GetKind(), u.GetName(), rule)
			continue
		}
		// Prometheus anchors relabeling regexes.
		re, err := regexp.Compile("^(?:" + fmt.Sprint(rule["regex"]) + ")$")
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		dropped = append(dropped, re)
	}
	isDropped := func(name string) bool {
		return slices.ContainsFunc(dropped, func(re *regexp.Regexp) bool { return re.MatchString(name) })
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "process_resident_memory_bytes"} {
		if isDropped(name) != wantDrop {
			t.Errorf("%s %s: %s dropped %v, want %v", u.GetKind(), u.GetName(), name, isDropped(name), wantDrop)
		}
	}
	for _, name := range []string{"gce_instance_maintenance_event", "gce_instance_preempted", "gke_disruption_collector_success", "gke_disruption_metadata_requests_total", "gke_disruption_exporter_build_info"} {
		if isDropped(name) {
			t.Errorf("%s %s drops %s", u.GetKind(), u.GetName(), name)
		}
	}
}

// checkPriorityAdmitted checks that a ResourceQuota in the namespace admits the pods' priority class, for at least
// pods of them: GKE admits the system-*-critical classes outside kube-system only so.
func checkPriorityAdmitted(t *testing.T, m manifests, w workload, spec corev1.PodSpec, pods int64) {
	t.Helper()
	for _, u := range m.ofKind("ResourceQuota") {
		var q corev1.ResourceQuota
		decode(t, u, &q)
		if q.Namespace != namespace || q.Spec.ScopeSelector == nil {
			continue
		}
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if e.ScopeName == corev1.ResourceQuotaScopePriorityClass && e.Operator == corev1.ScopeSelectorOpIn &&
				slices.Contains(e.Values, spec.PriorityClassName) {
				if got := q.Spec.Hard[corev1.ResourcePods]; got.Value() < pods {
					t.Errorf("%s: ResourceQuota %s admits %s pods of %s, want at least %d", w.command, q.Name, got.String(), spec.PriorityClassName, pods)
				}
				return
			}
		}
	}
	t.Errorf("%s: no ResourceQuota in %s admits priority class %s (GKE requires one outside kube-system)", w.command, namespace, spec.PriorityClassName)
}

// checkClusterCritical checks that the cluster exporter and the actions service outrank ordinary workloads, within
// a quota that admits their replicas and a rolling update's surge of each.
func checkClusterCritical(t *testing.T, m manifests) {
	t.Helper()
	for _, w := range []workload{clusterWorkload, actionsWorkload} {
		spec := m.podTemplate(t, w).Spec
		if spec.PriorityClassName != "system-cluster-critical" {
			t.Errorf("%s: priorityClassName %q, want system-cluster-critical", w.command, spec.PriorityClassName)
		}
		// 1 cluster + 2 actions replicas, and one surge pod of each during a rolling update.
		checkPriorityAdmitted(t, m, w, spec, 5)
	}
}

// checkNodeOutlivesWorkloads checks that the agent is a critical pod, admitted by a quota, and that it stops serving
// within its grace period: on a preempted Spot VM it is then scraped after the workloads have stopped.
func checkNodeOutlivesWorkloads(t *testing.T, m manifests, spec corev1.PodSpec) {
	t.Helper()
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("node: priorityClassName %q, want system-node-critical", spec.PriorityClassName)
	}
	checkPriorityAdmitted(t, m, nodeWorkload, spec, 65000)
	delay := time.Duration(0)
	for _, a := range spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--web.shutdown-delay="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Errorf("node: %s: %v", a, err)
			}
			delay = d
		}
	}
	if delay <= 0 {
		t.Error("node: no --web.shutdown-delay: the agent would stop serving at SIGTERM")
	}
	grace := 30 * time.Second
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if delay >= grace || grace > 15*time.Second {
		t.Errorf("node: shutdown delay %v and grace period %v: want the delay inside a grace of at most the critical pods' 15s", delay, grace)
	}
}
