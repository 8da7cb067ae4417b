package executor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripNode is the informer transform: the policy needs labels, annotations, cordon, taints and readiness only, so
// the cache leaves out images, addresses, capacity and managed fields.
func stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // tombstones pass through
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			UID:               node.UID,
			ResourceVersion:   node.ResourceVersion,
			Labels:            node.Labels,
			Annotations:       node.Annotations,
			DeletionTimestamp: node.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}
