// Package readiness holds the checks that tell whether a workload on GPU, TPU or Spot nodes will lose work when
// GKE maintains or reclaims its nodes. The checks are pure: the workloads collector and the audit command feed
// them what they read from the API.
package readiness

import (
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Severity says how much work a finding puts at risk.
type Severity string

const (
	// Warning: work may be lost at a disruption.
	Warning Severity = "warning"
	// Error: work will be lost at every disruption, or maintenance cannot proceed safely.
	Error Severity = "error"
)

// ID names a check; it is the check label of gke_readiness_findings.
type ID int

const (
	CheckGracefulTerminationDisabled ID = iota
	CheckGracePeriodShort
	CheckSpotGraceExceedsNotice
	CheckToleratesTerminationTaint
	CheckPDBBlocksDrain
	CheckNodeWithoutMaintenanceNotice
	NumChecks
)

// Check describes one readiness check.
type Check struct {
	Name     string
	Severity Severity
	// Cluster is true for checks of the cluster's configuration rather than of a workload's pods.
	Cluster bool
	Summary string
	Fix     string
}

// Checks are every check, indexed by ID.
var Checks = [NumChecks]Check{
	CheckGracefulTerminationDisabled: {Name: "graceful_termination_disabled", Severity: Error, Cluster: true,
		Summary: "GKE's graceful termination of GPU/TPU nodes is off: ConfigMap kube-system/gke-disruption-handling is missing or lacks gracefulTermination: true.",
		Fix:     "Create ConfigMap kube-system/gke-disruption-handling with data gracefulTermination: \"true\"."},
	CheckGracePeriodShort: {Name: "grace_period_short", Severity: Warning,
		Summary: "Pods on GPU/TPU nodes have a terminationGracePeriodSeconds below --readiness.min-grace-period.",
		Fix:     "Raise the pod template's terminationGracePeriodSeconds to the time a checkpoint takes."},
	CheckSpotGraceExceedsNotice: {Name: "spot_grace_exceeds_notice", Severity: Warning,
		Summary: "Pods on Spot nodes ask for more grace than the node's shutdown window (--readiness.spot-notice) gives: they are killed mid-shutdown.",
		Fix:     "Lower terminationGracePeriodSeconds to the Spot notice (15 s), or raise the node pool's shutdownGracePeriodSeconds."},
	CheckToleratesTerminationTaint: {Name: "tolerates_termination_taint", Severity: Warning,
		Summary: "Pods on GPU/TPU nodes tolerate cloud.google.com/impending-node-termination (explicitly or by a keyless Exists), so they land on nodes about to stop.",
		Fix:     "Replace a keyless operator: Exists toleration with the keys the pod needs, and drop any toleration of cloud.google.com/impending-node-termination."},
	CheckPDBBlocksDrain: {Name: "pdb_blocks_drain", Severity: Error,
		Summary: "A PodDisruptionBudget over pods on GPU/TPU/Spot nodes allows no disruption: no drain ahead of maintenance can finish, so the pods stop without notice at the window.",
		Fix:     "Allow at least one disruption: maxUnavailable of 1 or more, or minAvailable below the number of pods."},
	CheckNodeWithoutMaintenanceNotice: {Name: "node_without_maintenance_notice", Severity: Warning,
		Summary: "Pods run on GPU/TPU nodes whose GKE version predates the cloud.google.com/scheduled-maintenance-time label (" + gke.MaintenanceNoticeVersion + "): no advance notice of maintenance.",
		Fix:     "Upgrade the node pool to GKE " + gke.MaintenanceNoticeVersion + " or later."},
}

// Config holds the thresholds of the checks.
type Config struct {
	// MinGracePeriod is the least grace a pod on a GPU/TPU node should have (--readiness.min-grace-period).
	MinGracePeriod time.Duration
	// SpotNotice is the shutdown window a Spot node gives ordinary pods (--readiness.spot-notice).
	SpotNotice time.Duration
}

// Node is what the checks need to know of a node.
type Node struct {
	Accelerated bool // GPU or TPU
	Spot        bool
	// WithoutMaintenanceNotice is NodeWithoutMaintenanceNotice of its kubelet version.
	WithoutMaintenanceNotice bool
}

// Pod is what the checks need to know of a pod.
type Pod struct {
	GracePeriodSeconds        int64
	ToleratesTerminationTaint bool
	// BlockedByPDB: a PodDisruptionBudget for which PDBBlocksDrain holds selects the pod.
	BlockedByPDB bool
}

// Findings is a set of checks, one bit per ID.
type Findings uint8

// Has tells whether id is in the set.
func (f Findings) Has(id ID) bool { return f&(1<<id) != 0 }

// PodFindings are the checks a pod on node fails.
func PodFindings(cfg Config, pod Pod, node Node) Findings {
	var f Findings
	set := func(id ID, fails bool) {
		if fails {
			f |= 1 << id
		}
	}
	grace := time.Duration(pod.GracePeriodSeconds) * time.Second
	if node.Accelerated {
		set(CheckGracePeriodShort, grace < cfg.MinGracePeriod)
		set(CheckToleratesTerminationTaint, pod.ToleratesTerminationTaint)
		set(CheckNodeWithoutMaintenanceNotice, node.WithoutMaintenanceNotice)
	}
	if node.Spot {
		set(CheckSpotGraceExceedsNotice, grace > cfg.SpotNotice)
	}
	if node.Accelerated || node.Spot {
		set(CheckPDBBlocksDrain, pod.BlockedByPDB)
	}
	return f
}

// ToleratesTerminationTaint tells whether tolerations let a pod stay on, or be scheduled to, a node with the
// impending-node-termination taint: a toleration of its key, or a keyless Exists (which tolerates every taint),
// with a matching or empty effect.
func ToleratesTerminationTaint(tolerations []corev1.Toleration) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule {
			continue
		}
		// Any value of the key counts: GKE does not document the taint's value.
		if t.Key == gke.TaintImpendingTermination || (t.Key == "" && t.Operator == corev1.TolerationOpExists) {
			return true
		}
	}
	return false
}

// GracefulTerminationEnabled reads the gke-disruption-handling ConfigMap's data: gracefulTermination set to true,
// either as its own key or inside a YAML document held under any key. A missing ConfigMap is nil data.
func GracefulTerminationEnabled(data map[string]string) bool {
	if v, ok := data["gracefulTermination"]; ok {
		return isTrue(v)
	}
	for _, v := range data {
		var doc struct {
			GracefulTermination any `yaml:"gracefulTermination"`
		}
		if yaml.Unmarshal([]byte(v), &doc) != nil {
			continue
		}
		switch g := doc.GracefulTermination.(type) {
		case bool:
			if g {
				return true
			}
		case string:
			if isTrue(g) {
				return true
			}
		}
	}
	return false
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// PDBBlocksDrain tells whether a PodDisruptionBudget's spec allows no eviction at all: maxUnavailable 0 (or 0%),
// minAvailable 100%, or minAvailable at least the pods it expects. Transient zeros of disruptionsAllowed (a pod
// restarting) are not findings.
func PDBBlocksDrain(pdb *policyv1.PodDisruptionBudget) bool {
	if pdb.Spec.Selector == nil {
		return false // selects no pods
	}
	if mu := pdb.Spec.MaxUnavailable; mu != nil {
		return isZero(*mu)
	}
	ma := pdb.Spec.MinAvailable
	if ma == nil {
		return false
	}
	if ma.Type == intstr.String {
		return strings.TrimSpace(ma.StrVal) == "100%"
	}
	expected := pdb.Status.ExpectedPods
	return expected > 0 && ma.IntVal >= expected
}

func isZero(v intstr.IntOrString) bool {
	if v.Type == intstr.String {
		s := strings.TrimSuffix(strings.TrimSpace(v.StrVal), "%")
		return strings.TrimLeft(s, "0") == "" && s != ""
	}
	return v.IntVal == 0
}

var maintenanceNoticeVersion = version.MustParseSemantic(gke.MaintenanceNoticeVersion)

// NodeWithoutMaintenanceNotice tells whether a kubelet version (v1.30.5-gke.1014001) predates
// gke.MaintenanceNoticeVersion. Versions that cannot be read are given the benefit of the doubt.
func NodeWithoutMaintenanceNotice(kubeletVersion string) bool {
	v, err := version.ParseSemantic(strings.TrimPrefix(kubeletVersion, "v"))
	if err != nil {
		return false
	}
	return v.LessThan(maintenanceNoticeVersion)
}
