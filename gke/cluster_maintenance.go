package gke

import "time"

// ClusterMaintenance is what a cluster's maintenance policy in the GKE API (MaintenancePolicy: the maintenance window
// and the maintenance exclusions) says as of one moment. GKE runs its own upgrades only inside the window and outside
// the exclusions; host maintenance ignores both.
type ClusterMaintenance struct {
	// Window: the cluster has a maintenance window. Without one GKE may do its work at any time.
	Window bool
	// Start and End are the window open at the moment or the next one, [Start, End); both zero when the window
	// recurs no more.
	Start, End time.Time
	// Exclusions are the maintenance exclusions that have not ended by the moment, by name.
	Exclusions []MaintenanceExclusion
	// AutoUpgrades are when GKE announced the node pools' next auto-upgrades start, by node pool name; a pool
	// without one is absent.
	AutoUpgrades map[string]time.Time
}

// The scopes of a maintenance exclusion: the GKE API's MaintenanceExclusionOptions.Scope, lower-cased.
const (
	ExclusionNoUpgrades            = "no_upgrades"
	ExclusionNoMinorUpgrades       = "no_minor_upgrades"
	ExclusionNoMinorOrNodeUpgrades = "no_minor_or_node_upgrades"
)

// MaintenanceExclusion is one of a cluster's maintenance exclusions: [Start, End).
type MaintenanceExclusion struct {
	Name string
	// Scope is what it keeps out (ExclusionNoUpgrades also for an exclusion without options).
	Scope      string
	Start, End time.Time
}

// WindowOpen reports whether the maintenance window is open at now; without a window it always is.
func (m ClusterMaintenance) WindowOpen(now time.Time) bool {
	if !m.Window {
		return true
	}
	return !m.Start.IsZero() && !now.Before(m.Start) && now.Before(m.End)
}

// ExclusionsAt are the exclusions in force at now.
func (m ClusterMaintenance) ExclusionsAt(now time.Time) []MaintenanceExclusion {
	var out []MaintenanceExclusion
	for _, e := range m.Exclusions {
		if !now.Before(e.Start) && now.Before(e.End) {
			out = append(out, e)
		}
	}
	return out
}
