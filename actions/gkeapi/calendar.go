package gkeapi

import (
	"context"
	"sync"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"

	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// DefaultCalendarTTL is how long a Calendar keeps what it read: at most one GetCluster a minute, however many
// decisions ask.
const DefaultCalendarTTL = time.Minute

// calendarTimeout bounds one read: decisions wait on it.
const calendarTimeout = 10 * time.Second

// ClusterReader reads the cluster (Client.GetCluster).
type ClusterReader interface {
	GetCluster(ctx context.Context) (*containerpb.Cluster, error)
}

// Calendar is the cluster's maintenance window and exclusions for policy windows from the cluster, and its node
// pools' announced auto-upgrades. It reads the
// cluster at most once per TTL, keeping a failed read as long as a good one (decisions then wait until the next
// read succeeds), and reads what it keeps as of each caller's moment. Safe for concurrent use: callers asking while
// a read is under way wait for that read.
type Calendar struct {
	cluster ClusterReader
	ttl     time.Duration

	mu     sync.Mutex
	readAt time.Time // zero: never read
	read   *containerpb.Cluster
	err    error
}

// NewCalendar is a calendar of the cluster, read again once what it read is ttl old (DefaultCalendarTTL when 0).
func NewCalendar(cluster ClusterReader, ttl time.Duration) *Calendar {
	if ttl <= 0 {
		ttl = DefaultCalendarTTL
	}
	return &Calendar{cluster: cluster, ttl: ttl}
}

// At is the cluster's maintenance policy as of now (collector/gke.MaintenanceAt) with its node pools'
// auto-upgrades, read from the GKE API when what was read is older than the TTL; an error says why the cluster or
// its window could not be read.
func (c *Calendar) At(ctx context.Context, now time.Time) (gke.ClusterMaintenance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || !now.Before(c.readAt.Add(c.ttl)) || now.Before(c.readAt) {
		ctx, cancel := context.WithTimeout(ctx, calendarTimeout)
		cl, err := c.cluster.GetCluster(ctx)
		cancel()
		c.readAt, c.read, c.err = now, cl, err
	}
	if c.err != nil {
		return gke.ClusterMaintenance{}, c.err
	}
	m, err := gkecollector.MaintenanceAt(c.read.GetMaintenancePolicy(), now)
	for _, np := range c.read.GetNodePools() {
		// A start GKE wrote in a form not understood is left out: the window and exclusions still hold.
		if start, ok, _ := gkecollector.AutoUpgradeStart(np); ok {
			if m.AutoUpgrades == nil {
				m.AutoUpgrades = map[string]time.Time{}
			}
			m.AutoUpgrades[np.GetName()] = start
		}
	}
	return m, err
}
