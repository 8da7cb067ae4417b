package executor

import (
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// simulatedClaim is a claim a dry run would have made. It counts against budgets and makes repeats of the alert
// no-ops, as a real claim would, so a dry run shows what the policy would really let through. It ends when the
// maintenance it was for moves or vanishes, or the node goes away.
type simulatedClaim struct {
	action      nodeview.Action
	maintenance string
	// incident is the incident a faulty-host report would have served; such a claim holds until the node goes away
	// or leadership changes, as the report would until GKE finished.
	incident string
}

// simulate records dry-run claims for nodes.
func (e *Executor) simulate(action nodeview.Action, nodes []*nodeview.View) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range nodes {
		e.simulated[n.Name] = simulatedClaim{action: action, maintenance: n.Maintenance.Key()}
	}
}

// simulatedServes reports a dry-run claim for the node's current maintenance, dropping one whose maintenance has
// moved or vanished.
func (e *Executor) simulatedServes(node *nodeview.View) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.simulated[node.Name]
	if !ok || c.action == nodeview.ReportFaultyHost {
		return false
	}
	if node.InMaintenance || node.Maintenance.Serves(c.maintenance) {
		return true
	}
	delete(e.simulated, node.Name)
	return false
}

// disrupted counts a node against budgets: View.Disrupted, or claimed in a dry run.
func (e *Executor) disrupted(node *nodeview.View) bool {
	if node.Disrupted() {
		return true
	}
	if !e.dryRun() {
		return false
	}
	return e.simulatedServes(node) || e.simulatedIncident(node.Name) != ""
}

// simulateReport records the faulty-host report a dry run would have made.
func (e *Executor) simulateReport(node, incident string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.simulated[node] = simulatedClaim{action: nodeview.ReportFaultyHost, incident: incident}
}

// simulatedIncident is the incident of the node's dry-run faulty-host report, or "".
func (e *Executor) simulatedIncident(node string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.simulated[node].incident
}
