package executor

import (
	"context"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Calendar is the cluster's maintenance window, exclusions and node pools' auto-upgrades as of a moment
// (gkeapi.Calendar).
type Calendar interface {
	At(ctx context.Context, now time.Time) (gke.ClusterMaintenance, error)
}

// calendar is what the policy reads of the cluster's maintenance window, exclusions and node pools' auto-upgrades
// when the decision needs them (read): read through a cache, and taken before decideMu, so a slow GKE API holds no
// other decision. Without a Calendar the policy sees a cluster not read.
func (e *Executor) calendar(ctx context.Context, read bool) policy.ClusterCalendar {
	if !read || e.opts.Calendar == nil {
		return policy.ClusterCalendar{}
	}
	m, err := e.opts.Calendar.At(ctx, time.Now())
	if err != nil {
		return policy.ClusterCalendar{Err: err}
	}
	return policy.ClusterCalendar{Maintenance: &m}
}

// readsCalendar: a decision on the node reads the cluster only when its own pool's windows (or repair windows) are
// the cluster's, or for perform-maintenance in a rolling pool, which waits for an auto-upgrade that replaces the
// node first (policy.autoUpgradeFirst). A slow GKE API then holds no decision of any other pool.
func readsCalendar(cfg *config.Config, node *nodeview.View, action nodeview.Action) bool {
	p := cfg.MatchPool(node.Labels)
	if p == nil {
		return false
	}
	return cfg.WindowsOf(p).FromCluster || (p.Repair != nil && p.Repair.Windows.FromCluster) ||
		(action == nodeview.PerformMaintenance && p.Strategy == config.Rolling)
}
