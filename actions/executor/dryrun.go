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

// disrupted counts a node against budgets: View.Disrupted, or claimed in a dry run.
func (e *Executor) disrupted(node *nodeview.View) bool {
	if node.Disrupted() {
		return true
	}
	if !e.dryRun() {
		return false
	}
	return e.book.simulatedServes(node) || e.book.simulatedIncident(node.Name) != ""
}
