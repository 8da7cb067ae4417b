package workloads

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// keptNode and keptPod are what the reflectors' watch-list buffer holds while the first sync streams in: only what
// the collector keeps, not whole objects (a 65,000-node sync would otherwise hold every Node, ~20 KB each, until the
// last one arrives). The reflector names them by their metadata.
type keptNode struct {
	metav1.ObjectMeta
	info nodeInfo
}

type keptPod struct {
	metav1.ObjectMeta
	in   *podInput
	keep bool
}

func (k *keptNode) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (k *keptNode) DeepCopyObject() runtime.Object   { return k } // never changed once made
func (k *keptPod) GetObjectKind() schema.ObjectKind  { return schema.EmptyObjectKind }
func (k *keptPod) DeepCopyObject() runtime.Object    { return k } // never changed once made

func keepNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return &keptNode{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion},
			info: nodeFrom(nodeview.Of(n))}, nil
	}
	return obj, nil
}

func keepPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		in, keep := podFrom(p)
		return &keptPod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion},
			in: in, keep: keep}, nil
	}
	return obj, nil
}

// keptNodeOf is what the collector keeps of a node, whether the reflector hands over the Node (watch events) or
// what its buffer kept of it (the first sync).
func keptNodeOf(obj any) (*keptNode, bool) {
	kept, _ := keepNode(obj)
	k, ok := kept.(*keptNode)
	return k, ok
}

func keptPodOf(obj any) (*keptPod, bool) {
	kept, _ := keepPod(obj)
	k, ok := kept.(*keptPod)
	return k, ok
}
