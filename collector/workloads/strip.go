package workloads

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// defaultGracePeriodSeconds is the API server's default terminationGracePeriodSeconds.
const defaultGracePeriodSeconds = 30

// podFrom is what the collector needs of a pod. keep is false for pods whose node does not matter: not bound,
// finished, or run by a DaemonSet or the kubelet itself (static pods), which go with the node and are not
// drained.
func podFrom(p *corev1.Pod) (*podInput, bool) {
	in := &podInput{namespace: p.Namespace, name: p.Name, uid: p.UID, node: p.Spec.NodeName, labels: p.Labels,
		grace: defaultGracePeriodSeconds, tolerates: readiness.ToleratesTerminationTaint(p.Spec.Tolerations)}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		in.grace = *g
	}
	keep := p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if ref.Kind == "DaemonSet" || ref.Kind == "Node" {
			keep = false
		}
		in.owner = &ownerInput{apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name, uid: ref.UID}
	}
	return in, keep
}

// nodeFrom is what the collector keeps of a node's view.
func nodeFrom(v *nodeview.View) nodeInfo {
	info := nodeInfo{name: v.Name, inMaintenance: v.InMaintenance}
	info.Accelerated, info.Spot = v.Accelerated, v.Spot
	info.WithoutMaintenanceNotice = info.Accelerated && readiness.NodeWithoutMaintenanceNotice(v.KubeletVersion)
	if v.Maintenance.Pending() {
		info.maintenance = v.Maintenance.Start().Unix()
	}
	if !v.PlannedTermination.IsZero() {
		info.termination = v.PlannedTermination.Unix()
	}
	return info
}

// stripOwner is the owners' informer transform: name, UID and controller reference are all the lookups need.
func stripOwner(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return out, nil
}

// sameController tells whether two versions of an owner have the same controller.
func sameController(a, b *metav1.PartialObjectMetadata) bool {
	ra, rb := metav1.GetControllerOfNoCopy(a), metav1.GetControllerOfNoCopy(b)
	if ra == nil || rb == nil {
		return ra == nil && rb == nil
	}
	return ra.UID == rb.UID
}

// stripPDB is the PodDisruptionBudgets' informer transform: spec and expected pods.
func stripPDB(obj any) (any, error) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return obj, nil
	}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: pdb.Name, Namespace: pdb.Namespace, UID: pdb.UID, ResourceVersion: pdb.ResourceVersion},
		Spec:       pdb.Spec,
		Status:     policyv1.PodDisruptionBudgetStatus{ExpectedPods: pdb.Status.ExpectedPods},
	}, nil
}
