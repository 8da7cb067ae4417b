package executor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// watchedNode is what the node cache holds: the stripped Node, which the lifecycle and patches read, with its View,
// read once as the watch delivers the node, so a decision copies the Views of every node instead of reading every
// node again.
type watchedNode struct {
	*corev1.Node
	view *nodeview.View
}

// DeepCopyObject copies the Node and keeps its View, which is never changed.
func (w *watchedNode) DeepCopyObject() runtime.Object {
	return &watchedNode{Node: w.Node.DeepCopy(), view: w.view}
}

// watchNode is the informer transform: the stripped node and its View.
func watchNode(obj any) (any, error) {
	if w, ok := obj.(*watchedNode); ok {
		return w, nil // a transform may be handed what it made
	}
	stripped, err := stripNode(obj)
	if err != nil {
		return nil, err
	}
	node, ok := stripped.(*corev1.Node)
	if !ok {
		return stripped, nil // tombstones pass through
	}
	return &watchedNode{Node: node, view: nodeview.Of(node)}, nil
}

// stripNode keeps of a node what decisions need the labels (pool selectors can change on a policy reload),
// GKE's maintenance annotation, this service's annotations, cordon, taints, readiness and GPU faults (the
// XidCriticalError condition with the boot ID, unhealthy accelerators), so the cache leaves out everything else
// (other annotations, images, addresses, other capacity, managed fields).
func stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // tombstones pass through
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			UID:               node.UID,
			CreationTimestamp: node.CreationTimestamp, // idleness counts from it
			ResourceVersion:   node.ResourceVersion,
			DeletionTimestamp: node.DeletionTimestamp,
			Labels:            node.Labels,
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
	}
	for k, v := range node.Annotations {
		if nodeview.OwnAnnotation(k) || isGKEAnnotation(k) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status})
		case gke.ConditionXidCriticalError:
			// The GPU fault as nodeview reads it: the Xids, the boot it was set in, since when.
			out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status,
				Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		}
	}
	// The boot a GPU fault's incident is keyed on, and the version that tells a node an upgrade replaces, for
	// decisions made from the cache.
	out.Status.NodeInfo.BootID = node.Status.NodeInfo.BootID
	out.Status.NodeInfo.KubeletVersion = node.Status.NodeInfo.KubeletVersion
	// The accelerators' counts alone, for the devices marked unhealthy.
	for _, r := range []corev1.ResourceName{gke.ResourceGPU, gke.ResourceTPU} {
		c, ok := node.Status.Capacity[r]
		a, ok2 := node.Status.Allocatable[r]
		if ok && ok2 && c.Cmp(a) > 0 {
			if out.Status.Capacity == nil {
				out.Status.Capacity, out.Status.Allocatable = corev1.ResourceList{}, corev1.ResourceList{}
			}
			out.Status.Capacity[r], out.Status.Allocatable[r] = c, a
		}
	}
	return out, nil
}

func isGKEAnnotation(key string) bool {
	for _, a := range nodeview.Annotations {
		if a == key {
			return true
		}
	}
	return false
}
