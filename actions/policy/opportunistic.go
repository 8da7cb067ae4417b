package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// OpportunisticInput is what picking an idle node reads.
type OpportunisticInput struct {
	Pool *config.Pool
	// Nodes are the nodes the pool governs.
	Nodes []*nodeview.View
	// Idle is how long no pod requesting an accelerator has run on a node (0: busy now).
	Idle func(*nodeview.View) time.Duration
	// Disrupted reports a node that counts against budgets.
	Disrupted func(*nodeview.View) bool
	// Claimable reports a node with maintenance announced and no work of this service on it.
	Claimable func(*nodeview.View) bool
	// AlertSaysReschedulable reports a live alert for the node whose can_reschedule label (the node agent's metadata)
	// is true: it counts where GKE's annotation says nothing. Nil: none.
	AlertSaysReschedulable func(*nodeview.View) bool
	// OptedOut names a pod on the node that asked not to be disrupted (OptsOut), or "". Nil: none.
	OptedOut func(*nodeview.View) string
	Now      time.Time
}

// PickOpportunistic chooses the unit (a node, or a whole multi-host TPU slice) of the pool that may start its
// reschedulable maintenance now because it is idle: every node of it idle for nodeIdleTime, with maintenance that
// GKE says can be rescheduled (its annotation, else a live alert's can_reschedule) starting within window, not opted out (cloud.google.com/opportunistic-disable=true)
// and not left to GKE's own opportunistic maintenance (node.gke.io/opportunistic-config), with no pod on it opted out
// (OptsOut); and taking it keeps
// minNodes units of the pool available; none while GKE's own work (an upgrade, a resize, an auto-repair) is on any
// node of the pool. The unit whose maintenance comes first wins. It returns nil when none may go,
// else the unit's nodes and a reason for the Event.
func PickOpportunistic(in OpportunisticInput) ([]*nodeview.View, string) {
	o := in.Pool.Opportunistic
	if o == nil {
		return nil, ""
	}
	if slices.ContainsFunc(in.Nodes, func(n *nodeview.View) bool { return len(n.GKEOperations) > 0 }) {
		return nil, "" // GKE is upgrading, resizing or repairing the pool: its nodes are GKE's until it is done
	}
	units := map[string][]*nodeview.View{}
	down := map[string]bool{}
	for _, n := range in.Nodes {
		u := unit(n)
		units[u] = append(units[u], n)
		if in.Disrupted(n) {
			down[u] = true
		}
	}
	available := len(units) - len(down)
	if available-1 < o.MinNodes {
		return nil, ""
	}
	type candidate struct {
		id    string
		nodes []*nodeview.View
		due   time.Time
		idle  time.Duration
	}
	var candidates []candidate
	for id, nodes := range units {
		if down[id] {
			continue
		}
		c := candidate{id: id, nodes: nodes, idle: time.Duration(math.MaxInt64)} // the least idle node of the unit tells
		ok := true
		for _, n := range nodes {
			m := n.Maintenance
			idle := in.Idle(n)
			if !in.Claimable(n) || !in.reschedulable(n, m) || m.Start().Sub(in.Now) > time.Duration(o.Window) ||
				idle < time.Duration(o.NodeIdleTime) || n.OpportunisticDisabled || n.OpportunisticConfigured ||
				(in.OptedOut != nil && in.OptedOut(n) != "") {
				ok = false
				break
			}
			if c.due.IsZero() || m.Start().Before(c.due) {
				c.due = m.Start()
			}
			c.idle = min(c.idle, idle)
		}
		if ok {
			slices.SortFunc(c.nodes, func(a, b *nodeview.View) int { return strings.Compare(a.Name, b.Name) })
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return nil, ""
	}
	slices.SortFunc(candidates, func(a, b candidate) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	best := candidates[0]
	what := "nodes"
	if len(best.nodes) > 1 {
		what = "units (nodes or TPU slices)"
	}
	due := "due now" // the window opened and GKE has not started yet
	if d := best.due.Sub(in.Now); d > 0 {
		due = "in " + roughly(d)
	}
	return best.nodes, fmt.Sprintf("idle %s, maintenance %s, pool keeps %d of %d %s",
		roughly(best.idle), due, available-1, len(units), what)
}

// reschedulable: GKE's annotation says the maintenance can be rescheduled or, where it says nothing, a live alert does.
func (in OpportunisticInput) reschedulable(n *nodeview.View, m nodeview.Maintenance) bool {
	switch m.CanReschedule {
	case gke.CanRescheduleTrue:
		return true
	case gke.CanRescheduleUnknown:
		return in.AlertSaysReschedulable != nil && in.AlertSaysReschedulable(n)
	}
	return false
}

// roughly is a duration as an operator reads it in an Event: "14m", "3h12m", "5d" or "5d6h".
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Round(time.Minute).Minutes()))
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	d = d.Round(time.Hour)
	if h := int(d.Hours()) % 24; h != 0 {
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, h)
	}
	return fmt.Sprintf("%dd", int(d.Hours())/24)
}
