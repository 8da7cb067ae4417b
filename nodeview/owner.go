package nodeview

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// The other hands that cordon, taint or drain nodes, as they mark the Node.
const (
	// TaintClusterAutoscalerToBeDeleted is Cluster Autoscaler's taint on a node it is draining to remove.
	TaintClusterAutoscalerToBeDeleted = "ToBeDeletedByClusterAutoscaler"
	// AnnotationNVSentinelQuarantine is the annotation NVSentinel's fault-quarantine module sets on a node it
	// cordoned for a GPU health event.
	AnnotationNVSentinelQuarantine = "quarantineHealthEvent"
)

// GKE's maintenance handler as it runs in a cluster: the add-on DaemonSet kube-system/maintenance-handler GKE runs on
// GPU node pools, its pods labelled k8s-app=maintenance-handler (its manifest is quoted in
// https://github.com/NVIDIA/NVSentinel/issues/754). It is built from
// https://github.com/GoogleCloudPlatform/k8s-node-termination-handler: before the host event it taints the node
// cloud.google.com/impending-node-termination and evicts the node's pods.
const (
	MaintenanceHandlerNamespace   = "kube-system"
	MaintenanceHandlerPodSelector = "k8s-app=maintenance-handler"
)

// Holders of a node other than this service (OtherOwner).
const (
	// OwnerGKEMaintenanceHandler: GKE's maintenance-handler DaemonSet (from k8s-node-termination-handler) tainted
	// the node with cloud.google.com/impending-node-termination and drains it.
	OwnerGKEMaintenanceHandler = "gke-maintenance-handler"
	// OwnerGKEOperation: GKE's own work on the node (gke.Operations: an upgrade's or resize's drain, an auto-repair),
	// which drains the node and deletes or re-creates it.
	OwnerGKEOperation      = "gke-operation"
	OwnerClusterAutoscaler = "cluster-autoscaler"
	OwnerNVSentinel        = "nvsentinel"
	// OwnerCordon: cordoned by someone else (kubectl, GKE auto-repair, another controller) without a known mark.
	OwnerCordon = "cordon"
)

// OtherOwner names who other than this service holds the node (cordoned it, or is draining it), or "", given GKE's
// own operations on it (gke.Operations). A cordon is ours only when AnnotationCordonedBy says so.
func OtherOwner(node *corev1.Node, gkeOperations []string) string {
	for _, t := range node.Spec.Taints {
		if t.Key == gke.TaintImpendingTermination {
			return OwnerGKEMaintenanceHandler
		}
	}
	if len(gkeOperations) > 0 {
		return OwnerGKEOperation
	}
	for _, t := range node.Spec.Taints {
		if t.Key == TaintClusterAutoscalerToBeDeleted {
			return OwnerClusterAutoscaler
		}
	}
	if _, ok := node.Annotations[AnnotationNVSentinelQuarantine]; ok {
		return OwnerNVSentinel
	}
	if node.Spec.Unschedulable && node.Annotations[AnnotationCordonedBy] == "" {
		return OwnerCordon
	}
	return ""
}
