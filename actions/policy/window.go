package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// ClusterCalendar is the cluster's maintenance window and exclusions in the GKE API, for windows from the cluster
// (windows: {fromCluster: true}). Its zero value is a cluster not read: work under such windows waits.
type ClusterCalendar struct {
	// Maintenance is what the cluster's maintenance policy says (collector/gke.MaintenanceAt); nil when it could not
	// be read.
	Maintenance *gke.ClusterMaintenance
	// Err says why it could not be read.
	Err error
}

// clusterWindowClosed says why windows from the cluster let no new work start at now, with the wait code, or ""
// when they let it start: the cluster's maintenance window is open (always, without one) and no exclusion is in
// force. Any exclusion holds work, whatever its scope: GKE's host maintenance ignores exclusions, but the operator
// keeps one calendar. A cluster not read holds all work.
func clusterWindowClosed(cal ClusterCalendar, now time.Time) (code, why string) {
	const from = "windows from the cluster: "
	m := cal.Maintenance
	if m == nil {
		err := cal.Err
		if err == nil {
			err = errors.New("not read")
		}
		return WaitGKEAPI, from + fmt.Sprintf("its maintenance policy could not be read from the GKE API (%v); nothing starts until it is", err)
	}
	if in := m.ExclusionsAt(now); len(in) > 0 {
		last := in[0]
		for _, e := range in[1:] {
			if e.End.After(last.End) {
				last = e
			}
		}
		return WaitWindow, from + fmt.Sprintf("maintenance exclusion %q (%s) is in force until %s", last.Name, last.Scope, stamp(last.End))
	}
	if m.WindowOpen(now) {
		return "", ""
	}
	if m.Start.IsZero() {
		return WaitWindow, from + "the cluster's maintenance window recurs no more"
	}
	return WaitWindow, from + fmt.Sprintf("outside the cluster's maintenance window, next open from %s to %s", stamp(m.Start), stamp(m.End))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// InWindows reports whether now falls in any window; no windows means any time.
func InWindows(windows []config.Window, now time.Time) bool {
	if len(windows) == 0 {
		return true
	}
	for _, w := range windows {
		if InWindow(w, now) {
			return true
		}
	}
	return false
}

// InWindow compares wall-clock time in the window's timezone, so a window keeps its local hours across daylight
// saving changes (on the day clocks skip an hour, the skipped part of a window simply does not occur). A window whose
// end is not after its start runs past midnight; its days are the days it opens on.
func InWindow(w config.Window, now time.Time) bool {
	loc := w.Timezone.Location
	if loc == nil {
		loc = time.UTC
	}
	local := now.In(loc)
	minute := config.Clock(local.Hour()*60 + local.Minute())
	day := local.Weekday()
	if w.Start < w.End {
		return opensOn(w, day) && minute >= w.Start && minute < w.End
	}
	return (opensOn(w, day) && minute >= w.Start) || (opensOn(w, (day+6)%7) && minute < w.End)
}

func opensOn(w config.Window, day time.Weekday) bool {
	if len(w.Days) == 0 {
		return true
	}
	for _, d := range w.Days {
		if time.Weekday(d) == day {
			return true
		}
	}
	return false
}
