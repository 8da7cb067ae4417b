// Package policy decides whether an action may run on a node now. It is a pure function of the node, its pool's
// nodes, the cluster-wide disruption count, the time and the policy file: no I/O, so every rule is table-tested.
package policy

import (
	"fmt"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
)

// Verdict is the outcome of a decision.
type Verdict string

const (
	// Act: claim the node and start now.
	Act Verdict = "act"
	// Wait: allowed in principle, not now (window closed, budget full); evaluate again later.
	Wait Verdict = "wait"
	// Refuse: never for this request.
	Refuse Verdict = "refuse"
)

// Decision is a verdict with the governing pool (empty when none matched) and a reason for events and logs.
type Decision struct {
	Verdict Verdict
	Pool    string
	Reason  string
}

// Request is what an alert asks for.
type Request struct {
	Action nodestate.Action
	// CanReschedule is the alert's can_reschedule label being "true".
	CanReschedule bool
}

// Cluster is the cluster-wide count the cap is checked against.
type Cluster struct {
	// Nodes is the number of nodes in the cluster.
	Nodes int
	// Disrupted is the number of disrupted nodes (nodestate.Disrupted), the candidate included if it is one.
	Disrupted int
}

// Survey splits the cluster's nodes for Decide: the nodes governed by the same pool as node (first match wins) and
// the cluster-wide counts. A fresher copy of node replaces the listed one.
func Survey(cfg *config.Config, node *corev1.Node, all []*corev1.Node) (pool []*corev1.Node, cluster Cluster) {
	target := cfg.MatchPool(node.Labels)
	seen := false
	for _, n := range all {
		if n.Name == node.Name {
			n, seen = node, true
		}
		cluster.Nodes++
		if nodestate.Disrupted(n) {
			cluster.Disrupted++
		}
		if target != nil && cfg.MatchPool(n.Labels) == target {
			pool = append(pool, n)
		}
	}
	if !seen {
		cluster.Nodes++
		if nodestate.Disrupted(node) {
			cluster.Disrupted++
		}
		if target != nil {
			pool = append(pool, node)
		}
	}
	return pool, cluster
}

// Decide is the whole policy. pool is the nodes governed by the same pool as node (node itself may be among them).
func Decide(cfg *config.Config, req Request, node *corev1.Node, pool []*corev1.Node, cluster Cluster, now time.Time) Decision {
	p := cfg.MatchPool(node.Labels)
	if p == nil {
		return Decision{Verdict: Refuse, Reason: "node is matched by no pool of the policy"}
	}
	refuse := func(format string, args ...any) Decision {
		return Decision{Verdict: Refuse, Pool: p.Name, Reason: fmt.Sprintf(format, args...)}
	}
	wait := func(format string, args ...any) Decision {
		return Decision{Verdict: Wait, Pool: p.Name, Reason: fmt.Sprintf(format, args...)}
	}

	switch req.Action {
	case nodestate.PerformMaintenance:
		if !req.CanReschedule {
			return refuse("can_reschedule is not true: GKE cannot start this maintenance on request")
		}
		if _, ok := nodestate.ScheduledMaintenance(node); !ok {
			return refuse("node has no scheduled maintenance (label %s absent)", gke.LabelScheduledMaintenanceTime)
		}
	case nodestate.Drain:
	default:
		return refuse("unknown action %q", req.Action)
	}
	if node.DeletionTimestamp != nil {
		return refuse("node is being deleted")
	}
	if nodestate.InMaintenance(node) {
		return refuse("GKE maintenance is already under way on the node")
	}
	if nodestate.PerformMaintenanceRequested(node) {
		return refuse("perform-maintenance is already requested on the node")
	}

	if !InWindows(cfg.Windows, now) {
		return wait("outside every maintenance window")
	}

	var others []*corev1.Node
	for _, n := range pool {
		if n.Name != node.Name {
			others = append(others, n)
		}
	}
	poolSize := len(others) + 1
	poolDisrupted := 0
	for _, n := range others {
		if nodestate.Disrupted(n) {
			poolDisrupted++
		}
	}
	// added is how many more nodes become disrupted if the action starts. A parallel pool goes as a whole, so the
	// cluster cap must have room for all of it: taking a coupled pool half-way disrupts its workload twice.
	added := 0
	if !nodestate.Disrupted(node) {
		added = 1
	}
	if p.Strategy == config.Parallel {
		added += poolSize - 1 - poolDisrupted
	}

	if clusterCap := cfg.MaxDisruptedNodes; clusterCap != nil {
		limit := clusterCap.Of(cluster.Nodes, false)
		if cluster.Disrupted+added > limit {
			return wait("cluster-wide cap: %d of %d nodes disrupted, %d more would exceed maxDisruptedNodes %s (%d)",
				cluster.Disrupted, cluster.Nodes, added, clusterCap, limit)
		}
	}

	if p.Strategy == config.Parallel {
		return Decision{Verdict: Act, Pool: p.Name, Reason: fmt.Sprintf("pool %s goes in parallel", p.Name)}
	}
	after := poolDisrupted + 1
	if maxUnavailable := p.MaxUnavailable.Of(poolSize, false); after > maxUnavailable {
		return wait("pool %s: %d of %d nodes unavailable, maxUnavailable %s (%d)",
			p.Name, poolDisrupted, poolSize, p.MaxUnavailable, maxUnavailable)
	}
	if p.MinAvailable != nil {
		if minAvailable := p.MinAvailable.Of(poolSize, true); poolSize-after < minAvailable {
			return wait("pool %s: %d of %d nodes available, one more would go below minAvailable %s (%d)",
				p.Name, poolSize-poolDisrupted-(1-added), poolSize, p.MinAvailable, minAvailable)
		}
	}
	return Decision{Verdict: Act, Pool: p.Name, Reason: fmt.Sprintf("pool %s: %d of %d nodes unavailable with this one",
		p.Name, after, poolSize)}
}
