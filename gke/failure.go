package gke

import "strings"

// FailureReasonPrefix starts every maintenance reason that says the hardware failed. Compute Engine's
// UpcomingMaintenance.MaintenanceReasons enum names them FAILURE_DISK, FAILURE_GPU, FAILURE_GPU_TEMPERATURE,
// FAILURE_GPU_XID, FAILURE_INFRA, FAILURE_INTERFACE, FAILURE_MEMORY, FAILURE_NETWORK, FAILURE_NVLINK,
// FAILURE_REDUNDANT_HARDWARE_FAULT, FAILURE_TPU and the customer-reported FAILURE_GPU_*_CUSTOMER_REPORTED; the
// others (PLANNED_UPDATE, PLANNED_NETWORK_UPDATE, INFRASTRUCTURE_RELOCATION) are planned. Matching the prefix
// keeps reasons Google adds later on the failure side.
const FailureReasonPrefix = "FAILURE_"

// FailureReasonsRegexp matches a comma-joined reasons label (JoinedReasons) that names a hardware failure; the
// mixin's rules use the same expression.
const FailureReasonsRegexp = `(.*,)?` + FailureReasonPrefix + `.*`

// HardwareFailure reports whether any of a maintenance's reasons says the hardware failed: GKE then repairs the
// host, which takes hours, and the node is of no use until it has.
func HardwareFailure(reasons []string) bool {
	for _, r := range reasons {
		if strings.HasPrefix(strings.ToUpper(r), FailureReasonPrefix) {
			return true
		}
	}
	return false
}

// GPUFailure reports whether a maintenance's reasons say a GPU failed (FAILURE_GPU, FAILURE_GPU_XID, …): GKE's own
// notice of a GPU fault, which may come hours after the fault itself.
func GPUFailure(reasons []string) bool {
	for _, r := range reasons {
		if strings.HasPrefix(strings.ToUpper(r), FailureReasonPrefix+"GPU") {
			return true
		}
	}
	return false
}
