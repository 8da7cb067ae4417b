package executor

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
)

// simulatedClaim is a claim a dry run would have made. It counts against budgets and makes repeats of the alert
// no-ops, as a real claim would, so a dry run shows what the policy would really let through. It ends when the
// maintenance it was for moves or vanishes, or the node goes away.
type simulatedClaim struct {
	action      nodestate.Action
	maintenance string
}

// simulate records dry-run claims for nodes.
func (e *Executor) simulate(action nodestate.Action, nodes []*corev1.Node) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range nodes {
		e.simulated[n.Name] = simulatedClaim{action: action, maintenance: nodestate.PendingMaintenance(n).Key()}
	}
}

// simulatedServes reports a dry-run claim for the node's current maintenance, dropping one whose maintenance has
// moved or vanished.
func (e *Executor) simulatedServes(node *corev1.Node) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.simulated[node.Name]
	if !ok {
		return false
	}
	if nodestate.InMaintenance(node) || nodestate.PendingMaintenance(node).Serves(c.maintenance) {
		return true
	}
	delete(e.simulated, node.Name)
	return false
}

// disrupted counts a node against budgets: nodestate.Disrupted, or claimed in a dry run.
func (e *Executor) disrupted(node *corev1.Node) bool {
	if nodestate.Disrupted(node) {
		return true
	}
	if !e.dryRun() {
		return false
	}
	return e.simulatedServes(node)
}
