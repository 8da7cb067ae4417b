// Package policy decides whether an action may run now, on a node or on the group of nodes that must go with it.
// It is a pure function of the nodes, the cluster-wide disruption count, the time and the policy file: no I/O, so
// every rule is table-tested.
package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Verdict is the outcome of a decision.
type Verdict string

const (
	// Act: claim the nodes and start now.
	Act Verdict = "act"
	// Wait: allowed in principle, not now (paused, window closed, budget full); evaluate again later.
	Wait Verdict = "wait"
	// Refuse: never for this request.
	Refuse Verdict = "refuse"
)

// Why a decision waits: the reason label of gke_disruption_actions_waiting.
const (
	WaitPaused     = "paused"
	WaitWindow     = "window"
	WaitPoolBudget = "pool_budget"
	WaitClusterCap = "cluster_cap"
	// WaitOtherOwner: another hand (GKE's maintenance handler, Cluster Autoscaler, NVSentinel, a cordon) holds a
	// node of the operation; it is never drained or uncordoned by this service.
	WaitOtherOwner = "other_owner"
	// WaitGKEAPI: the pool's windows are the cluster's (windows: {fromCluster: true}) and the cluster's maintenance
	// policy could not be read from the GKE API; nothing starts until it is, never outside the cluster's window.
	WaitGKEAPI = "gke_api"
	// WaitUpgradeReplacesNode: GKE is upgrading the rolling pool and will replace the node, whose maintenance goes
	// with its VM; requesting it now would disrupt the node twice.
	WaitUpgradeReplacesNode = "upgrade_replaces_node"
)

// Decision is a verdict with the governing pool (empty when none matched), a reason for events and logs, and for
// waits the reason's code.
type Decision struct {
	Verdict Verdict
	Pool    string
	Code    string
	Reason  string
	// Hold, on a refusal of a GPU-fault repair by a guard rail, is its code (repairs.HoldCodes); Trip names the
	// breaker scope the repair tripped. The caller records both in the repair ledger.
	Hold string
	Trip string
	// GiveBack, on a wait of due work, names the nodes of opportunistic work GKE has not started that are to be
	// given back (work ended, cordon and request lifted) so the due work fits; it is decided again once they are.
	GiveBack []string
}

// Request is what an alert asks for.
type Request struct {
	Action nodeview.Action
	// CanReschedule: GKE can start this maintenance on request, by the alert's can_reschedule label or GKE's
	// upcoming-maintenance annotation on the node.
	CanReschedule bool
	// HardwareFailure: the maintenance's reasons say the hardware failed (FAILURE_*), by the alert's reasons label
	// or GKE's annotation on the node (RequestFor).
	HardwareFailure bool
}

// RequestFor is the request an alert makes for action on the node's pending maintenance m: reschedulable and a
// hardware failure when either the alert's labels or GKE's annotation on the node say so.
func RequestFor(action nodeview.Action, alertCanReschedule, alertHardwareFailure bool, m nodeview.Maintenance) Request {
	return Request{
		Action:          action,
		CanReschedule:   alertCanReschedule || m.Reschedulable(),
		HardwareFailure: alertHardwareFailure || gke.HardwareFailure(m.Reasons) || action == nodeview.ReportFaultyHost,
	}
}

// Cluster is the cluster-wide count the cap is checked against.
type Cluster struct {
	// Nodes is the number of nodes in the cluster.
	Nodes int
	// Disrupted is the number of disrupted nodes, the candidates included if they are.
	Disrupted int
}

// Input is everything a decision reads.
type Input struct {
	Request Request
	// Node is the node the alert named, as just read from the API.
	Node *nodeview.View
	// Members are the nodes that go together with Node as one operation (Node among them): the nodes of a
	// parallel pool or of a multi-host TPU slice with the same action pending; just Node otherwise.
	Members []*nodeview.View
	// Pool is the nodes governed by the same policy pool as Node (Node among them).
	Pool    []*nodeview.View
	Cluster Cluster
	// Disrupted reports a node that counts against budgets (View.Disrupted, plus dry-run claims).
	Disrupted func(*nodeview.View) bool
	// Reclaimable are the nodes of this service's opportunistic work that GKE has not started yet, anywhere in the
	// cluster: due work that waits for room may have them given back.
	Reclaimable []*nodeview.View
	// Fault is the GPU fault a GKENodeGPUFailed alert reports, nil for any other request: its repair is under the
	// guard rails, counted in Ledger.
	Fault  *GPUFault
	Ledger repairs.Ledger
	// Calendar is the cluster's maintenance window and exclusions, for windows from the cluster; the caller reads
	// it from the GKE API.
	Calendar ClusterCalendar
	Now      time.Time
}

// Survey splits the cluster's nodes for Decide: the nodes governed by the same pool as node (first match wins) and
// the cluster-wide counts. A fresher copy of node replaces the listed one.
func Survey(cfg *config.Config, node *nodeview.View, all []*nodeview.View, disrupted func(*nodeview.View) bool) (pool []*nodeview.View, cluster Cluster) {
	target := cfg.MatchPool(node.Labels)
	seen := false
	count := func(n *nodeview.View) {
		cluster.Nodes++
		if disrupted(n) {
			cluster.Disrupted++
		}
		if target != nil && cfg.MatchPool(n.Labels) == target {
			pool = append(pool, n)
		}
	}
	for _, n := range all {
		if n.Name == node.Name {
			n, seen = node, true
		}
		count(n)
	}
	if !seen {
		count(node)
	}
	return pool, cluster
}

// Scope is the nodes that must go together with node: the whole multi-host TPU slice (its GKE node pool, a slice
// cannot be partly up) whatever the strategy; the whole policy pool for strategy parallel; else node alone. The
// caller keeps those of them that have the same action pending.
func Scope(cfg *config.Config, node *nodeview.View, pool, all []*nodeview.View) []*nodeview.View {
	if slice := SliceOf(node); slice != "" {
		var out []*nodeview.View
		for _, n := range all {
			if SliceOf(n) == slice {
				out = append(out, n)
			}
		}
		return out
	}
	if p := cfg.MatchPool(node.Labels); p != nil && p.Strategy == config.Parallel {
		return pool
	}
	return []*nodeview.View{node}
}

// SliceOf names the multi-host TPU slice the node belongs to (its GKE node pool), or "" for any other node.
func SliceOf(node *nodeview.View) string {
	if node.TPUSliceHosts > 1 {
		return node.Pool
	}
	return ""
}

// unit is what a rolling pool's budget counts: a node, or a whole multi-host slice.
func unit(n *nodeview.View) string {
	if s := SliceOf(n); s != "" {
		return "slice/" + s
	}
	return "node/" + n.Name
}

// Decide is the whole policy. A GPU fault's repair (Input.Fault) the budgets let act then passes the repair guard
// rails (guardRepair). Due work (an alert's drain or perform-maintenance: alerts fire within their lead
// time; a repair) goes before optional work: where only opportunistic work GKE has not started stands in its way
// under maxDisruptedNodes or the pool's budget, it waits while that work is given back (Decision.GiveBack), the
// least urgent first, as little as makes room.
func Decide(cfg *config.Config, in Input) Decision {
	d := decide(cfg, in)
	if d.Verdict == Act && in.Fault != nil {
		return guardRepair(cfg, in, d)
	}
	if d.Verdict != Wait || (d.Code != WaitClusterCap && d.Code != WaitPoolBudget) ||
		in.Request.Action == nodeview.OpportunisticMaintenance || len(in.Reclaimable) == 0 {
		return d
	}
	return makeRoom(cfg, in, d)
}

// Reclaimable reports opportunistic work GKE has not started on the node: in progress (claimed, draining or
// requested) with no GKE maintenance seen or under way, so giving it back loses nothing but the early start.
func Reclaimable(n *nodeview.View) bool {
	r := n.Record
	return r.Action == nodeview.OpportunisticMaintenance && r.Active() && !r.MaintenanceSeen && !n.InMaintenance
}

// makeRoom finds the fewest units of reclaimable opportunistic work, latest maintenance first, whose return lets the
// due work act; d is returned unchanged when none does.
func makeRoom(cfg *config.Config, in Input, d Decision) Decision {
	byUnit := map[string][]*nodeview.View{}
	var units []string
	for _, n := range in.Reclaimable {
		u := unit(n)
		if byUnit[u] == nil {
			units = append(units, u)
		}
		byUnit[u] = append(byUnit[u], n)
	}
	due := func(u string) time.Time {
		var first time.Time
		for _, n := range byUnit[u] {
			if s := n.Maintenance.Start(); first.IsZero() || s.Before(first) {
				first = s
			}
		}
		return first
	}
	slices.SortFunc(units, func(a, b string) int {
		if c := due(b).Compare(due(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	disrupted := in.Disrupted
	if disrupted == nil {
		disrupted = (*nodeview.View).Disrupted
	}
	returned := map[string]bool{}
	var names []string
	trial := in
	trial.Disrupted = func(n *nodeview.View) bool { return !returned[n.Name] && disrupted(n) }
	for _, u := range units {
		for _, n := range byUnit[u] {
			if n.Name == in.Node.Name || returned[n.Name] {
				continue
			}
			returned[n.Name] = true
			names = append(names, n.Name)
			if disrupted(n) {
				trial.Cluster.Disrupted--
			}
		}
		if decide(cfg, trial).Verdict == Act {
			slices.Sort(names)
			d.GiveBack = names
			d.Reason += fmt.Sprintf("; due work goes first: giving back opportunistic maintenance GKE has not started on %s",
				strings.Join(names, ", "))
			return d
		}
	}
	return d
}

func decide(cfg *config.Config, in Input) Decision {
	node := in.Node
	disrupted := in.Disrupted
	if disrupted == nil {
		disrupted = (*nodeview.View).Disrupted
	}
	p := cfg.MatchPool(node.Labels)
	if p == nil {
		return Decision{Verdict: Refuse, Reason: "node is matched by no pool of the policy"}
	}
	refuse := func(format string, args ...any) Decision {
		return Decision{Verdict: Refuse, Pool: p.Name, Reason: fmt.Sprintf(format, args...)}
	}
	wait := func(code, format string, args ...any) Decision {
		return Decision{Verdict: Wait, Pool: p.Name, Code: code, Reason: fmt.Sprintf(format, args...)}
	}

	m := node.Maintenance
	switch in.Request.Action {
	case nodeview.PerformMaintenance, nodeview.OpportunisticMaintenance:
		if !m.Pending() {
			return refuse("no maintenance is pending on the node (no %s label or announced window)", gke.LabelScheduledMaintenanceTime)
		}
		if !in.Request.CanReschedule {
			return refuse("can_reschedule is not true: GKE cannot start this maintenance on request")
		}
	case nodeview.Drain:
		if in.Fault != nil {
			break // a GPU fault's drain needs no maintenance: the fault is the reason, the node's next boot its end
		}
		if !m.Pending() {
			return refuse("no maintenance is pending on the node (no %s label or announced window): nothing to drain for", gke.LabelScheduledMaintenanceTime)
		}
		if horizon := time.Duration(cfg.Drain.Horizon); horizon > 0 && m.Start().After(in.Now.Add(horizon)) {
			return refuse("maintenance %s is more than drain.horizon (%s) away: the node would stay cordoned until then; the alert acts when it is received again within the horizon",
				m.Key(), horizon)
		}
	case nodeview.ReportFaultyHost:
		// No maintenance need be pending: the report is how a failing host gets one.
		if !gke.FaultReportSupported(node.MachineType) {
			return refuse("machine type %q cannot have its host reported as faulty through GKE (A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3 High with 8 GPUs can)",
				node.MachineType)
		}
		if node.FaultBehavior != "" {
			return refuse("the host is already reported as faulty (%s=%s); GKE rejects another report until that one completes",
				gke.LabelFaultBehavior, node.FaultBehavior)
		}
		if node.HostReported() {
			return refuse("GKE's report of the host is in progress (%s=%s); GKE rejects another report until it completes",
				gke.LabelReportAndReplaceStatus, node.ReportStatus)
		}
	default:
		return refuse("unknown action %q", in.Request.Action)
	}
	if node.Deleting {
		return refuse("node is being deleted")
	}
	if in.Request.Action != nodeview.ReportFaultyHost && gke.GPUFailure(m.Reasons) {
		// A GPU fault's drain is not such a repair: GKE's maintenance is how its host gets repaired.
		if boot, xid, ok := nodeview.ParseGPUIncident(node.Record.Incident); ok && boot == node.BootID &&
			node.Record.Action == nodeview.ReportFaultyHost && node.Record.Phase != nodeview.Failed {
			return refuse("GKE's notice of a GPU failure (%s) is of the GPU fault already repaired in this boot (Xid %s, reported as faulty): one incident, one repair",
				strings.Join(m.Reasons, ","), xid)
		}
	}
	if node.InMaintenance {
		return refuse("GKE maintenance is already under way on the node")
	}
	if node.PerformMaintenanceRequested {
		return refuse("perform-maintenance is already requested on the node")
	}

	members := in.Members
	if len(members) == 0 {
		members = []*nodeview.View{node}
	}
	for _, n := range members {
		// A report cordons and drains nothing of ours (GKE evicts), so another hand's hold is no conflict: a node
		// quarantined for its faults is the very node to report.
		if owner := n.HeldBy; owner != "" && in.Request.Action != nodeview.ReportFaultyHost {
			if owner == nodeview.OwnerGKEOperation {
				owner += " " + strings.Join(n.GKEOperations, ",")
			}
			return wait(WaitOtherOwner, "node %s is held by %s (cordoned or being drained by another hand); this service waits and never drains or uncordons it", n.Name, owner)
		}
	}
	// Only maintenance that can wait: an unmovable window is due first, and failed hardware is repaired now.
	if p.Strategy == config.Rolling && in.Request.Action == nodeview.PerformMaintenance && !in.Request.HardwareFailure {
		if draining, newer := upgradeReplaces(node, in.Pool); draining != "" {
			return wait(WaitUpgradeReplacesNode, "GKE is upgrading pool %s (its own work on %s) and node %s runs %s, older than the pool's %s: the upgrade replaces it, and its maintenance goes with the old VM",
				p.Name, draining, node.Name, node.KubeletVersion, newer)
		}
		if start, ok := autoUpgradeFirst(in.Calendar, node, in.Now); ok {
			return wait(WaitUpgradeReplacesNode, "GKE's auto-upgrade of node pool %s starts at %s, before maintenance %s is due: the upgrade replaces node %s, and its maintenance goes with the old VM",
				node.Pool, stamp(start), m.Key(), node.Name)
		}
	}
	if cfg.Paused {
		return wait(WaitPaused, "the policy is paused")
	}
	// A pool's repair settings govern a failed host's maintenance: its own windows (none: any time) and budget.
	repair := p.Repair
	if !in.Request.HardwareFailure {
		repair = nil
	} else if repair == nil && in.Request.Action == nodeview.ReportFaultyHost {
		// A report always replaces a host: without repair settings, the default repair budget, any time.
		repair = config.DefaultRepair()
	}
	windows, outside := cfg.WindowsOf(p), "outside every maintenance window"
	if p.Windows != nil {
		outside += " of pool " + p.Name
	}
	if repair != nil {
		windows, outside = repair.Windows, "repair of failed hardware: outside every repair window of pool "+p.Name
	}
	if windows.FromCluster {
		if code, why := clusterWindowClosed(in.Calendar, in.Now); code != "" {
			if repair != nil {
				why = "repair of failed hardware: " + why
			}
			return wait(code, "%s", why)
		}
	} else if !InWindows(windows.Weekly, in.Now) {
		return wait(WaitWindow, "%s", outside)
	}

	// added is how many more nodes become disrupted if the operation starts. A group goes as a whole, so the
	// cluster cap must have room for all of it: taking a coupled pool or a slice half-way disrupts it twice.
	added := 0
	for _, n := range members {
		if !disrupted(n) {
			added++
		}
	}
	group := ""
	if len(members) > 1 {
		group = fmt.Sprintf(" (%d nodes together)", len(members))
	}
	if clusterCap := cfg.MaxDisruptedNodes; clusterCap != nil {
		limit := clusterCap.Of(in.Cluster.Nodes, false)
		headroom := ""
		if h := cfg.OpportunisticHeadroom; h != nil && in.Request.Action == nodeview.OpportunisticMaintenance {
			// Optional work leaves this much of the cap to due work.
			limit = max(0, limit-h.Of(in.Cluster.Nodes, false))
			headroom = fmt.Sprintf(" less opportunisticHeadroom %s", h)
		}
		if in.Cluster.Disrupted+added > limit {
			return wait(WaitClusterCap, "cluster-wide cap: %d of %d nodes disrupted, %d more%s would exceed maxDisruptedNodes %s%s (%d)",
				in.Cluster.Disrupted, in.Cluster.Nodes, added, group, clusterCap, headroom, limit)
		}
	}
	if p.Strategy == config.Parallel && repair == nil {
		return Decision{Verdict: Act, Pool: p.Name, Reason: fmt.Sprintf("pool %s goes in parallel%s", p.Name, group)}
	}

	// Rolling and repairs: budgets count units (nodes, or whole multi-host slices).
	own := unit(node)
	units, down, repairing := map[string]bool{}, map[string]bool{}, map[string]bool{}
	units[own] = true
	for _, n := range in.Pool {
		u := unit(n)
		units[u] = true
		if u != own && disrupted(n) {
			down[u] = true
			if n.UnderRepair() {
				repairing[u] = true
			}
		}
	}
	what := "nodes"
	if SliceOf(node) != "" {
		what = "units (nodes or TPU slices)"
	}
	poolSize, after := len(units), len(down)+1
	if repair != nil {
		if len(repairing)+1 > repair.MaxConcurrent {
			return wait(WaitPoolBudget, "pool %s: %d %s under repair, repair.maxConcurrent %d",
				p.Name, len(repairing), what, repair.MaxConcurrent)
		}
		if err := minAvailable(p, poolSize, after, what, len(down), disrupted(node)); err != "" {
			return wait(WaitPoolBudget, "%s", err)
		}
		return Decision{Verdict: Act, Pool: p.Name, Reason: fmt.Sprintf("repair of failed hardware: pool %s: %d of %d %s under repair with this one (repair.maxConcurrent %d)%s",
			p.Name, len(repairing)+1, poolSize, what, repair.MaxConcurrent, group)}
	}
	if maxUnavailable := p.MaxUnavailable.Of(poolSize, false); after > maxUnavailable {
		return wait(WaitPoolBudget, "pool %s: %d of %d %s unavailable, maxUnavailable %s (%d)",
			p.Name, len(down), poolSize, what, p.MaxUnavailable, maxUnavailable)
	}
	if err := minAvailable(p, poolSize, after, what, len(down), disrupted(node)); err != "" {
		return wait(WaitPoolBudget, "%s", err)
	}
	return Decision{Verdict: Act, Pool: p.Name, Reason: fmt.Sprintf("pool %s: %d of %d %s unavailable with this one%s",
		p.Name, after, poolSize, what, group)}
}

// minAvailable says why taking one more unit of the pool (after units unavailable then) would break its
// minAvailable, or "" when it would not.
func minAvailable(p *config.Pool, poolSize, after int, what string, down int, nodeDisrupted bool) string {
	if p.MinAvailable == nil {
		return ""
	}
	minimum := p.MinAvailable.Of(poolSize, true)
	if poolSize-after >= minimum {
		return ""
	}
	available := poolSize - down
	if nodeDisrupted {
		available--
	}
	return fmt.Sprintf("pool %s: %d of %d %s available, one more would go below minAvailable %s (%d)",
		p.Name, available, poolSize, what, p.MinAvailable, minimum)
}

// upgradeReplaces tells whether an upgrade of the node's pool under way will replace the node: GKE's own work shows
// on a node of the pool (draining, the name of one such node) and another node of the pool runs a newer kubelet than
// this one (newer, its version). Versions that do not read say nothing.
func upgradeReplaces(node *nodeview.View, pool []*nodeview.View) (draining, newer string) {
	parse := func(v string) *version.Version {
		parsed, err := version.ParseSemantic(strings.TrimPrefix(v, "v"))
		if err != nil {
			return nil
		}
		return parsed
	}
	own := parse(node.KubeletVersion)
	if own == nil {
		return "", ""
	}
	var newest *version.Version
	for _, n := range pool {
		if len(n.GKEOperations) > 0 && n.Name != node.Name && draining == "" {
			draining = n.Name
		}
		if v := parse(n.KubeletVersion); v != nil && v.GreaterThan(own) && (newest == nil || v.GreaterThan(newest)) {
			newest, newer = v, n.KubeletVersion
		}
	}
	if draining == "" || newest == nil {
		return "", ""
	}
	return draining, newer
}

// autoUpgradeFirst is the start of the auto-upgrade GKE announced for the node's pool when it is still to come and
// comes before the node's maintenance is due, so the upgrade replaces the node first. Without a cluster read (no
// GKE API, or a failed read) nothing is known to come first.
func autoUpgradeFirst(cal ClusterCalendar, node *nodeview.View, now time.Time) (time.Time, bool) {
	if cal.Maintenance == nil || node.Pool == "" {
		return time.Time{}, false
	}
	start, ok := cal.Maintenance.AutoUpgrades[node.Pool]
	due := node.Maintenance.Start()
	return start, ok && start.After(now) && !due.IsZero() && start.Before(due)
}
