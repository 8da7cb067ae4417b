package gke

import (
	"strings"
	"testing"
	"time"
)

func TestClusterMaintenanceAt(t *testing.T) {
	t0 := time.Date(2026, 6, 6, 2, 0, 0, 0, time.UTC)
	window := ClusterMaintenance{Window: true, Start: t0, End: t0.Add(4 * time.Hour),
		Exclusions: []MaintenanceExclusion{{Name: "freeze", Scope: ExclusionNoUpgrades, Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}}}
	for _, tc := range []struct {
		name      string
		m         ClusterMaintenance
		at        time.Time
		open      bool
		exclusion string
	}{
		{"no window: any time", ClusterMaintenance{}, t0.Add(-time.Hour), true, ""},
		{"before the window", window, t0.Add(-time.Second), false, ""},
		{"its start", window, t0, true, ""},
		{"inside, an exclusion in force", window, t0.Add(90 * time.Minute), true, "freeze"},
		{"the exclusion's end", window, t0.Add(2 * time.Hour), true, ""},
		{"its end", window, t0.Add(4 * time.Hour), false, ""},
		{"a window that recurs no more", ClusterMaintenance{Window: true}, t0, false, ""},
	} {
		if got := tc.m.WindowOpen(tc.at); got != tc.open {
			t.Errorf("%s: open %v, want %v", tc.name, got, tc.open)
		}
		var names []string
		for _, e := range tc.m.ExclusionsAt(tc.at) {
			names = append(names, e.Name)
		}
		if got := strings.Join(names, ","); got != tc.exclusion {
			t.Errorf("%s: exclusions in force %q, want %q", tc.name, got, tc.exclusion)
		}
	}
}
