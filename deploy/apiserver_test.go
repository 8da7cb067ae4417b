package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

const fieldManager = "deploy-test"

// cluster applies manifests to a real kube-apiserver.
type cluster struct {
	api     *testenv.APIServer
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

// TestInstallsOnAPIServer applies every install to a real kube-apiserver (a server-side dry run, which runs
// validation and admission) and proves the RBAC with SubjectAccessReviews.
func TestInstallsOnAPIServer(t *testing.T) {
	c := newCluster(t)
	for _, dir := range installs {
		t.Run("dry-run/"+dir, func(t *testing.T) {
			m := build(t, dir)
			// Namespaced objects can only be dry-run in a namespace that exists.
			c.apply(t, m.must(t, "Namespace", "", namespace), false)
			for _, u := range m {
				c.apply(t, u, true)
			}
		})
	}
	t.Run("rbac", func(t *testing.T) { c.checkRBAC(t) })
	t.Run("rbac-named", func(t *testing.T) { c.checkNamedRBAC(t) })
	t.Run("runbook-rbac", func(t *testing.T) { c.checkRunbookRBAC(t) })
	t.Run("pod-security", func(t *testing.T) { c.checkPodSecurity(t) })
}

// newCluster starts a real kube-apiserver that serves the monitoring CRDs the installs use.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := clusterOn(t, testenv.StartAPIServer(t))
	c.installCRDs(t)
	return c
}

// clusterOn applies and reads objects of any kind on api.
func clusterOn(t *testing.T, api *testenv.APIServer) *cluster {
	t.Helper()
	dyn, err := dynamic.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{api: api, dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}
}

// checkPodSecurity dry-runs each workload's pod in a namespace that enforces the restricted Pod Security level:
// cluster and actions pass; the node agent breaks it only by using the host network (and with it the host port).
func (c *cluster) checkPodSecurity(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pod-security-restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if _, err := c.api.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := build(t, installs[0])
	for _, w := range workloads {
		tmpl := m.podTemplate(t, w)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns.Name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		_, err := c.api.Client.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if w != nodeWorkload {
			if err != nil {
				t.Errorf("%s pod is not admitted at the restricted level: %v", w.command, err)
			}
			continue
		}
		if err == nil {
			t.Fatal("node pod admitted at the restricted level: does it still use the host network?")
		}
		_, violations, _ := strings.Cut(err.Error(), `violates PodSecurity "restricted:latest": `)
		for _, v := range strings.Split(violations, "), ") {
			if !strings.HasPrefix(v, "host namespaces (") && !strings.HasPrefix(v, "hostPort (") {
				t.Errorf("node pod breaks the restricted level beyond the host network: %s", v)
			}
		}
	}
}

// installCRDs creates the monitoring CRDs from testdata/crds and waits until the API serves their kinds.
func (c *cluster) installCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in testdata/crds: %v", err)
	}
	var names []string
	for _, f := range files {
		for _, u := range readYAML(t, f) {
			c.apply(t, u, false)
			names = append(names, u.GetName())
		}
	}
	crds := c.dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range names {
		testenv.Eventually(t, 30*time.Second, "CRD "+name+" becoming established", func() error {
			u, err := crds.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conditions {
				cm := cond.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", conditions)
		})
	}
	c.mapper.Reset()
}

func readYAML(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// apply server-side applies u, for real or as a dry run, rejecting fields the API does not know.
func (c *cluster) apply(t *testing.T, u *unstructured.Unstructured, dryRun bool) {
	t.Helper()
	gvk := u.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: the API server does not serve this kind: %v", gvk, key(u.GetNamespace(), u.GetName()), err)
	}
	var client dynamic.ResourceInterface = c.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		if u.GetNamespace() == "" {
			t.Fatalf("%s %s has no namespace: kubectl would put it in the current one", gvk.Kind, u.GetName())
		}
		client = c.dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace())
	} else if u.GetNamespace() != "" {
		t.Fatalf("cluster-scoped %s %s has namespace %q", gvk.Kind, u.GetName(), u.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// Apply has strict field validation: an unknown or duplicate field is an error.
	if _, err := client.Apply(context.Background(), u.GetName(), u, opts); err != nil {
		t.Errorf("applying %s %s (dry run %v): %v", gvk.Kind, key(u.GetNamespace(), u.GetName()), dryRun, err)
	}
}

// access is one request a ServiceAccount might make.
type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// anyNamespace in a grant covers every namespace and the cluster scope.
const anyNamespace = "*"

// needs is exactly what each command does with the API; everything else must be refused.
var needs = map[string][]access{
	"gke-disruption-exporter-cluster": {
		{"get", "", "nodes", "", anyNamespace},
		{"list", "", "nodes", "", anyNamespace},
		{"watch", "", "nodes", "", anyNamespace},
		{"list", "", "pods", "", anyNamespace},
		{"watch", "", "pods", "", anyNamespace},
		{"list", "apps", "replicasets", "", anyNamespace},
		{"watch", "apps", "replicasets", "", anyNamespace},
		{"list", "apps", "statefulsets", "", anyNamespace},
		{"watch", "apps", "statefulsets", "", anyNamespace},
		{"list", "batch", "jobs", "", anyNamespace},
		{"watch", "batch", "jobs", "", anyNamespace},
		{"list", "policy", "poddisruptionbudgets", "", anyNamespace},
		{"watch", "policy", "poddisruptionbudgets", "", anyNamespace},
	},
	"gke-disruption-exporter-node": nil,
	"gke-disruption-exporter-actions": {
		{"get", "", "nodes", "", anyNamespace},
		{"list", "", "nodes", "", anyNamespace},
		{"watch", "", "nodes", "", anyNamespace},
		{"patch", "", "nodes", "", anyNamespace},
		{"get", "", "pods", "", anyNamespace},
		{"list", "", "pods", "", anyNamespace},
		{"watch", "", "pods", "", anyNamespace},
		{"create", "", "pods", "eviction", anyNamespace},
		{"get", "apps", "daemonsets", "", anyNamespace},
		{"create", "", "events", "", "default"},
		{"patch", "", "events", "", "default"},
		{"create", "events.k8s.io", "events", "", "default"},
		{"patch", "events.k8s.io", "events", "", "default"},
		{"get", "coordination.k8s.io", "leases", "", anyNamespace},
		{"create", "coordination.k8s.io", "leases", "", namespace},
		{"update", "coordination.k8s.io", "leases", "", namespace},
	},
}

func (a access) grantedBy(grants []access) bool {
	return slices.ContainsFunc(grants, func(g access) bool {
		return g.verb == a.verb && g.group == a.group && g.resource == a.resource && g.subresource == a.subresource &&
			(g.namespace == anyNamespace || g.namespace == a.namespace)
	})
}

// probes are the requests asked about for every ServiceAccount: every verb on what the commands touch, and on
// what an attacker would want (secrets, exec, tokens, workloads, RBAC), cluster-wide and in three namespaces.
func probes() []access {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	type resource struct{ group, resource, subresource string }
	namespaced := []resource{
		{"", "pods", ""}, {"", "pods", "eviction"}, {"", "pods", "exec"}, {"", "pods", "status"},
		{"", "secrets", ""}, {"", "configmaps", ""}, {"", "events", ""}, {"events.k8s.io", "events", ""},
		{"", "serviceaccounts", "token"}, {"coordination.k8s.io", "leases", ""}, {"apps", "daemonsets", ""},
		{"apps", "deployments", ""}, {"policy", "poddisruptionbudgets", ""},
		{"apps", "replicasets", ""}, {"apps", "statefulsets", ""}, {"batch", "jobs", ""},
		{"rbac.authorization.k8s.io", "rolebindings", ""},
	}
	clusterScoped := []resource{
		{"", "nodes", ""}, {"", "nodes", "status"}, {"", "nodes", "proxy"}, {"", "namespaces", ""},
		{"rbac.authorization.k8s.io", "clusterroles", ""}, {"rbac.authorization.k8s.io", "clusterrolebindings", ""},
		{"apiextensions.k8s.io", "customresourcedefinitions", ""},
	}
	var out []access
	for _, v := range verbs {
		for _, r := range clusterScoped {
			out = append(out, access{v, r.group, r.resource, r.subresource, ""})
		}
		for _, r := range namespaced {
			for _, ns := range []string{"", namespace, "default", "kube-system"} {
				out = append(out, access{v, r.group, r.resource, r.subresource, ns})
			}
		}
	}
	return out
}

// checkRBAC applies the RBAC objects of every install for real, then asks the API server's authorizer, for each
// ServiceAccount, about every probe: what its command needs must be allowed, and nothing else.
func (c *cluster) checkRBAC(t *testing.T) {
	c.applyRBAC(t)
	for sa, grants := range needs {
		t.Run(sa, func(t *testing.T) {
			for _, grant := range grants {
				if grant.namespace == anyNamespace {
					continue
				}
				if !slices.ContainsFunc(probes(), func(p access) bool { return p == grant }) {
					t.Fatalf("the probes never ask for %s", grant)
				}
			}
			for _, p := range probes() {
				want := p.grantedBy(grants)
				if got := c.allowed(t, sa, p); got != want {
					t.Errorf("%s may %s: %v, want %v", sa, p, got, want)
				}
			}
		})
	}
}

// applyRBAC applies the ServiceAccounts and RBAC objects of every install, with their namespaces, for real.
func (c *cluster) applyRBAC(t *testing.T) {
	t.Helper()
	rbacKinds := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	for _, dir := range installs {
		m := build(t, dir)
		for _, kind := range rbacKinds {
			for _, u := range m.ofKind(kind) {
				c.apply(t, u, false)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// allowed asks the authorizer whether the ServiceAccount, with the groups its token carries, may make the request.
func (c *cluster) allowed(t *testing.T, sa string, a access) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
		},
	}}
	got, err := c.api.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview for %s %s: %v", sa, a, err)
	}
	return got.Status.Allowed
}

// delete deletes u, as kubectl delete does: it may linger with a deletion timestamp while finalizers run.
func (c *cluster) delete(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	gvk := u.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	var client dynamic.ResourceInterface = c.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		client = c.dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace())
	}
	if err := client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting %s %s: %v", gvk.Kind, key(u.GetNamespace(), u.GetName()), err)
		return
	}
	if left, err := client.Get(context.Background(), u.GetName(), metav1.GetOptions{}); err == nil && left.GetDeletionTimestamp() == nil {
		t.Errorf("%s %s still there after its deletion", gvk.Kind, key(u.GetNamespace(), u.GetName()))
	}
}
