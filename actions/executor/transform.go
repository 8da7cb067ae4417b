package executor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// stripNode is the informer transform: decisions need the labels (pool selectors can change on a policy reload),
// GKE's maintenance annotation, this service's annotations, cordon, taints and readiness, so the cache leaves out
// everything else (other annotations, images, addresses, capacity, managed fields).
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
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
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
