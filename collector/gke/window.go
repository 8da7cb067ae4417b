package gke

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/teambition/rrule-go"

	gkevocab "github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// dailyWindowLength is the length of a daily maintenance window when the API does not say: GKE's daily windows
// last four hours.
const dailyWindowLength = 4 * time.Hour

// nextWindow is the cluster's maintenance window open now or next after now, as [start, end). ok is false without
// a window (maintenance may then happen at any time) or when the recurrence has no occurrence left.
func nextWindow(w *containerpb.MaintenanceWindow, now time.Time) (start, end time.Time, ok bool, err error) {
	var recurrence string
	var first time.Time
	var length time.Duration
	switch p := w.GetPolicy().(type) {
	case *containerpb.MaintenanceWindow_DailyMaintenanceWindow:
		at, err := time.Parse("15:04", p.DailyMaintenanceWindow.GetStartTime())
		if err != nil {
			return start, end, false, fmt.Errorf("daily maintenance window start %q: want HH:MM", p.DailyMaintenanceWindow.GetStartTime())
		}
		length = dailyWindowLength
		if d, err := time.ParseDuration(strings.ToLower(strings.TrimPrefix(p.DailyMaintenanceWindow.GetDuration(), "PT"))); err == nil && d > 0 {
			length = d
		}
		recurrence = "FREQ=DAILY"
		first = timeOfDayBefore(now, length, at.Hour(), at.Minute(), 0)
	case *containerpb.MaintenanceWindow_RecurringWindow:
		tw := p.RecurringWindow.GetWindow()
		if tw.GetStartTime() == nil || tw.GetEndTime() == nil {
			return start, end, false, errors.New("recurring maintenance window without start or end time")
		}
		first, length = tw.GetStartTime().AsTime(), tw.GetEndTime().AsTime().Sub(tw.GetStartTime().AsTime())
		recurrence = p.RecurringWindow.GetRecurrence()
	case *containerpb.MaintenanceWindow_RecurringMaintenanceWindow:
		rw := p.RecurringMaintenanceWindow
		length = rw.GetWindowDuration().AsDuration()
		tod := rw.GetWindowStartTime()
		first = timeOfDayBefore(now, length, int(tod.GetHours()), int(tod.GetMinutes()), int(tod.GetSeconds()))
		if d := rw.GetDelayUntil(); d != nil {
			// The rule's own start matters for INTERVAL>1 and for weekly or monthly rules without BYDAY.
			first = time.Date(int(d.GetYear()), time.Month(d.GetMonth()), int(d.GetDay()),
				int(tod.GetHours()), int(tod.GetMinutes()), int(tod.GetSeconds()), 0, time.UTC)
		}
		recurrence = rw.GetRecurrence()
	default:
		return start, end, false, nil
	}
	if length <= 0 {
		return start, end, false, fmt.Errorf("maintenance window of length %v", length)
	}
	opt, err := rrule.StrToROptionInLocation(strings.TrimPrefix(recurrence, "RRULE:"), time.UTC)
	if err != nil {
		return start, end, false, fmt.Errorf("maintenance window recurrence %q: %w", recurrence, err)
	}
	// GKE's windows recur daily at most; a finer rule, walked from a first window years back, would never end.
	if opt.Freq > rrule.DAILY {
		return start, end, false, fmt.Errorf("maintenance window recurrence %q: %s, more often than GKE's daily at most", recurrence, opt.Freq)
	}
	opt.Dtstart = first.UTC()
	rule, err := rrule.NewRRule(*opt)
	if err != nil {
		return start, end, false, fmt.Errorf("maintenance window recurrence %q: %w", recurrence, err)
	}
	// The first occurrence that has not ended: one started after now minus its length.
	start = rule.After(now.Add(-length), false)
	if start.IsZero() {
		return start, end, false, nil
	}
	return start, start.Add(length), true, nil
}

// timeOfDayBefore is the given UTC time of day on the day a window of the given length open now would have started
// at the earliest: a rule starting there reaches every occurrence that has not ended.
func timeOfDayBefore(now time.Time, length time.Duration, hour, minute, second int) time.Time {
	from := now.Add(-length).UTC().AddDate(0, 0, -1)
	return time.Date(from.Year(), from.Month(), from.Day(), hour, minute, second, 0, time.UTC)
}

// MaintenanceAt reads a cluster's maintenance policy as of now: the maintenance window open now or the next one, and
// the exclusions that have not ended (by name; those without a start or an end are not read). An error is a window
// it cannot read (a bad time of day, a rule recurring more often than daily): Window is then true with no times, and
// the exclusions are read all the same.
func MaintenanceAt(p *containerpb.MaintenancePolicy, now time.Time) (gkevocab.ClusterMaintenance, error) {
	w := p.GetWindow()
	m := gkevocab.ClusterMaintenance{Window: w.GetPolicy() != nil}
	start, end, ok, err := nextWindow(w, now)
	if ok {
		m.Start, m.End = start, end
	}
	for _, name := range slices.Sorted(maps.Keys(w.GetMaintenanceExclusions())) {
		tw := w.GetMaintenanceExclusions()[name]
		if tw.GetStartTime() == nil || tw.GetEndTime() == nil {
			continue
		}
		if until := tw.GetEndTime().AsTime(); now.Before(until) {
			// An exclusion without options keeps every upgrade out.
			scope := containerpb.MaintenanceExclusionOptions_NO_UPGRADES
			if o := tw.GetMaintenanceExclusionOptions(); o != nil {
				scope = o.GetScope()
			}
			m.Exclusions = append(m.Exclusions, gkevocab.MaintenanceExclusion{Name: name, Scope: enumName(scope.String(), ""),
				Start: tw.GetStartTime().AsTime(), End: until})
		}
	}
	return m, err
}

// AutoUpgradeStart is when GKE announced the node pool's next auto-upgrade starts
// (management.upgrade_options.auto_upgrade_start_time); ok is false when it announced none.
func AutoUpgradeStart(np *containerpb.NodePool) (start time.Time, ok bool, err error) {
	at := np.GetManagement().GetUpgradeOptions().GetAutoUpgradeStartTime()
	if at == "" {
		return time.Time{}, false, nil
	}
	start, err = time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("auto_upgrade_start_time %q", at)
	}
	return start, true, nil
}
