// Package gke is GKE's and GCE's vocabulary as this project reads it: the node labels, taints and annotations GKE
// writes, and how their values are parsed. The collectors, the actions service and the CLI all read nodes through
// it, so one spelling and one parser serve everywhere.
package gke

import (
	"strconv"
	"strings"
)

// Node labels GKE (or Kubernetes) sets.
const (
	LabelNodePool               = "cloud.google.com/gke-nodepool"
	LabelZone                   = "topology.kubernetes.io/zone"
	LabelZoneDeprecated         = "failure-domain.beta.kubernetes.io/zone"
	LabelInstanceType           = "node.kubernetes.io/instance-type"
	LabelInstanceTypeDeprecated = "beta.kubernetes.io/instance-type"
	LabelAccelerator            = "cloud.google.com/gke-accelerator"
	LabelTPUAccelerator         = "cloud.google.com/gke-tpu-accelerator"
	LabelTPUTopology            = "cloud.google.com/gke-tpu-topology"
	LabelProvisioning           = "cloud.google.com/gke-provisioning"
	LabelSpot                   = "cloud.google.com/gke-spot"
	// LabelScheduledMaintenanceTime is the maintenance's start, whole epoch seconds as a string.
	LabelScheduledMaintenanceTime = "cloud.google.com/scheduled-maintenance-time"
	// LabelActiveNodeMaintenance is ONGOING, then terminating, while GKE maintains the node (passthrough after
	// perform-maintenance has been seen in the field).
	LabelActiveNodeMaintenance = "cloud.google.com/active-node-maintenance"
	// LabelPerformMaintenance=true asks GKE to start reschedulable maintenance now.
	LabelPerformMaintenance   = "cloud.google.com/perform-maintenance"
	LabelOpportunisticDisable = "cloud.google.com/opportunistic-disable"
	// The node's place in the physical topology (A3, A4 and other reservation-bound VMs): the host it runs on,
	// the sub-block and the block of the cluster that host sits in.
	LabelTopologyHost     = "cloud.google.com/gce-topology-host"
	LabelTopologySubblock = "cloud.google.com/gce-topology-subblock"
	LabelTopologyBlock    = "cloud.google.com/gce-topology-block"
)

// Taints GKE sets.
const (
	// TaintImpendingTermination is set (NoSchedule) while GKE terminates the node for maintenance.
	TaintImpendingTermination = "cloud.google.com/impending-node-termination"
	// TaintMaintenanceWindowStarted is set (PreferNoSchedule, seen in the field) once GKE starts a maintenance
	// window, for example after perform-maintenance.
	TaintMaintenanceWindowStarted = "cloud.google.com/maintenance-window-started"
)

// Annotations GKE sets.
const (
	// AnnotationMaintenanceState says whether GKE's opportunistic maintenance was triggered.
	AnnotationMaintenanceState = "node.gke.io/maintenance-state"
	// AnnotationUpcomingMaintenance is the upcoming-maintenance JSON (as the metadata server's) that GKE's
	// maintenance handler writes on the node, before the metadata server shows it. Read it with
	// ParseUpcomingMaintenance.
	AnnotationUpcomingMaintenance = "node.gke.io/upcoming-maintenance"
	// AnnotationOpportunisticConfig marks a node pool configured for GKE's own opportunistic maintenance.
	AnnotationOpportunisticConfig = "node.gke.io/opportunistic-config"
)

// latestMaintenanceTime is 9999-12-31T23:59:59Z: later values are garbage, and no time format can show them.
const latestMaintenanceTime = 253402300799

// ParseMaintenanceTime reads scheduled-maintenance-time: whole epoch seconds, not negative, before the year 10000.
func ParseMaintenanceTime(v string) (int64, bool) {
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 || secs > latestMaintenanceTime {
		return 0, false
	}
	return secs, true
}

// MaintenanceState is active-node-maintenance lower-cased; unknown values pass through, empty means none.
func MaintenanceState(labels map[string]string) string {
	return strings.ToLower(labels[LabelActiveNodeMaintenance])
}

// OpportunisticTriggered reads node.gke.io/maintenance-state, which says "opportunistic-triggered" is true. The
// value is matched loosely (JSON, YAML or key=value spellings, any case) since GKE documents only its meaning.
func OpportunisticTriggered(annotations map[string]string) bool {
	v, ok := annotations[AnnotationMaintenanceState]
	if !ok {
		return false
	}
	v = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '"', '\'', '{', '}':
			return -1
		}
		return r
	}, strings.ToLower(v))
	for _, field := range strings.Split(v, ",") {
		switch field {
		case "opportunistic-triggered", "opportunistic-triggered:true", "opportunistic-triggered=true":
			return true
		}
	}
	return false
}
