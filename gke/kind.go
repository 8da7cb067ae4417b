package gke

// Accelerated tells a GPU or TPU node: its VM cannot live-migrate, so host maintenance stops it.
func Accelerated(labels map[string]string) bool {
	return labels[LabelAccelerator] != "" || labels[LabelTPUAccelerator] != ""
}

// Spot tells a Spot (or preemptible-provisioned) node, which Compute Engine may reclaim with 30 s notice.
func Spot(labels map[string]string) bool {
	return labels[LabelSpot] == "true" || labels[LabelProvisioning] == "spot"
}

// Workload disruption handling GKE reads from the cluster.
const (
	// ConfigMapDisruptionHandling in NamespaceDisruptionHandling turns on graceful termination of workloads on
	// GPU/TPU nodes (its gracefulTermination setting).
	ConfigMapDisruptionHandling = "gke-disruption-handling"
	NamespaceDisruptionHandling = "kube-system"
	// MaintenanceNoticeVersion is the first GKE node version that labels GPU/TPU nodes with
	// scheduled-maintenance-time.
	MaintenanceNoticeVersion = "1.31.1-gke.2008000"
)
