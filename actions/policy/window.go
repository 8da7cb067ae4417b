package policy

import (
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
)

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
