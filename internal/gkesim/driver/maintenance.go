package driver

import (
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

// phase is a step of host maintenance on one node.
type phase int

const (
	// phaseScheduled: announced; waiting for the window or a perform-maintenance request.
	phaseScheduled phase = iota
	// phaseStarting: triggered; GKE marks the node within its start delay.
	phaseStarting
	// phaseWorkloadEviction: ONGOING and tainted; workload pods are stopped.
	phaseWorkloadEviction
	// phaseSystemEviction: system pods are stopped too.
	phaseSystemEviction
	// phaseHostDown: terminating; the VM is stopped for the maintenance.
	phaseHostDown
	// phaseDrainWindow: the field sequence after perform-maintenance, until the node goes NotReady: the label
	// consumed, passthrough, the window rewritten to now, the window-started taint, the node still Ready.
	phaseDrainWindow
)

func (p phase) String() string {
	return [...]string{"scheduled", "starting", "evicting-workloads", "evicting-system", "host-down", "drain-window"}[p]
}

// maintenance is a node's scheduled or running host maintenance.
type maintenance struct {
	phase         phase
	until         time.Time // end of a timed phase
	windowStart   time.Time
	canReschedule bool
	// announced is the maintenance as announced (metadata server and node annotation).
	announced metadata.Maintenance
	// requested: started by perform-maintenance rather than by its window.
	requested bool
	// refusedLogged notes that a perform-maintenance request GKE cannot honour was logged.
	refusedLogged bool
	// failure: the reasons say the hardware failed, so the host is repaired (Mechanics.FailureRepair).
	failure bool
	// field: GKE plays the field sequence from requestedAt; passthrough and windowStartedTaint are its steps
	// taken so far that show on the node.
	field                                          bool
	requestedAt                                    time.Time
	labelConsumed, passthrough, windowStartedTaint bool
}

// hostDown is how long the VM is down: a repair for a hardware failure, else an update.
func (m *maintenance) hostDown(g Mechanics) time.Duration {
	if m.failure {
		return time.Duration(g.FailureRepair)
	}
	return time.Duration(g.HostMaintenance)
}

// preemptionPhase is a step of a Spot VM's preemption.
type preemptionPhase int

const (
	preemptionWorkloads preemptionPhase = iota // notice given; workload pods are stopped
	preemptionSystem                           // system pods are stopped too
	preemptionReplacing                        // the VM is gone; its replacement is starting
)

func (p preemptionPhase) String() string {
	return [...]string{"preempted", "preempted", "replacing"}[p]
}

type preemption struct {
	phase preemptionPhase
	until time.Time
}

// advanceMaintenance moves the node's maintenance on when its time has come: the window started or
// perform-maintenance=true was set (a multi-host TPU slice starts together), then GKE's timed steps.
func (d *Driver) advanceMaintenance(sn *simNode, now time.Time) {
	m := sn.maintenance
	if m == nil {
		return
	}
	g := d.sc.GKE
	switch m.phase {
	case phaseScheduled:
		reason := ""
		if !now.Before(m.windowStart) {
			reason = "window started"
		} else if n := d.cached(sn.name); n != nil && n.Labels[LabelPerformMaintenance] == "true" {
			if m.canReschedule {
				reason = "perform-maintenance requested"
			} else if !m.refusedLogged {
				m.refusedLogged = true
				d.logger.Info("perform-maintenance ignored: this maintenance cannot be rescheduled", "node", sn.name)
			}
		}
		if reason == "" {
			return
		}
		requested := reason == "perform-maintenance requested"
		for _, peer := range d.slice(sn) {
			if pm := peer.maintenance; pm != nil && pm.phase == phaseScheduled {
				pm.phase, pm.until = phaseStarting, now.Add(time.Duration(g.MaintenanceStartDelay))
				pm.requested = requested
				if requested && g.Sequence == SequenceField {
					pm.phase, pm.field, pm.requestedAt = phaseDrainWindow, true, now
				}
				d.logger.Info("maintenance starting", "node", peer.name, "reason", reason, "trigger", sn.name,
					"sequence", map[bool]string{true: SequenceField, false: SequenceDocumented}[pm.field])
			}
		}
	case phaseDrainWindow:
		d.advanceDrainWindow(sn, now)
	case phaseStarting:
		if now.Before(m.until) {
			return
		}
		m.phase, m.until = phaseWorkloadEviction, now.Add(time.Duration(g.WorkloadEviction))
		sn.meta.StartMaintenance()
		d.logger.Info("maintenance ongoing: node tainted, workload pods evicted", "node", sn.name)
	case phaseWorkloadEviction:
		if now.Before(m.until) {
			return
		}
		m.phase, m.until = phaseSystemEviction, now.Add(time.Duration(g.SystemEviction))
		d.logger.Info("maintenance ongoing: system pods evicted", "node", sn.name)
	case phaseSystemEviction:
		if now.Before(m.until) {
			return
		}
		m.phase, m.until = phaseHostDown, now.Add(m.hostDown(g))
		sn.down()
		d.recordInterruption(sn, "MaintenanceEvent", "HW/SW Maintenance", now)
		d.logger.Info("maintenance terminating: VM stopped", "node", sn.name)
	case phaseHostDown:
		if now.Before(m.until) {
			return
		}
		sn.maintenance = nil
		sn.up(now, time.Duration(g.XidDetection))
		sn.clearPerformMaintenance = true
		sn.maintained++
		sn.meta.FinishMaintenance()
		d.logger.Info("maintenance done: node Ready, labels, annotation and taints cleared", "node", sn.name)
	}
}

// advanceDrainWindow plays the field sequence's steps that are due, from the perform-maintenance request until the
// node goes NotReady and its host is maintained.
func (d *Driver) advanceDrainWindow(sn *simNode, now time.Time) {
	m := sn.maintenance
	f, since := d.sc.GKE.Field, now.Sub(m.requestedAt)
	due := func(at Duration) bool { return since >= time.Duration(at) }
	if due(f.LabelConsumed) && !m.labelConsumed {
		// GKE takes the label off within seconds, once; a label set again later stays until the end.
		m.labelConsumed, sn.clearPerformMaintenance = true, true
	}
	if due(f.Passthrough) && !m.passthrough {
		m.passthrough = true
		m.announced.Status = "ONGOING"
		sn.meta.ScheduleMaintenance(m.announced)
		d.logger.Info("maintenance passthrough: announcement ONGOING", "node", sn.name)
	}
	if due(f.WindowRewritten) && m.announced.CanReschedule {
		m.announced.WindowStart = m.requestedAt.Add(time.Duration(f.WindowRewritten)).Truncate(time.Second)
		m.announced.LatestWindowStart = m.announced.WindowStart
		m.announced.CanReschedule = false
		sn.meta.ScheduleMaintenance(m.announced)
		d.logger.Info("maintenance window rewritten to now, can_reschedule false", "node", sn.name)
	}
	if due(f.WindowStartedTaint) && !m.windowStartedTaint {
		m.windowStartedTaint = true
		d.logger.Info("maintenance window started: node tainted, still Ready", "node", sn.name)
	}
	if due(f.NotReady) {
		m.phase, m.until = phaseHostDown, now.Add(m.hostDown(d.sc.GKE))
		sn.down()
		sn.meta.StartMaintenance()
		d.recordInterruption(sn, "MaintenanceEvent", "HW/SW Maintenance", now)
		d.logger.Info("maintenance: node NotReady, host down", "node", sn.name, "repair", m.failure)
	}
}

// slice is the nodes GKE maintains together with sn: the whole pool of a multi-host TPU slice, else sn alone.
func (d *Driver) slice(sn *simNode) []*simNode {
	if !sn.pool.MultiHostTPU() {
		return []*simNode{sn}
	}
	return d.targets(sn.pool, nil)
}

// advancePreemption moves a Spot preemption on: notice for workloads, then for system pods, then the VM is gone
// until its replacement is Ready.
func (d *Driver) advancePreemption(sn *simNode, now time.Time) {
	p := sn.preemption
	if p == nil || now.Before(p.until) {
		return
	}
	switch p.phase {
	case preemptionWorkloads:
		p.phase, p.until = preemptionSystem, now.Add(time.Duration(d.sc.GKE.PreemptionNotice)/2)
	case preemptionSystem:
		p.phase, p.until = preemptionReplacing, now.Add(time.Duration(d.sc.GKE.SpotReplacement))
		sn.down()
		d.recordInterruption(sn, "PreemptionEvent", "Other", now)
		d.logger.Info("spot VM stopped", "node", sn.name)
	case preemptionReplacing:
		sn.preemption = nil
		sn.up(now, time.Duration(d.sc.GKE.XidDetection))
		sn.preempted++
		sn.meta.Reset()
		d.logger.Info("spot VM replaced: node Ready", "node", sn.name)
	}
}
