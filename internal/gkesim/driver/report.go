package driver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// reportPhase is a step of GKE's handling of a host reported as faulty (gke.LabelFaultBehavior), as GKE's page
// "Manage AI-optimized GKE clusters" describes it: the pods evicted, Compute Engine's report operation, the VM moved
// to a healthy host, then the label removed. The page does not name the taint GKE adds while it works, so the
// simulator only keeps new pods off the node.
type reportPhase int

const (
	reportEvicting reportPhase = iota // workload pods are stopped
	reportRunning                     // PodsEvicted, then OperationRUNNING: Compute Engine reports the host
	reportMoving                      // OperationDone: the VM is down while it moves to a healthy host
)

// faultReport is a report under way on a node.
type faultReport struct {
	phase reportPhase
	until time.Time
}

// advanceReport starts a report when the node is labelled with a fault behavior, and moves it on: on a machine
// type GKE does not support it fails at once (status Error, the label removed), else it runs to OperationDone and
// the node comes back on a healthy host, the label removed.
func (d *Driver) advanceReport(sn *simNode, now time.Time) {
	g := d.sc.GKE
	r := sn.report
	if r == nil {
		n := d.cached(sn.name)
		if n == nil || n.Labels[gke.LabelFaultBehavior] == "" || sn.clearFaultBehavior {
			return
		}
		if !gke.FaultReportSupported(sn.pool.MachineType) {
			sn.reportStatus, sn.clearFaultBehavior = gke.ReportError, true
			d.logger.Info("faulty host report refused: machine type not supported", "node", sn.name, "machine_type", sn.pool.MachineType)
			return
		}
		sn.report = &faultReport{phase: reportEvicting, until: now.Add(time.Duration(g.WorkloadEviction))}
		sn.reportStatus = "" // a new report: the last one's final status goes
		d.logger.Info("faulty host reported: evicting pods", "node", sn.name, "behavior", n.Labels[gke.LabelFaultBehavior])
		return
	}
	if r.phase == reportRunning && sn.reportStatus == gke.ReportPodsEvicted {
		if n := d.cached(sn.name); n != nil && n.Labels[gke.LabelReportAndReplaceStatus] == string(gke.ReportPodsEvicted) {
			sn.reportStatus = gke.ReportOperationRunning // each status shows on the node, in order
		}
	}
	if now.Before(r.until) {
		return
	}
	switch r.phase {
	case reportEvicting:
		r.phase, r.until = reportRunning, now.Add(time.Duration(g.ReportOperation))
		sn.reportStatus = gke.ReportPodsEvicted
		d.logger.Info("faulty host report: pods evicted, operation running", "node", sn.name)
	case reportRunning:
		r.phase, r.until = reportMoving, now.Add(time.Duration(g.FailureRepair))
		sn.reportStatus = gke.ReportOperationDone
		sn.down()
		d.recordInterruption(sn, "MaintenanceEvent", "HW/SW Maintenance", now)
		d.logger.Info("faulty host report done: VM moving to a healthy host", "node", sn.name)
	case reportMoving:
		sn.report, sn.clearFaultBehavior = nil, true
		sn.up(now, time.Duration(g.XidDetection))
		d.logger.Info("faulty host replaced: node Ready, fault-behavior removed", "node", sn.name)
	}
}

// syncReport shows the report's status on the node and removes the fault-behavior label once GKE is done with it.
func (d *Driver) syncReport(ctx context.Context, sn *simNode) {
	n := d.cached(sn.name)
	if n == nil {
		return
	}
	status := string(sn.reportStatus)
	clear := sn.clearFaultBehavior && n.Labels[gke.LabelFaultBehavior] != ""
	if sn.clearFaultBehavior && !clear {
		sn.clearFaultBehavior = false // GKE is done with the label; labelling again is a new report
	}
	if n.Labels[gke.LabelReportAndReplaceStatus] == status && !clear {
		return
	}
	err := updateNode(ctx, d.client, sn.name, func(n *corev1.Node) bool {
		setLabel(n.Labels, gke.LabelReportAndReplaceStatus, status)
		if clear {
			delete(n.Labels, gke.LabelFaultBehavior)
		}
		return true
	})
	if err != nil {
		d.logger.Warn("updating the faulty host report's labels", "node", sn.name, "err", err)
	}
}
