package policy

import (
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Usage is a policy pool's disruption budget in use, counted as Decide counts it.
type Usage struct {
	Pool *config.Pool
	// Nodes are the nodes the pool governs; Units what a rolling pool's budget counts (nodes, or whole multi-host
	// TPU slices), and Disrupted those of them with a node that counts against budgets.
	Nodes, Units, Disrupted int
	// MaxUnavailable and MinAvailable are the pool's limits resolved against Units (rolling pools only);
	// MinAvailable is -1 when the pool sets no minimum.
	MaxUnavailable, MinAvailable int
}

// Usages surveys the whole policy at once, as Survey does for one node's pool (first matching pool wins): each
// pool's usage in the policy's order, the nodes no pool matches (refused), and the cluster-wide count the cap is
// checked against.
func Usages(cfg *config.Config, all []*nodeview.View, disrupted func(*nodeview.View) bool) (pools []Usage, unmatched int, cluster Cluster) {
	type count struct{ units, down map[string]bool }
	counts := make([]count, len(cfg.Pools))
	pools = make([]Usage, len(cfg.Pools))
	index := make(map[*config.Pool]int, len(cfg.Pools))
	for i := range cfg.Pools {
		pools[i] = Usage{Pool: &cfg.Pools[i], MinAvailable: -1}
		counts[i] = count{units: map[string]bool{}, down: map[string]bool{}}
		index[&cfg.Pools[i]] = i
	}
	for _, n := range all {
		down := disrupted(n)
		cluster.Nodes++
		if down {
			cluster.Disrupted++
		}
		p := cfg.MatchPool(n.Labels)
		if p == nil {
			unmatched++
			continue
		}
		i := index[p]
		pools[i].Nodes++
		u := unit(n)
		counts[i].units[u] = true
		if down {
			counts[i].down[u] = true
		}
	}
	for i := range pools {
		u := &pools[i]
		u.Units, u.Disrupted = len(counts[i].units), len(counts[i].down)
		if u.Pool.Strategy == config.Rolling {
			u.MaxUnavailable = u.Pool.MaxUnavailable.Of(u.Units, false)
			if u.Pool.MinAvailable != nil {
				u.MinAvailable = u.Pool.MinAvailable.Of(u.Units, true)
			}
		}
	}
	return pools, unmatched, cluster
}

// NextWindowStart is when a window next opens after now, in wall-clock time of the window's timezone as InWindow
// reads it; false when windows is empty (any time is allowed). On a day daylight saving skips a window's start,
// the time given may be off by the skipped hour.
func NextWindowStart(windows []config.Window, now time.Time) (time.Time, bool) {
	var next time.Time
	for _, w := range windows {
		loc := w.Timezone.Location
		if loc == nil {
			loc = time.UTC
		}
		local := now.In(loc)
		// Eight days ahead covers a window that opens on one weekday only, and today's opening already past.
		for day := range 8 {
			d := local.AddDate(0, 0, day)
			if !opensOn(w, d.Weekday()) {
				continue
			}
			start := time.Date(d.Year(), d.Month(), d.Day(), int(w.Start)/60, int(w.Start)%60, 0, 0, loc)
			if !start.After(now) {
				continue
			}
			if next.IsZero() || start.Before(next) {
				next = start
			}
			break
		}
	}
	return next, !next.IsZero()
}
