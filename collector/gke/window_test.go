package gke

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/genproto/googleapis/type/date"
	"google.golang.org/genproto/googleapis/type/timeofday"
	"google.golang.org/protobuf/types/known/durationpb"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func daily(start, duration string) *containerpb.MaintenanceWindow {
	return &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_DailyMaintenanceWindow{
		DailyMaintenanceWindow: &containerpb.DailyMaintenanceWindow{StartTime: start, Duration: duration}}}
}

func recurring(start, end, rule string) *containerpb.MaintenanceWindow {
	return &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_RecurringWindow{
		RecurringWindow: &containerpb.RecurringTimeWindow{
			Window: &containerpb.TimeWindow{StartTime: ts(start), EndTime: ts(end)}, Recurrence: rule}}}
}

func TestNextWindow(t *testing.T) {
	monthly := &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_RecurringMaintenanceWindow{
		RecurringMaintenanceWindow: &containerpb.RecurringMaintenanceWindow{
			DelayUntil:      &date.Date{Year: 2026, Month: 7, Day: 1},
			WindowStartTime: &timeofday.TimeOfDay{Hours: 22},
			WindowDuration:  durationpb.New(6 * time.Hour),
			Recurrence:      "FREQ=MONTHLY;BYSETPOS=1;BYDAY=SA,SU",
		}}}
	for _, tc := range []struct {
		name       string
		window     *containerpb.MaintenanceWindow
		now        string
		start, end string // empty: no window
		fails      bool
	}{
		{"no window", nil, "2026-06-01T12:00:00Z", "", "", false},
		{"exclusions only", &containerpb.MaintenanceWindow{}, "2026-06-01T12:00:00Z", "", "", false},
		{"daily, later today", daily("14:30", "PT4H0M0S"), "2026-06-01T12:00:00Z", "2026-06-01T14:30:00Z", "2026-06-01T18:30:00Z", false},
		{"daily, open since yesterday", daily("23:00", "PT4H0M0S"), "2026-06-02T01:00:00Z", "2026-06-01T23:00:00Z", "2026-06-02T03:00:00Z", false},
		{"daily, over today: tomorrow", daily("03:00", ""), "2026-06-01T12:00:00Z", "2026-06-02T03:00:00Z", "2026-06-02T07:00:00Z", false},
		{"daily, ends now: the next", daily("08:00", "PT4H"), "2026-06-01T12:00:00Z", "2026-06-02T08:00:00Z", "2026-06-02T12:00:00Z", false},
		{"weekend nights", recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"),
			"2026-06-06T03:00:00Z", "2026-06-06T02:00:00Z", "2026-06-06T06:00:00Z", false},
		{"weekend nights, Saturday's over", recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"),
			"2026-06-06T06:00:00Z", "2026-06-07T02:00:00Z", "2026-06-07T06:00:00Z", false},
		{"recurrence ended", recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=DAILY;UNTIL=20260301T000000Z"),
			"2026-06-01T12:00:00Z", "", "", false},
		{"first weekend of the month, from July", monthly, "2026-06-01T12:00:00Z", "2026-07-04T22:00:00Z", "2026-07-05T04:00:00Z", false},
		{"first weekend of the month, July's over", monthly, "2026-07-06T00:00:00Z", "2026-08-01T22:00:00Z", "2026-08-02T04:00:00Z", false},
		{"unreadable rule", recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=FORTNIGHTLY"), "2026-06-01T12:00:00Z", "", "", true},
		{"unreadable daily start", daily("2pm", ""), "2026-06-01T12:00:00Z", "", "", true},
		// Walked from a first window years back, a rule recurring by the second would take the poll for hours.
		{"recurring more often than daily", recurring("2016-01-03T02:00:00Z", "2016-01-03T02:00:01Z", "FREQ=SECONDLY"),
			"2026-06-01T12:00:00Z", "", "", true},
		{"hourly", recurring("2026-01-03T02:00:00Z", "2026-01-03T02:30:00Z", "FREQ=HOURLY"), "2026-06-01T12:00:00Z", "", "", true},
	} {
		start, end, ok, err := nextWindow(tc.window, at(tc.now))
		if (err != nil) != tc.fails {
			t.Errorf("%s: error %v", tc.name, err)
		}
		switch {
		case tc.start == "" && ok:
			t.Errorf("%s: window %v–%v, want none", tc.name, start, end)
		case tc.start != "" && (!ok || !start.Equal(at(tc.start)) || !end.Equal(at(tc.end))):
			t.Errorf("%s: window %v–%v (%v), want %s–%s", tc.name, start, end, ok, tc.start, tc.end)
		}
	}
}

// TestMaintenanceAt: the window open now or next, and the exclusions that have not ended, each with its scope; an
// unreadable window is an error with its exclusions still read.
func TestMaintenanceAt(t *testing.T) {
	exclusion := func(start, end string, scope *containerpb.MaintenanceExclusionOptions) *containerpb.TimeWindow {
		tw := &containerpb.TimeWindow{StartTime: ts(start), EndTime: ts(end)}
		if scope != nil {
			tw.Options = &containerpb.TimeWindow_MaintenanceExclusionOptions{MaintenanceExclusionOptions: scope}
		}
		return tw
	}
	w := recurring("2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU")
	w.MaintenanceExclusions = map[string]*containerpb.TimeWindow{
		"over":      exclusion("2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z", nil),
		"freeze":    exclusion("2026-06-01T00:00:00Z", "2026-06-10T00:00:00Z", nil),
		"minor":     exclusion("2026-06-01T00:00:00Z", "2026-09-01T00:00:00Z", &containerpb.MaintenanceExclusionOptions{Scope: containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES}),
		"later":     exclusion("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z", &containerpb.MaintenanceExclusionOptions{Scope: containerpb.MaintenanceExclusionOptions_NO_MINOR_OR_NODE_UPGRADES}),
		"no bounds": {StartTime: ts("2026-06-01T00:00:00Z")},
	}
	now := at("2026-06-06T03:00:00Z")
	m, err := MaintenanceAt(&containerpb.MaintenancePolicy{Window: w}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Window || !m.Start.Equal(at("2026-06-06T02:00:00Z")) || !m.End.Equal(at("2026-06-06T06:00:00Z")) || !m.WindowOpen(now) {
		t.Errorf("window %+v, want open 02:00–06:00", m)
	}
	var got []string
	for _, e := range m.Exclusions {
		got = append(got, e.Name+"="+e.Scope)
	}
	if want := "freeze=no_upgrades later=no_minor_or_node_upgrades minor=no_minor_upgrades"; strings.Join(got, " ") != want {
		t.Errorf("exclusions %v, want %s", got, want)
	}
	if in := m.ExclusionsAt(now); len(in) != 2 || in[0].Name != "freeze" || in[1].Name != "minor" {
		t.Errorf("in force now: %+v, want freeze and minor", in)
	}

	none, err := MaintenanceAt(nil, now)
	if err != nil || none.Window || !none.WindowOpen(now) || len(none.Exclusions) != 0 {
		t.Errorf("no policy: %+v, %v; want no window, open at any time", none, err)
	}
	bad := recurring("2026-01-03T02:00:00Z", "2026-01-03T02:30:00Z", "FREQ=HOURLY")
	bad.MaintenanceExclusions = w.MaintenanceExclusions
	m, err = MaintenanceAt(&containerpb.MaintenancePolicy{Window: bad}, now)
	if err == nil || !m.Window || m.WindowOpen(now) || len(m.Exclusions) != 3 {
		t.Errorf("unreadable window: %+v, %v; want an error, a window never open, the exclusions read", m, err)
	}
}
