package executor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
)

// nodeStripper is the informer transform: decisions need the labels the pools select on, GKE's maintenance labels,
// this service's annotations, cordon, taints and readiness, so the cache leaves out everything else (other labels
// and annotations, images, addresses, capacity, managed fields) to stay small in clusters of tens of thousands of
// nodes.
func nodeStripper(cfg *config.Config) func(any) (any, error) {
	keep := map[string]bool{}
	for _, l := range nodestate.Labels {
		keep[l] = true
	}
	for _, p := range cfg.Pools {
		for k := range p.NodeSelector {
			keep[k] = true
		}
	}
	return func(obj any) (any, error) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil // tombstones pass through
		}
		out := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:              node.Name,
				UID:               node.UID,
				ResourceVersion:   node.ResourceVersion,
				DeletionTimestamp: node.DeletionTimestamp,
			},
			Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
		}
		for k, v := range node.Labels {
			if keep[k] {
				if out.Labels == nil {
					out.Labels = map[string]string{}
				}
				out.Labels[k] = v
			}
		}
		for k, v := range node.Annotations {
			if nodestate.OwnAnnotation(k) {
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
}
