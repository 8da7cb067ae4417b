package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// GPUFault is the GPU fault an alert reports (GKENodeGPUFailed): its Xid and its incident, the node's boot and the
// Xid (nodeview.GPUIncidentKey).
type GPUFault struct {
	Xid      string
	Incident string
}

// guardRepair applies the guard rails of GPU-fault repairs to a repair the budgets let act (d). In order: a
// hold already decided for the incident stands (except the breaker's, which holds only while tripped); a fault
// the node does not show, of an Xid repaired in an earlier boot, is the old fault's sticky gauge; then
// repair.maxPerNode, repair.correlation and the breakers (repair.maxPerHour of the pool and of the cluster: the
// repair that would exceed one trips it). A hold is a refusal with Decision.Hold set; the caller records it in the
// ledger. An incident the ledger already admitted acts again (its claim was interrupted): it is the same repair.
func guardRepair(cfg *config.Config, in Input, d Decision) Decision {
	node, f, ledger := in.Node, in.Fault, in.Ledger
	p := cfg.MatchPool(node.Labels)
	r := p.RepairSettings()
	hold := func(code, format string, args ...any) Decision {
		return Decision{Verdict: Refuse, Pool: p.Name, Hold: code,
			Reason: "repair held (" + code + "): " + fmt.Sprintf(format, args...)}
	}
	if e, ok := ledger.Find(node.Name, f.Incident); ok {
		if e.Repaired() {
			return d
		}
		if e.Held != repairs.HoldBreaker {
			return Decision{Verdict: Refuse, Pool: p.Name, Hold: e.Held, Reason: e.Reason}
		}
	}
	now := in.Now
	if !node.ShowsXid(f.Xid) {
		// The node's own record first: it outlives a ledger deleted or emptied since the repair.
		if boot, xid, ok := nodeview.ParseGPUIncident(node.Record.Incident); ok && xid == f.Xid && boot != node.BootID &&
			node.Record.Action == nodeview.ReportFaultyHost && node.Record.Phase == nodeview.Done {
			return hold(repairs.HoldUnconfirmed, "Xid %s was repaired on this node (its host reported and replaced), in boot %s; the node shows no GPU fault in its current boot %s, so the alert is the old fault's gauge, not a new fault",
				f.Xid, boot, node.BootID)
		}
		for _, e := range ledger.Entries {
			if boot, xid, ok := nodeview.ParseGPUIncident(e.Incident); ok && e.Node == node.Name && e.Repaired() &&
				xid == f.Xid && boot != node.BootID {
				return hold(repairs.HoldUnconfirmed, "Xid %s was repaired on this node at %s, in boot %s; the node shows no GPU fault in its current boot %s, so the alert is the old fault's gauge, not a new fault",
					f.Xid, e.At.UTC().Format(time.RFC3339), boot, node.BootID)
			}
		}
	}
	repaired := 0
	for _, e := range ledger.Entries {
		if e.Node == node.Name && e.Repaired() && now.Sub(e.At) < config.RepairNodeWindow {
			repaired++
		}
	}
	if repaired >= r.MaxPerNode {
		return hold(repairs.HoldMaxPerNode, "the node had %d automatic repairs in 7 days (repair.maxPerNode %d); a person decides on this one", repaired, r.MaxPerNode)
	}
	if where, faulted := correlated(p, r, in); len(faulted) >= r.Correlation.Nodes {
		return hold(repairs.HoldCorrelated, "%d nodes of %s had a GPU fault within %s (%s; repair.correlation.nodes %d): a shared cause, not this host's; no automatic repair there",
			len(faulted), where, time.Duration(r.Correlation.Window), joinNames(faulted), r.Correlation.Nodes)
	}
	scopes := []struct {
		scope, what string
		limit       config.IntOrPercent
		size        int
		counts      func(repairs.Entry) bool
	}{
		{repairs.PoolScope(p.Name), "pool " + p.Name, r.MaxPerHour, len(in.Pool), func(e repairs.Entry) bool { return e.Pool == p.Name }},
		{repairs.ScopeCluster, "the cluster", cfg.Repair.MaxPerHour, in.Cluster.Nodes, func(repairs.Entry) bool { return true }},
	}
	for _, s := range scopes {
		b := ledger.Breakers[s.scope]
		if b.Tripped() {
			return hold(repairs.HoldBreaker, "the circuit breaker of %s is tripped since %s (%s); reset it with gke-disruption-exporter repairs reset",
				s.what, b.TrippedAt.UTC().Format(time.RFC3339), b.Reason)
		}
		limit, started := s.limit.Of(s.size, false), 0
		for _, e := range ledger.Entries {
			if e.Repaired() && s.counts(e) && now.Sub(e.At) < time.Hour && !e.At.Before(b.ResetAt) {
				started++
			}
		}
		if started >= limit {
			d := hold(repairs.HoldBreaker, "%d GPU-fault repairs in %s within the hour (repair.maxPerHour %s = %d): the circuit breaker trips and holds repairs until it is reset with gke-disruption-exporter repairs reset",
				started, s.what, s.limit, limit)
			d.Trip = s.scope
			return d
		}
	}
	return d
}

// correlated names where the node's faults are counted (its topology block, else its pool) and the nodes there with
// a GPU fault within the correlation window: the ledger's faults (repaired or held) and the nodes of the pool that
// show one, the node itself included.
func correlated(p *config.Pool, r *config.Repair, in Input) (string, []string) {
	node, window := in.Node, time.Duration(r.Correlation.Window)
	where := "topology block " + node.Block
	same := func(pool, block string) bool { return block == node.Block }
	if node.Block == "" {
		where = "pool " + p.Name + " (topology blocks unknown)"
		same = func(pool, block string) bool { return pool == p.Name && block == "" }
	}
	faulted := []string{node.Name}
	add := func(name string) {
		if !slices.Contains(faulted, name) {
			faulted = append(faulted, name)
		}
	}
	for _, e := range in.Ledger.Entries {
		if in.Now.Sub(e.At) < window && same(e.Pool, e.Block) {
			add(e.Node)
		}
	}
	for _, n := range in.Pool {
		if n.XidCritical != nil && in.Now.Sub(n.XidCritical.Since) < window && same(p.Name, n.Block) {
			add(n.Name)
		}
	}
	slices.Sort(faulted)
	return where, faulted
}

func joinNames(names []string) string {
	if len(names) > 5 {
		return fmt.Sprintf("%s and %d more", joinNames(names[:5]), len(names)-5)
	}
	return strings.Join(names, ", ")
}
