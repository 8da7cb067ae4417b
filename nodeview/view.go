// Package nodeview is the Node as this project reads it: GKE's labels, taints and annotations (spelled and parsed
// by package gke) and this service's own annotations, read once per informer event into a View. The collectors,
// the actions service and the CLI all read Views, so "in maintenance", "pending maintenance" and "reschedulable"
// have one definition each and every series, decision and status line agrees on a node.
package nodeview

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Namespace prefixes the project's own series (self-monitoring and the actions service's).
const Namespace = "gke_disruption"

// View is one Node as read. It shares the node's label map and strings, and keeps nothing else of it.
type View struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	// Created is the node's creation time.
	Created time.Time
	// Deleting: the node has a deletion timestamp.
	Deleting bool
	// Labels are the node's labels, for what matches on them (policy pool selectors, info series).
	Labels map[string]string
	Pool   string
	// Accelerated: a GPU or TPU node. Spot: a Spot or preemptible node.
	Accelerated, Spot bool
	// KubeletVersion tells whether GKE labels the node with its maintenance (gke.MaintenanceNoticeVersion).
	KubeletVersion string
	// Host, Block and Subblock are where the node's VM runs (gce-topology labels; "" when GKE does not say).
	Host, Block, Subblock string
	// TPUSliceHosts is the VM count of the node's TPU slice (0 when not known); above 1 a multi-host slice.
	TPUSliceHosts int

	// Scheduled is the scheduled-maintenance-time label in epoch seconds, when it reads.
	Scheduled    int64
	HasScheduled bool
	// Upcoming is GKE's upcoming-maintenance annotation as read (zero when nothing is announced).
	Upcoming gke.UpcomingMaintenance
	// MaintenanceState is the active-node-maintenance label lower-cased ("" when absent).
	MaintenanceState string
	// Maintenance is the maintenance announced and not yet started.
	Maintenance Maintenance
	// InMaintenance: GKE maintenance is under way. The label active-node-maintenance (any value: ONGOING,
	// terminating, passthrough, …), the impending-termination taint, or GKE's upcoming-maintenance annotation
	// saying ONGOING.
	InMaintenance bool
	// PerformMaintenanceRequested: label perform-maintenance=true.
	PerformMaintenanceRequested bool
	// MachineType is the node's machine type (instance-type label).
	MachineType string
	// FaultBehavior is the fault-behavior label: the node's host is reported as faulty ("" when not).
	FaultBehavior string
	// ReportStatus is GKE's report-and-replace-status label ("" when none); ReportOperation the Compute Engine
	// operation ID.
	ReportStatus    gke.ReportStatus
	ReportOperation string
	// MaintenanceWindowStarted and ImpendingTermination are the effects of GKE's taints of those names.
	MaintenanceWindowStarted []corev1.TaintEffect
	ImpendingTermination     []corev1.TaintEffect
	Unschedulable            bool
	// Ready: the Ready condition is True.
	Ready bool
	// BootID is the kubelet's boot ID of the node's VM: it changes with every boot, a host repair's included.
	BootID string
	// XidCritical is GKE's GPU device plugin's XidCriticalError condition set in the node's current boot; nil when
	// there is none, or it was left from another boot (before a repair: stale, it says nothing).
	XidCritical *XidCritical
	// UnhealthyGPUs and UnhealthyTPUs count the devices their device plugin marked unhealthy: capacity minus
	// allocatable of gke.ResourceGPU and gke.ResourceTPU, when both are reported and it is above 0.
	UnhealthyGPUs, UnhealthyTPUs int64
	// GKEOperations are GKE's own work on the node now (gke.Operations: "drain", "upgrade_nodes", …), none when
	// GKE shows none.
	GKEOperations []string
	// PlannedTermination is when the VM ends by its maximum run duration (flex-start, queued provisioning); zero
	// when it has none.
	PlannedTermination time.Time
	// OpportunisticTriggered: GKE's annotation says its opportunistic maintenance was triggered.
	OpportunisticTriggered bool
	// OpportunisticConfigured: the pool is configured for GKE's own opportunistic maintenance.
	OpportunisticConfigured bool
	// OpportunisticDisabled: label opportunistic-disable=true.
	OpportunisticDisabled bool
	// HeldBy names who other than this service holds the node (OtherOwner), or "".
	HeldBy string
	// Record is this service's annotations.
	Record Record
	// Unreadable are the GKE values that did not read (a label or annotation key and its value).
	Unreadable []Unreadable
}

// Unreadable is a GKE label or annotation whose value could not be read.
type Unreadable struct{ Key, Value string }

// UnreadableXidCondition is the Unreadable key of an XidCriticalError condition whose reason could not be read.
const UnreadableXidCondition = "condition/" + gke.ConditionXidCriticalError

// XidCritical is a critical GPU fault GKE's GPU device plugin reported.
type XidCritical struct {
	// Xids are the critical Xids seen since boot, sorted (none when the reason could not be read).
	Xids []uint32
	// Since is when the condition became True (its lastTransitionTime).
	Since time.Time
}

// Of reads a node.
func Of(node *corev1.Node) *View {
	labels := node.Labels
	v := &View{
		Name:                        node.Name,
		UID:                         node.UID,
		ResourceVersion:             node.ResourceVersion,
		Created:                     node.CreationTimestamp.Time,
		Deleting:                    node.DeletionTimestamp != nil,
		Labels:                      labels,
		Pool:                        labels[gke.LabelNodePool],
		Host:                        labels[gke.LabelTopologyHost],
		Block:                       labels[gke.LabelTopologyBlock],
		Subblock:                    labels[gke.LabelTopologySubblock],
		KubeletVersion:              node.Status.NodeInfo.KubeletVersion,
		BootID:                      node.Status.NodeInfo.BootID,
		Accelerated:                 gke.Accelerated(labels),
		Spot:                        gke.Spot(labels),
		MaintenanceState:            gke.MaintenanceState(labels),
		PerformMaintenanceRequested: labels[gke.LabelPerformMaintenance] == "true",
		MachineType:                 gke.MachineType(labels),
		FaultBehavior:               labels[gke.LabelFaultBehavior],
		ReportStatus:                gke.ParseReportStatus(labels[gke.LabelReportAndReplaceStatus]),
		ReportOperation:             labels[gke.LabelReportAndReplaceOperation],
		Unschedulable:               node.Spec.Unschedulable,
		OpportunisticTriggered:      gke.OpportunisticTriggered(node.Annotations),
		OpportunisticConfigured:     node.Annotations[gke.AnnotationOpportunisticConfig] != "",
		OpportunisticDisabled:       labels[gke.LabelOpportunisticDisable] == "true",
		Record:                      ReadRecord(node.Annotations),
	}
	if hosts, ok := gke.TPUSliceHosts(labels); ok {
		v.TPUSliceHosts = hosts
	}
	scheduled := ""
	if raw, ok := labels[gke.LabelScheduledMaintenanceTime]; ok {
		if v.Scheduled, v.HasScheduled = gke.ParseMaintenanceTime(raw); v.HasScheduled {
			scheduled = raw
		} else {
			v.Unreadable = append(v.Unreadable, Unreadable{gke.LabelScheduledMaintenanceTime, raw})
		}
	}
	if raw, ok := node.Annotations[gke.AnnotationUpcomingMaintenance]; ok {
		var err error
		if v.Upcoming, err = gke.ParseUpcomingMaintenance(raw); err != nil {
			v.Unreadable = append(v.Unreadable, Unreadable{gke.AnnotationUpcomingMaintenance, raw})
		}
	}
	v.Maintenance = pendingMaintenance(scheduled, v.Upcoming)
	var err error
	if v.GKEOperations, err = gke.Operations(labels, node.Annotations); err != nil {
		v.Unreadable = append(v.Unreadable, Unreadable{gke.AnnotationCurrentOperation, node.Annotations[gke.AnnotationCurrentOperation]})
	}
	v.HeldBy = OtherOwner(node, v.GKEOperations)
	if raw, ok := node.Annotations[gke.AnnotationMachineTerminationDatetime]; ok {
		if v.PlannedTermination, err = gke.ParseTerminationTime(raw); err != nil {
			v.Unreadable = append(v.Unreadable, Unreadable{gke.AnnotationMachineTerminationDatetime, raw})
		}
	}
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case gke.TaintMaintenanceWindowStarted:
			v.MaintenanceWindowStarted = append(v.MaintenanceWindowStarted, t.Effect)
		case gke.TaintImpendingTermination:
			v.ImpendingTermination = append(v.ImpendingTermination, t.Effect)
		}
	}
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			v.Ready = c.Status == corev1.ConditionTrue
		case gke.ConditionXidCriticalError:
			if v.XidCritical == nil {
				v.readXidCondition(c, node.Status.NodeInfo.BootID)
			}
		}
	}
	v.UnhealthyGPUs = unhealthy(node.Status, gke.ResourceGPU)
	v.UnhealthyTPUs = unhealthy(node.Status, gke.ResourceTPU)
	v.InMaintenance = v.MaintenanceState != "" || len(v.ImpendingTermination) > 0 ||
		v.Upcoming.Announced && strings.EqualFold(v.Upcoming.Status, "ONGOING")
	return v
}

// readXidCondition reads the device plugin's condition, when True and set in the node's current boot: the plugin
// writes the boot ID into the message and removes the condition only once it runs again, so a condition of
// another boot is left from before a repair. An unreadable reason keeps the fault and its time, without Xids.
func (v *View) readXidCondition(c corev1.NodeCondition, bootID string) {
	if c.Status != corev1.ConditionTrue || c.Message != bootID {
		return
	}
	xids, err := gke.ParseXids(c.Reason)
	if err != nil {
		v.Unreadable = append(v.Unreadable, Unreadable{UnreadableXidCondition, c.Reason})
	}
	v.XidCritical = &XidCritical{Xids: xids, Since: c.LastTransitionTime.Time}
}

// ShowsXid reports whether the node itself shows Xid as a critical GPU fault of its current boot: the device
// plugin's condition names it, or names nothing readable (a fault of this boot all the same).
func (v *View) ShowsXid(xid string) bool {
	if v.XidCritical == nil {
		return false
	}
	if len(v.XidCritical.Xids) == 0 {
		return true
	}
	for _, x := range v.XidCritical.Xids {
		if strconv.FormatUint(uint64(x), 10) == xid {
			return true
		}
	}
	return false
}

// unhealthy is how many devices of resource the node has and cannot allocate: those its device plugin marked
// unhealthy. Without both counts it is 0, never a guess.
func unhealthy(status corev1.NodeStatus, resource corev1.ResourceName) int64 {
	capacity, ok := status.Capacity[resource]
	allocatable, ok2 := status.Allocatable[resource]
	if !ok || !ok2 {
		return 0
	}
	return max(0, capacity.Value()-allocatable.Value())
}

// Disrupted reports a node that counts against disruption budgets: cordoned, in GKE maintenance, perform-maintenance
// requested, its host reported as faulty, not Ready, or being acted on by this service.
func (v *View) Disrupted() bool {
	return v.Unschedulable || v.InMaintenance || v.PerformMaintenanceRequested || v.HostReported() || !v.Ready ||
		v.Record.Active()
}

// MaintenanceRequested reports maintenance asked for early and not yet under way: the perform-maintenance label, or
// this service's request on record. GKE consumes the label seconds before it shows passthrough (measured in the
// field: consumed within ~4 s, passthrough at +11 s to +38 s), so the label alone would leave a node neither
// requested nor in maintenance in between.
func (v *View) MaintenanceRequested() bool {
	return v.PerformMaintenanceRequested ||
		(v.Record.Phase == MaintenanceRequested && !v.Record.MaintenanceSeen && !v.InMaintenance)
}

// HostReported reports a faulty-host report under way on the node: the fault-behavior label is set (by anyone), or
// GKE shows a status that is not final. GKE evicts the node's pods and replaces its host, and rejects another
// report meanwhile.
func (v *View) HostReported() bool {
	return v.FaultBehavior != "" || (v.ReportStatus != "" && !v.ReportStatus.Final())
}

// UnderRepair reports a node whose host is (to be) repaired: a maintenance announced for failed hardware, a
// faulty-host report under way (GKE's or this service's), or a GPU fault's drain holding the node. Repair budgets count these.
func (v *View) UnderRepair() bool {
	r := v.Record
	return v.HardwareFailureAnnounced() || v.HostReported() || (r.Active() && r.Action == ReportFaultyHost) ||
		(r.FaultDrain() && (r.Active() || r.HoldsCordon()))
}

// Reserved reports the members of groups claimed half-way, not claimed yet: the room their group reserved counts
// against budgets until the group is complete.
func Reserved(all []*View) func(*View) bool {
	reserved := map[string]bool{}
	for _, v := range all {
		if v.Record.Phase == Accepted {
			for _, member := range v.Record.Group {
				reserved[member] = true
			}
		}
	}
	return func(v *View) bool { return reserved[v.Name] }
}

// Labels are the GKE node labels the actions service reads.
var Labels = []string{gke.LabelActiveNodeMaintenance, gke.LabelPerformMaintenance, gke.LabelScheduledMaintenanceTime,
	gke.LabelNodePool, gke.LabelInstanceType, gke.LabelTPUTopology, gke.LabelOpportunisticDisable,
	gke.LabelFaultBehavior, gke.LabelReportAndReplaceStatus, gke.LabelReportAndReplaceOperation}

// Annotations are the node annotations of GKE and of the other hands (OtherOwner) the actions service reads.
var Annotations = []string{gke.AnnotationUpcomingMaintenance, gke.AnnotationOpportunisticConfig, AnnotationNVSentinelQuarantine}
