package policy

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Pod annotations by which a workload defers optional work (opportunistic maintenance) on its node while it runs.
// Karpenter's is read as the same, so workloads annotated for it need nothing more. Mandatory work (a due drain)
// ignores them.
const (
	AnnotationDoNotDisrupt          = nodeview.Prefix + "do-not-disrupt"
	AnnotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
)

// WaitPodOptOut: a pod on the node asked not to be disrupted by optional work.
const WaitPodOptOut = "pod_opt_out"

// OptsOut reports a bound, unfinished pod annotated do-not-disrupt=true.
func OptsOut(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Annotations[AnnotationDoNotDisrupt] == "true" || pod.Annotations[AnnotationKarpenterDoNotDisrupt] == "true"
}
