package executor

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// nodePatch is a JSON merge patch of a Node. With a resourceVersion it is conditional: the API server refuses it
// (409) if the node changed since it was read, so a claim or a step never acts on a node it has not seen.
type nodePatch struct {
	resourceVersion string
	labels          map[string]any // a nil value removes the key
	annotations     map[string]any
	unschedulable   *bool
	// leaveOwner writes the annotations without making this instance the owner of the node's work: for what is
	// not work, such as a kept request.
	leaveOwner bool
}

func (p nodePatch) marshal() ([]byte, error) {
	meta := map[string]any{}
	if p.resourceVersion != "" {
		meta["resourceVersion"] = p.resourceVersion
	}
	if len(p.labels) > 0 {
		meta["labels"] = p.labels
	}
	if len(p.annotations) > 0 {
		meta["annotations"] = p.annotations
	}
	doc := map[string]any{"metadata": meta}
	if p.unschedulable != nil {
		doc["spec"] = map[string]any{"unschedulable": *p.unschedulable}
	}
	return json.Marshal(doc)
}

func (e *Executor) patchNode(ctx context.Context, name string, p nodePatch) (*corev1.Node, error) {
	if p.annotations != nil && !p.leaveOwner {
		p.annotations[nodeview.AnnotationOwner] = e.opts.Owner // work taken over from an instance that is gone becomes ours
	}
	data, err := p.marshal()
	if err != nil {
		return nil, err
	}
	if err := e.checkFence(); err != nil {
		return nil, err
	}
	return e.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
}

func ptr[T any](v T) *T { return &v }
