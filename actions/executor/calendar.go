package executor

import (
	"context"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Calendar is the cluster's maintenance window, exclusions and node pools' auto-upgrades as of a moment
// (gkeapi.Calendar).
type Calendar interface {
	At(ctx context.Context, now time.Time) (gke.ClusterMaintenance, error)
}

// calendar is what the policy reads of the cluster's maintenance window, exclusions and node pools' auto-upgrades:
// read (through a cache) only while the policy has windows from the cluster, or for a perform-maintenance request
// (forUpgrades), which waits for an auto-upgrade that replaces the node first; taken before decideMu, so a slow GKE
// API holds no other decision. Without a Calendar the policy sees a cluster not read.
func (e *Executor) calendar(ctx context.Context, cfg *config.Config, forUpgrades bool) policy.ClusterCalendar {
	if !(cfg.WindowsFromCluster() || forUpgrades) || e.opts.Calendar == nil {
		return policy.ClusterCalendar{}
	}
	m, err := e.opts.Calendar.At(ctx, time.Now())
	if err != nil {
		return policy.ClusterCalendar{Err: err}
	}
	return policy.ClusterCalendar{Maintenance: &m}
}
