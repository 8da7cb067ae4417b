// Package nodestate is the lifecycle of this service's work on one node: the steps the work recorded on the node
// (nodeview.Record) takes as the node changes. Next is its whole logic, a pure function; package executor does the
// I/O.
package nodestate

import (
	"fmt"
	"strings"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// The lifecycle of this service's work on one node. The annotations (Record) persist it; Next is its whole logic.
//
// States (Record.Phase, plus whether a cordon of ours is held):
//
//	none ──claim──► accepted ──► draining ──► done (+cordon) ──GKE finished / maintenance moved or vanished──► done
//	                   │            │  └──drain failed──► failed (+cordon while unmovable maintenance is pending) ─┐
//	                   │            └──(perform-maintenance)──► maintenance-requested ──GKE finished──► done        │
//	                   └──(perform-maintenance, no drain first)──┘                                                 ▼
//	                                                          GKE finished / maintenance moved or vanished: failed
//
// GKE's own operation on the node (an upgrade's or resize's drain, an auto-repair) ends any of it but a report at
// once: done, reason "replaced", our drain stopped, the cordon left in place and no longer ours.
//
// Events that move it: the claim (an alert decided by the policy); drain done or failed; GKE maintenance started
// (active-node-maintenance label or impending-termination taint: noted once); GKE finished (quiet and Ready after
// maintenance was noted, or the maintenance no longer announced); the maintenance moved (a different one is
// announced before GKE started: the work no longer serves anything and ends, lifting our cordon and our
// perform-maintenance label); the node deleted (its work is forgotten with it); leadership lost or a restart (the
// next leader reads the same Record and carries on). Alerts — repeats, resolves, later startsAt — never move work:
// an alert for a maintenance that work already serves is a repeat.
//
// Every state has an end: accepted and draining end in done or failed; maintenance-requested and a held cordon end
// when GKE finishes or the maintenance moves or vanishes; done and failed without a cordon are final for their
// maintenance (a new maintenance is new work).

// Observation is what the node shows now, as far as the lifecycle cares.
type Observation struct {
	Maintenance      nodeview.Maintenance
	InMaintenance    bool
	PerformRequested bool
	Ready            bool
	// FaultBehavior and ReportStatus are the fault-behavior label and GKE's report-and-replace-status.
	FaultBehavior string
	ReportStatus  gke.ReportStatus
	// BootID is the node's boot: a GPU fault's drain ends when it changes.
	BootID string
	// GKEOperations are GKE's own work on the node (an upgrade's or resize's drain, an auto-repair), which deletes
	// or re-creates it.
	GKEOperations []string
}

// Observe takes the observation from a node's view.
func Observe(v *nodeview.View) Observation {
	return Observation{
		Maintenance:      v.Maintenance,
		InMaintenance:    v.InMaintenance,
		PerformRequested: v.PerformMaintenanceRequested,
		Ready:            v.Ready,
		FaultBehavior:    v.FaultBehavior,
		ReportStatus:     v.ReportStatus,
		BootID:           v.BootID,
		GKEOperations:    v.GKEOperations,
	}
}

// Step is what the executor does next for a node's work.
type Step string

const (
	// StepNone: nothing to do until the node changes.
	StepNone Step = "none"
	// StepStartDrain: cordon and start evicting.
	StepStartDrain Step = "start-drain"
	// StepContinueDrain: keep (or resume) evicting.
	StepContinueDrain Step = "continue-drain"
	// StepRequest: set perform-maintenance=true.
	StepRequest Step = "request-maintenance"
	// StepNoteSeen: record that GKE's maintenance is under way.
	StepNoteSeen Step = "note-maintenance-seen"
	// StepYield: GKE started the maintenance before this service did anything; end without acting.
	StepYield Step = "yield"
	// StepFinish: GKE has finished; end the work and lift our cordon.
	StepFinish Step = "finish"
	// StepAbandon: the maintenance moved or vanished before GKE started it; end the work, lift our cordon and our
	// perform-maintenance label.
	StepAbandon Step = "abandon"
	// StepReport: label fault-behavior: GKE reports the host as faulty.
	StepReport Step = "report-host"
	// StepNoteReportStatus: record (and event) GKE's new report-and-replace status.
	StepNoteReportStatus Step = "note-report-status"
	// StepFail: GKE's work failed; end the work as failed.
	StepFail Step = "fail"
	// StepHandOver: GKE's own operation took the node, which it drains and replaces; end the work as done, stop
	// our drain, and leave the cordon to GKE (never lifted by us, no longer ours).
	StepHandOver Step = "hand-over"
)

// ReasonReplaced begins the reason of work handed over to GKE's own operation (StepHandOver).
const ReasonReplaced = "replaced"

// Next is the lifecycle: the step the work recorded in r takes when the node shows o. drainFirst is the policy's
// performMaintenance.drainFirst. The reason explains the step for Events and the reason annotation.
func Next(r nodeview.Record, o Observation, drainFirst bool) (Step, string) {
	if !r.Active() && !r.HoldsCordon() {
		return StepNone, ""
	}
	if r.Action == nodeview.ReportFaultyHost {
		return nextReport(r, o)
	}
	if len(o.GKEOperations) > 0 {
		// Whatever this work was for, GKE drains the node now and deletes or re-creates it: the new VM is a new node.
		return StepHandOver, fmt.Sprintf("%s: GKE's own work on the node (%s) drains and replaces it; this service stops and leaves the node, its cordon included, to GKE",
			ReasonReplaced, strings.Join(o.GKEOperations, ","))
	}
	if r.FaultDrain() {
		return nextFaultDrain(r, o)
	}
	if o.InMaintenance {
		switch {
		case r.Phase == nodeview.Accepted:
			return StepYield, "GKE started the maintenance before this service acted"
		case !r.MaintenanceSeen:
			return StepNoteSeen, "GKE maintenance under way"
		case r.Phase == nodeview.Draining:
			return StepContinueDrain, ""
		}
		return StepNone, ""
	}
	quietAndReady := !o.PerformRequested && o.Ready
	if !r.MaintenanceSeen && !o.Maintenance.Serves(r.Maintenance) {
		switch {
		case o.Maintenance.Pending():
			return StepAbandon, fmt.Sprintf("maintenance %s moved to %s before it started", orNone(r.Maintenance), o.Maintenance.Key())
		case r.Phase == nodeview.MaintenanceRequested || r.HoldsCordon():
			// The maintenance requested or drained for is no longer announced: it happened while unobserved, or
			// GKE withdrew it. Either way nothing is left to wait for.
			if quietAndReady {
				return StepFinish, "maintenance " + orNone(r.Maintenance) + " is no longer announced"
			}
			if o.PerformRequested {
				return StepAbandon, "maintenance " + orNone(r.Maintenance) + " is no longer announced; request withdrawn"
			}
			return StepNone, ""
		default:
			return StepAbandon, "maintenance " + orNone(r.Maintenance) + " is no longer announced"
		}
	}
	switch r.Phase {
	case nodeview.Accepted:
		// Opportunistic maintenance always cordons first, so no accelerator pod lands between decision and request.
		if r.Action == nodeview.Drain || r.Action == nodeview.OpportunisticMaintenance || drainFirst {
			return StepStartDrain, ""
		}
		return StepRequest, ""
	case nodeview.Draining:
		if r.MaintenanceSeen && quietAndReady {
			return StepFinish, "GKE finished maintenance before the drain did"
		}
		return StepContinueDrain, ""
	}
	// maintenance-requested, or a cordon held after done/failed: wait for GKE to finish. A request GKE left on the
	// node after the maintenance it started is ours to remove, not a reason to wait.
	if r.MaintenanceSeen && o.Ready && (!o.PerformRequested || r.Phase == nodeview.MaintenanceRequested) {
		return StepFinish, "GKE finished maintenance"
	}
	return StepNone, ""
}

// nextReport is the lifecycle of a faulty-host report. It needs no maintenance and holds no cordon (GKE taints and
// evicts):
//
//	accepted ──label fault-behavior──► host-reported ──status changes (noted, evented)──► … ──OperationDone──► done
//	   │                                     ├──Error──► failed
//	   │                                     └──label removed with no status from GKE──► done (abandoned)
//	   └──a report already under way (another hand's label, GKE busy)──► done (yielded)
//
// A status left final by an earlier report is cleared when the label is set (StepReport), so every status seen
// afterwards is this report's.
func nextReport(r nodeview.Record, o Observation) (Step, string) {
	switch r.Phase {
	case nodeview.Accepted:
		if o.FaultBehavior != "" || (o.ReportStatus != "" && !o.ReportStatus.Final()) {
			return StepYield, fmt.Sprintf("a report of the host is already under way (%s=%q, %s=%q); not reported again",
				gke.LabelFaultBehavior, o.FaultBehavior, gke.LabelReportAndReplaceStatus, o.ReportStatus)
		}
		return StepReport, ""
	case nodeview.HostReported:
		switch s := o.ReportStatus; {
		case s == gke.ReportOperationDone:
			return StepFinish, "GKE reported the host and replaced it (" + string(s) + ")"
		case s == gke.ReportError:
			return StepFail, "GKE could not report the host (" + string(s) + "); re-apply the report to retry a transient error"
		case s == "" && o.FaultBehavior == "":
			return StepAbandon, gke.LabelFaultBehavior + " was removed before GKE reported progress"
		case s != "" && string(s) != r.ReportStatus:
			return StepNoteReportStatus, "GKE report-and-replace status " + string(s)
		}
	}
	return StepNone, ""
}

// nextFaultDrain is the lifecycle of a GPU fault's drain. It serves no maintenance: the fault is the reason, and the
// node's boot is its end (a repair, or any reboot, clears a GPU fault of the boot before):
//
//	accepted ──► draining ──► done (+cordon) ──node boots anew──► done (cordon lifted)
//	   │            └──drain failed──► failed (+cordon) ──node boots anew──► failed (cordon lifted)
//	   └──(accepted or draining) node boots anew──► done (abandoned, cordon lifted)
//
// GKE's maintenance under way holds it (GKE drains and repairs; its FAILURE_GPU* notice is new work of its own,
// which takes the node over with the cordon).
func nextFaultDrain(r nodeview.Record, o Observation) (Step, string) {
	boot, _, _ := nodeview.ParseGPUIncident(r.Incident)
	if o.BootID != boot {
		why := fmt.Sprintf("the node booted anew (boot %s; the GPU fault was of boot %s)", orNone(o.BootID), orNone(boot))
		if r.Active() {
			return StepAbandon, why + " before the drain finished"
		}
		return StepFinish, why + ": the fault is gone with that boot"
	}
	switch {
	case o.InMaintenance && r.Phase == nodeview.Accepted:
		return StepYield, "GKE started maintenance before this service acted"
	case r.Phase == nodeview.Accepted:
		return StepStartDrain, ""
	case r.Phase == nodeview.Draining:
		return StepContinueDrain, ""
	}
	return StepNone, ""
}

// KeepCordonOnFailure: a failed drain keeps our cordon while the maintenance it served cannot be moved and is still
// pending (or under way): pods scheduled there would be killed by it anyway; and a GPU fault's, while the faulty
// GPU is in the node: pods scheduled there would run on it.
func KeepCordonOnFailure(r nodeview.Record, o Observation) bool {
	return r.Action == nodeview.Drain && (o.InMaintenance || o.Maintenance.Serves(r.Maintenance) || r.FaultDrain())
}

// Serves reports whether the record's work (in progress or finished) is for the maintenance now announced, so an
// alert for that maintenance is a repeat.
func Serves(r nodeview.Record, m nodeview.Maintenance) bool {
	return r.Phase != "" && m.Serves(r.Maintenance)
}

func orNone(key string) string {
	if key == "" {
		return "(none recorded)"
	}
	return key
}
