package gke

import "strings"

// Reporting a faulty host through GKE, as documented on GKE's page "Manage AI-optimized GKE clusters", section
// "Report faulty hosts through GKE" (docs.cloud.google.com/ai-hypercomputer/docs/manage/manage-gke-clusters, last
// updated 2026-04-06): the operator labels the node with the fault's behavior; GKE taints the node, evicts its pods
// (PodDisruptionBudgets and grace periods respected), asks Compute Engine to report the host and replace it, and
// shows its progress in a status label. On an API error GKE sets Error, clears its taints and removes the
// fault-behavior label (re-applying the label retries); after the repair it removes the taint and the label. While
// an operation is in progress GKE rejects further reports. It needs GKE 1.32.3-gke.1057001 or later and a
// reservation-bound VM of a supported machine type (FaultReportSupported).
const (
	// LabelFaultBehavior asks GKE to report the node's host as faulty; its value is a FaultBehavior.
	LabelFaultBehavior = "cloud.google.com/fault-behavior"
	// LabelReportAndReplaceStatus is GKE's progress on the report (ReportStatus).
	LabelReportAndReplaceStatus = "cloud.google.com/report-and-replace-status"
	// LabelReportAndReplaceOperation is the Compute Engine operation ID of the report.
	LabelReportAndReplaceOperation = "cloud.google.com/report-and-replace-operation"
	// FaultReportVersion is the first GKE version that acts on LabelFaultBehavior.
	FaultReportVersion = "1.32.3-gke.1057001"
)

// FaultBehavior is how the host misbehaves, the value of LabelFaultBehavior.
type FaultBehavior string

// The fault behaviors GKE accepts.
const (
	FaultPerformance FaultBehavior = "PERFORMANCE"
	FaultSDC         FaultBehavior = "SDC" // silent data corruption
	FaultXID         FaultBehavior = "XID"
	FaultUnspecified FaultBehavior = "unspecified"
)

// FaultBehaviors are the values GKE accepts, in its documentation's order.
var FaultBehaviors = []FaultBehavior{FaultPerformance, FaultSDC, FaultXID, FaultUnspecified}

// ParseFaultBehavior reads a fault behavior in any case, spelled as GKE wants it; empty is unspecified.
func ParseFaultBehavior(s string) (FaultBehavior, bool) {
	if s == "" {
		return FaultUnspecified, true
	}
	for _, b := range FaultBehaviors {
		if strings.EqualFold(s, string(b)) {
			return b, true
		}
	}
	return "", false
}

// ReportStatus is a value of LabelReportAndReplaceStatus.
type ReportStatus string

// The statuses GKE shows, in order.
const (
	ReportPodsEvicted      ReportStatus = "PodsEvicted"
	ReportOperationRunning ReportStatus = "OperationRUNNING"
	ReportOperationDone    ReportStatus = "OperationDone"
	ReportError            ReportStatus = "Error"
)

// ParseReportStatus reads the status label: the documented values in any case (the page writes both Error and
// ERROR) are given their documented spelling; others pass through; empty means no report.
func ParseReportStatus(s string) ReportStatus {
	for _, known := range []ReportStatus{ReportPodsEvicted, ReportOperationRunning, ReportOperationDone, ReportError} {
		if strings.EqualFold(s, string(known)) {
			return known
		}
	}
	return ReportStatus(s)
}

// Final reports a status after which GKE does nothing more for the report: done, or failed.
func (s ReportStatus) Final() bool { return s == ReportOperationDone || s == ReportError }

// FaultReportSupported reports whether GKE lets the host of a node of this machine type (label
// node.kubernetes.io/instance-type) be reported as faulty: A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3 High with 8
// GPUs.
func FaultReportSupported(machineType string) bool {
	switch machineType {
	case "a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g", "a3-megagpu-8g", "a3-highgpu-8g":
		return true
	}
	return strings.HasPrefix(machineType, "a4x-maxgpu-")
}

// MachineType is the node's machine type, from the instance-type label or its deprecated spelling.
func MachineType(labels map[string]string) string {
	if t, ok := labels[LabelInstanceType]; ok {
		return t
	}
	return labels[LabelInstanceTypeDeprecated]
}
