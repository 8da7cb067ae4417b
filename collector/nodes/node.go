// Package nodes is the node collector: it watches Node objects and keeps each node's gke_node_* series rendered, so
// a scrape of a 65,000-node cluster is a byte copy.
package nodes

import (
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"strings"
	"unicode/utf8"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// record is all the informer keeps of a node: its name and its rendered samples. The informer cache and the
// collector's store share it, so a node costs its series' bytes and little more.
type record struct {
	name            string
	resourceVersion string
	samples         []byte
	// ends[f] is where family f's samples end in samples; they start where family f-1's end.
	ends [numFamilies]uint16
	// bad are the values that could not be read, counted once when they first appear.
	bad []parseError
	// shared is what each consumer sharing the watch keeps of the node (Collector.Share).
	shared []any
}

// parseError names a label or annotation whose value could not be read.
type parseError struct {
	key   string
	value string
}

// family is the node's samples of family f, nil when it has none.
func (r *record) family(f int) []byte {
	start := uint16(0)
	if f > 0 {
		start = r.ends[f-1]
	}
	if start == r.ends[f] {
		return nil
	}
	return r.samples[start:r.ends[f]]
}

// A record is what the informer stores, so it is a runtime.Object with metadata; records are never changed once
// made, so a copy is the record itself.
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *record) DeepCopyObject() runtime.Object   { return r }
func (r *record) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: r.name, ResourceVersion: r.resourceVersion}
}

// Transform is the informer transform: it reads a node and renders its view into its record as it arrives, so the
// cache never holds the object (status, images, managed fields, labels).
func Transform(obj any) (any, error) { return transform(obj, nil) }

// transform is Transform that also keeps, from the same View, what each consumer sharing the watch keeps.
func transform(obj any, keeps []func(*nodeview.View) any) (any, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil // tombstones, and records already transformed, pass through
	}
	v := nodeview.Of(node)
	r := render(v)
	if len(keeps) > 0 {
		r.shared = make([]any, len(keeps))
		for i, keep := range keeps {
			r.shared[i] = keep(v)
		}
	}
	return r, nil
}

// labelValue is a node label as a Prometheus label value; values that are not valid UTF-8 are dropped.
func labelValue(labels map[string]string, keys ...string) string {
	for _, key := range keys {
		if v, ok := labels[key]; ok {
			return utf8Value(v)
		}
	}
	return ""
}

// utf8Value is v as a Prometheus label value: "" when v is not valid UTF-8.
func utf8Value(v string) string {
	if !utf8.ValidString(v) {
		return ""
	}
	return v
}

// provisioning is the node's provisioning model: the GKE label, else spot for gke-spot=true, else standard.
func provisioning(labels map[string]string) string {
	if v := labelValue(labels, gke.LabelProvisioning); v != "" {
		return v
	}
	if labels[gke.LabelSpot] == "true" {
		return "spot"
	}
	return "standard"
}

// maintenanceState is active-node-maintenance lower-cased; unknown values (passthrough) pass through, empty means
// none.
func maintenanceState(labels map[string]string) string {
	return strings.ToLower(labelValue(labels, gke.LabelActiveNodeMaintenance))
}
