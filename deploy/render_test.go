package deploy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Namespace is where every namespaced object of the install lives.
const namespace = "gke-disruption-exporter"

// installs are the kustomizations an operator applies with `kubectl apply -k`.
var installs = []string{
	"overlays/prometheus-operator",
	"overlays/google-managed-prometheus",
	"examples/overlay",
}

// manifests is the output of one kustomize build.
type manifests []*unstructured.Unstructured

// build runs kustomize on dir as `kubectl apply -k` would, with the default load restrictions.
func build(t *testing.T, dir string) manifests {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out manifests
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("kustomize build %s: encoding %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatalf("kustomize build %s: decoding %s: %v", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out
}

// find returns the object of that kind, namespace and name, or nil.
func (m manifests) find(kind, ns, name string) *unstructured.Unstructured {
	for _, u := range m {
		if u.GetKind() == kind && u.GetNamespace() == ns && u.GetName() == name {
			return u
		}
	}
	return nil
}

// ofKind returns every object of kind.
func (m manifests) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// decode fills the typed object into from u, failing on fields the type does not know.
func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

// must returns the object or fails naming what is missing.
func (m manifests) must(t *testing.T, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := m.find(kind, ns, name)
	if u == nil {
		t.Fatalf("no %s %s", kind, key(ns, name))
	}
	return u
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return fmt.Sprintf("%s/%s", ns, name)
}
