package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Budgets are the actions policy's budgets in use, counted by the actions service's own policy code over every
// node of the cluster; their JSON field names are stable.
type Budgets struct {
	Source string `json:"source"`
	Paused bool   `json:"paused"`
	DryRun bool   `json:"dryRun"`
	// WindowOpen: new actions may start now (always, without windows); else NextWindowStart is when they may.
	// WindowsFromCluster: the policy's windows are the cluster's GKE maintenance window and exclusions, which status
	// does not read (WindowOpen is then false).
	WindowOpen         bool         `json:"windowOpen"`
	NextWindowStart    *time.Time   `json:"nextWindowStart,omitempty"`
	WindowsFromCluster bool         `json:"windowsFromCluster,omitempty"`
	Cluster            ClusterCap   `json:"cluster"`
	Pools              []PoolBudget `json:"pools"`
	// UnmatchedNodes are matched by no pool: the actions service refuses them.
	UnmatchedNodes int `json:"unmatchedNodes"`
}

// ClusterCap is the cluster-wide count and its cap (maxDisruptedNodes, as written and resolved), where set.
type ClusterCap struct {
	Nodes             int    `json:"nodes"`
	Disrupted         int    `json:"disrupted"`
	MaxDisruptedNodes string `json:"maxDisruptedNodes,omitempty"`
	Limit             *int   `json:"limit,omitempty"`
}

// PoolBudget is one policy pool. A rolling pool's budget counts units (nodes, or whole multi-host TPU slices);
// its limits are given as written and resolved against its units.
type PoolBudget struct {
	Name                string `json:"name"`
	Strategy            string `json:"strategy"`
	Nodes               int    `json:"nodes"`
	Units               int    `json:"units"`
	Disrupted           int    `json:"disrupted"`
	Available           int    `json:"available"`
	MaxUnavailable      string `json:"maxUnavailable,omitempty"`
	MaxUnavailableLimit *int   `json:"maxUnavailableLimit,omitempty"`
	MinAvailable        string `json:"minAvailable,omitempty"`
	MinAvailableLimit   *int   `json:"minAvailableLimit,omitempty"`
}

// budgetsOf counts as the actions service does: policy.Usages over all nodes, disrupted as View.Disrupted says, plus
// the room half-claimed groups reserve. A dry run's claims live in the service's memory and are not counted.
func budgetsOf(p *Policy, nodes []*nodeview.View, now time.Time) *Budgets {
	cfg := p.Config
	reserved := nodeview.Reserved(nodes)
	usages, unmatched, cluster := policy.Usages(cfg, nodes, func(n *nodeview.View) bool { return n.Disrupted() || reserved(n) })
	b := &Budgets{Source: p.Source, Paused: cfg.Paused, DryRun: p.DryRun(), WindowsFromCluster: cfg.Windows.FromCluster,
		WindowOpen: !cfg.Windows.FromCluster && policy.InWindows(cfg.Windows.Weekly, now),
		Cluster:    ClusterCap{Nodes: cluster.Nodes, Disrupted: cluster.Disrupted}, Pools: make([]PoolBudget, len(usages)),
		UnmatchedNodes: unmatched}
	if !b.WindowOpen && !b.WindowsFromCluster {
		if next, ok := policy.NextWindowStart(cfg.Windows.Weekly, now); ok {
			b.NextWindowStart = &next
		}
	}
	if c := cfg.MaxDisruptedNodes; c != nil {
		limit := c.Of(cluster.Nodes, false)
		b.Cluster.MaxDisruptedNodes, b.Cluster.Limit = c.String(), &limit
	}
	for i, u := range usages {
		pb := PoolBudget{Name: u.Pool.Name, Strategy: string(u.Pool.Strategy), Nodes: u.Nodes, Units: u.Units,
			Disrupted: u.Disrupted, Available: u.Units - u.Disrupted}
		if u.Pool.Strategy == config.Rolling {
			limit := u.MaxUnavailable
			pb.MaxUnavailable, pb.MaxUnavailableLimit = u.Pool.MaxUnavailable.String(), &limit
			if u.Pool.MinAvailable != nil {
				limit := u.MinAvailable
				pb.MinAvailable, pb.MinAvailableLimit = u.Pool.MinAvailable.String(), &limit
			}
		}
		b.Pools[i] = pb
	}
	return b
}

// writeBudgets is the table header's policy block.
func writeBudgets(w io.Writer, b *Budgets, now time.Time) {
	fmt.Fprintf(w, "Policy: %s\n", b.Source)
	var state []string
	if b.Paused {
		state = append(state, "paused")
	}
	if b.DryRun {
		state = append(state, "dry run")
	}
	switch {
	case b.WindowsFromCluster:
		state = append(state, "windows from the cluster's GKE maintenance window and exclusions")
	case b.WindowOpen:
		state = append(state, "window open")
	case b.NextWindowStart != nil:
		state = append(state, fmt.Sprintf("window closed, next opens %s %s (%s)",
			localTime(*b.NextWindowStart), localZone(*b.NextWindowStart), relative(b.NextWindowStart.Sub(now))))
	default:
		state = append(state, "window closed")
	}
	fmt.Fprintf(w, "Now: %s\n", strings.Join(state, ", "))
	if b.Cluster.Limit != nil {
		fmt.Fprintf(w, "Cluster cap: %d/%d disrupted (maxDisruptedNodes %s, %s)\n",
			b.Cluster.Disrupted, *b.Cluster.Limit, b.Cluster.MaxDisruptedNodes, nodeCount(b.Cluster.Nodes))
	} else {
		fmt.Fprintf(w, "Cluster cap: none (%d of %s disrupted)\n", b.Cluster.Disrupted, nodeCount(b.Cluster.Nodes))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY-POOL\tSTRATEGY\tNODES\tDISRUPTED\tAVAILABLE")
	for _, p := range b.Pools {
		nodes := strconv.Itoa(p.Nodes)
		if p.Units != p.Nodes {
			nodes += " (" + strconv.Itoa(p.Units) + " units)"
		}
		disrupted, available := strconv.Itoa(p.Disrupted), strconv.Itoa(p.Available)
		if p.MaxUnavailableLimit != nil {
			disrupted = fmt.Sprintf("%d/%d (maxUnavailable %s)", p.Disrupted, *p.MaxUnavailableLimit, p.MaxUnavailable)
		}
		if p.MinAvailableLimit != nil {
			available = fmt.Sprintf("%d (minAvailable %s = %d)", p.Available, p.MinAvailable, *p.MinAvailableLimit)
			if p.MinAvailable == strconv.Itoa(*p.MinAvailableLimit) {
				available = fmt.Sprintf("%d (minAvailable %d)", p.Available, *p.MinAvailableLimit)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Strategy, nodes, disrupted, available)
	}
	if b.UnmatchedNodes > 0 {
		fmt.Fprintf(tw, "(no pool: refused)\t-\t%d\t-\t-\n", b.UnmatchedNodes)
	}
	tw.Flush()
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}
