// Package nodestate is the lifecycle of this service's work on one node: the steps the work recorded on the node
// (nodeview.Record) takes as the node changes. Next is its whole logic, a pure function; package executor does the
// I/O.
package nodestate

import (
	"fmt"
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
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
// In a pool upgraded with its maintenance (Observation.Upgrade), "GKE finished" leads to upgrade-pending instead of
// done, the cordon kept, and on through the pool's upgrade (nextUpgrade) to done or failed, the node handed back.
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
	// Upgrade is the node pool's upgrade that follows the maintenance (upgrade: {withMaintenance: true}); nil when
	// the pool's policy asks for none.
	Upgrade *PoolUpgrade
}

// PoolUpgrade is what the executor read of the upgrade of the node's GKE node pool that follows its group's
// maintenance: the upgrade ledger's entry for this work, GKE's operation, and the group.
type PoolUpgrade struct {
	// Entry is the ledger's entry for this work's (pool, maintenance); nil while none was claimed.
	Entry *upgrades.Entry
	// Operation is GKE's operation of the entry as last read; nil when the entry has none or it could not be read.
	Operation *Operation
	// GroupFinished: GKE finished the maintenance of every other member of the work's group (they wait for the
	// upgrade, or their work ended).
	GroupFinished bool
	// Deadline is upgrade.deadline; Now the time of the observation.
	Deadline time.Duration
	Now      time.Time
}

// Operation is a GKE operation's end, as far as the lifecycle cares.
type Operation struct {
	Done bool
	// Error is the failed operation's message ("" when it succeeded or runs).
	Error string
}

// LostAnswer is how long a claimed upgrade may wait for GKE's answer to UpdateNodePool (a call's deadline, with
// room) before its operation is looked for and, when GKE has none, asked for again.
const LostAnswer = time.Minute

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
	// StepAwaitUpgrade: GKE finished the maintenance and the pool's upgrade follows in the same downtime: keep the
	// cordon and wait for it (upgrade-pending).
	StepAwaitUpgrade Step = "await-upgrade"
	// StepRequestUpgrade: the group's maintenance is finished: claim the pool's upgrade in the ledger and ask GKE
	// (UpdateNodePool); a claim whose answer was lost first looks for its operation.
	StepRequestUpgrade Step = "request-upgrade"
	// StepNoteUpgradeRequested: another member asked for the pool's upgrade: record it (upgrade-requested).
	StepNoteUpgradeRequested Step = "note-upgrade-requested"
	// StepUpgradeDone: GKE's operation finished: end the ledger's entry done, then the work (hand the node back).
	StepUpgradeDone Step = "upgrade-done"
	// StepUpgradeFailed: the upgrade failed or stalled past upgrade.deadline: end the ledger's entry failed (the
	// page), then the work failed, the node handed back.
	StepUpgradeFailed Step = "upgrade-failed"
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
	if r.Phase.WaitsForUpgrade() {
		return nextUpgrade(r, o)
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
			return finished(o, "GKE finished maintenance before the drain did")
		}
		return StepContinueDrain, ""
	}
	// maintenance-requested, or a cordon held after done/failed: wait for GKE to finish. A request GKE left on the
	// node after the maintenance it started is ours to remove, not a reason to wait.
	if r.MaintenanceSeen && o.Ready && (!o.PerformRequested || r.Phase == nodeview.MaintenanceRequested) {
		return finished(o, "GKE finished maintenance")
	}
	return StepNone, ""
}

// finished is the step of work whose maintenance GKE finished: the end, or in a pool upgraded with its maintenance
// the wait for the upgrade, the node still cordoned.
func finished(o Observation, why string) (Step, string) {
	if o.Upgrade != nil {
		return StepAwaitUpgrade, why + "; the pool's upgrade follows in the same downtime, the node stays cordoned until it is done"
	}
	return StepFinish, why
}

// nextUpgrade is the lifecycle of the pool's upgrade after the maintenance (upgrade: {withMaintenance: true}):
//
//	upgrade-pending ──group's maintenance finished──► (claim, UpdateNodePool) ──► upgrade-requested ──DONE──► done
//	      │                         another member claimed it ──┘                      │
//	      └──────────── operation failed, or upgrade.deadline passed since upgrade-pending ──┴──► failed
//
// Every end hands the node back (our cordon lifted); a node the upgrade drains and replaces is GKE's (StepHandOver,
// before this). A claim whose answer was lost (no operation after LostAnswer) is asked again only after GKE shows
// no operation of it.
func nextUpgrade(r nodeview.Record, o Observation) (Step, string) {
	u := o.Upgrade
	if u == nil {
		return StepFinish, "the pool's policy no longer upgrades with maintenance; the node is handed back"
	}
	e := u.Entry
	expired := !r.UpgradeSince.IsZero() && u.Now.Sub(r.UpgradeSince) > u.Deadline
	switch {
	case e != nil && e.State == upgrades.Done:
		if e.Current {
			return StepFinish, "the pool is at the control plane's version already; the node is handed back"
		}
		return StepFinish, fmt.Sprintf("GKE upgraded the pool to %s (operation %s); the node is handed back", e.Version, e.Operation)
	case e != nil && e.State == upgrades.Failed:
		return StepUpgradeFailed, "the pool's upgrade failed: " + e.Reason
	case e != nil && u.Operation != nil && u.Operation.Done && u.Operation.Error != "":
		return StepUpgradeFailed, fmt.Sprintf("GKE's upgrade of the pool failed (operation %s): %s", e.Operation, u.Operation.Error)
	case e != nil && u.Operation != nil && u.Operation.Done:
		return StepUpgradeDone, fmt.Sprintf("GKE upgraded the pool to %s (operation %s); the node is handed back", e.Version, e.Operation)
	case expired && e == nil:
		return StepUpgradeFailed, fmt.Sprintf("the group's maintenance did not finish within upgrade.deadline (%s); the pool was not upgraded", u.Deadline)
	case expired:
		return StepUpgradeFailed, fmt.Sprintf("GKE's upgrade of the pool (operation %s) did not finish within upgrade.deadline (%s); it may go on without this service",
			orNone(e.Operation), u.Deadline)
	case e == nil && u.GroupFinished:
		return StepRequestUpgrade, ""
	case e != nil && e.Operation == "" && u.Now.Sub(e.RequestedAt) > LostAnswer:
		return StepRequestUpgrade, "GKE's answer to the upgrade request was lost"
	case e != nil && r.Phase == nodeview.UpgradePending:
		return StepNoteUpgradeRequested, fmt.Sprintf("GKE upgrades the pool to %s", e.Version)
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
