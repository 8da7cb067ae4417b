package gke

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseUpcomingMaintenance(t *testing.T) {
	start := time.Date(2025, 3, 4, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		body    string
		want    UpcomingMaintenance
		wantErr string // substring; "" means no error
	}{
		{name: "empty object", body: "{}"},
		{name: "NONE", body: "NONE"},
		{name: "empty body", body: ""},
		{name: "null", body: "null"},
		{name: "only unknown fields", body: `{"foo": 1}`},
		{name: "only can_reschedule", body: `{"can_reschedule": "true"}`},
		{
			name: "documented example",
			body: `{"can_reschedule":"false","latest_window_start_time":"2025-03-05T01:00:00Z","maintenance_status":"PENDING",` +
				`"type":"SCHEDULED","window_end_time":"2025-03-04T03:00:00Z","window_start_time":"2025-03-04T01:00:00Z",` +
				`"maintenance_reasons":["PLANNED_UPDATE"]}`,
			want: UpcomingMaintenance{Announced: true, Type: "SCHEDULED", Status: "PENDING", CanReschedule: CanRescheduleFalse,
				Reasons: []string{"PLANNED_UPDATE"}, WindowStart: start, WindowEnd: start.Add(2 * time.Hour), LatestWindowStart: start.Add(24 * time.Hour)},
		},
		{
			name: "bool can_reschedule, unsorted duplicate reasons",
			body: `{"type":"UNSCHEDULED","maintenance_status":"ONGOING","can_reschedule":true,` +
				`"maintenance_reasons":["PLANNED_UPDATE","FAILURE_GPU","PLANNED_UPDATE"]}`,
			want: UpcomingMaintenance{Announced: true, Type: "UNSCHEDULED", Status: "ONGOING", CanReschedule: CanRescheduleTrue,
				Reasons: []string{"FAILURE_GPU", "PLANNED_UPDATE"}},
		},
		{
			name: "string can_reschedule in upper case, one reason as a string",
			body: `{"type":"SCHEDULED","can_reschedule":"TRUE","maintenance_reasons":"FAILURE_NVLINK"}`,
			want: UpcomingMaintenance{Announced: true, Type: "SCHEDULED", CanReschedule: CanRescheduleTrue, Reasons: []string{"FAILURE_NVLINK"}},
		},
		{
			name: "missing can_reschedule is unknown",
			body: `{"type":"SCHEDULED","window_start_time":"2025-03-04T02:00:00.5+01:00"}`,
			want: UpcomingMaintenance{Announced: true, Type: "SCHEDULED", WindowStart: start.Add(500 * time.Millisecond)},
		},
		{
			name: "unknown enums pass through, COMPLETE status",
			body: `{"type":"NEW_KIND","maintenance_status":"COMPLETE","maintenance_reasons":["FAILURE_TPU"]}`,
			want: UpcomingMaintenance{Announced: true, Type: "NEW_KIND", Status: "COMPLETE", Reasons: []string{"FAILURE_TPU"}},
		},
		{
			name:    "bad timestamp omitted",
			body:    `{"type":"SCHEDULED","window_start_time":"tomorrow","window_end_time":"2025-03-04T03:00:00Z"}`,
			want:    UpcomingMaintenance{Announced: true, Type: "SCHEDULED", WindowEnd: start.Add(2 * time.Hour)},
			wantErr: `window_start_time "tomorrow"`,
		},
		{
			name:    "numeric timestamp",
			body:    `{"type":"SCHEDULED","window_start_time":1741050000}`,
			want:    UpcomingMaintenance{Announced: true, Type: "SCHEDULED"},
			wantErr: "window_start_time",
		},
		{
			name:    "garbage can_reschedule is unknown",
			body:    `{"type":"SCHEDULED","can_reschedule":"maybe"}`,
			want:    UpcomingMaintenance{Announced: true, Type: "SCHEDULED"},
			wantErr: "can_reschedule",
		},
		{
			name:    "bad enum left empty",
			body:    `{"type":"SCHEDULED","maintenance_status":"PENDING, sort of"}`,
			want:    UpcomingMaintenance{Announced: true, Type: "SCHEDULED"},
			wantErr: "maintenance_status",
		},
		{
			name:    "bad reason dropped",
			body:    `{"type":"SCHEDULED","maintenance_reasons":["PLANNED_UPDATE","a,b",7]}`,
			want:    UpcomingMaintenance{Announced: true, Type: "SCHEDULED"},
			wantErr: "maintenance_reasons",
		},
		{name: "malformed", body: `{"type":"SCHEDULED"`, wantErr: "not a JSON object"},
		{name: "array", body: `["SCHEDULED"]`, wantErr: "not a JSON object"},
		{name: "trailing garbage", body: `{} {}`, wantErr: "not a JSON object"},
		{name: "html", body: `<html>503</html>`, wantErr: "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUpcomingMaintenance(tc.body)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
			if strings.Contains(tc.wantErr, "not a JSON object") && !errors.Is(err, ErrNotJSONObject) {
				t.Errorf("error %v does not wrap ErrNotJSONObject", err)
			}
			if !equalMaintenance(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalMaintenance(a, b UpcomingMaintenance) bool {
	return a.Announced == b.Announced && a.Type == b.Type && a.Status == b.Status && a.CanReschedule == b.CanReschedule &&
		slices.Equal(a.Reasons, b.Reasons) && a.WindowStart.Equal(b.WindowStart) && a.WindowEnd.Equal(b.WindowEnd) &&
		a.LatestWindowStart.Equal(b.LatestWindowStart)
}

func TestCanReschedule(t *testing.T) {
	for c, want := range map[CanReschedule][2]string{
		CanRescheduleTrue:    {"true", "true"},
		CanRescheduleFalse:   {"false", "false"},
		CanRescheduleUnknown: {"unknown", "false"},
	} {
		if got := [2]string{c.String(), c.LabelValue()}; got != want {
			t.Errorf("%d: String, LabelValue = %v, want %v", c, got, want)
		}
	}
}

// FuzzParseUpcomingMaintenance checks that no document crashes the parser or yields a value a label cannot carry.
func FuzzParseUpcomingMaintenance(f *testing.F) {
	for _, seed := range []string{
		"{}", "NONE", "", "null",
		`{"can_reschedule":"false","latest_window_start_time":"2025-03-05T01:00:00Z","maintenance_status":"PENDING",` +
			`"type":"SCHEDULED","window_end_time":"2025-03-04T03:00:00Z","window_start_time":"2025-03-04T01:00:00Z"}`,
		`{"type":"UNSCHEDULED","maintenance_status":"ONGOING","can_reschedule":true,"maintenance_reasons":["FAILURE_GPU"]}`,
		`{"type":"SCHEDULED","window_start_time":"tomorrow","can_reschedule":"maybe","maintenance_reasons":"x"}`,
		`{"type":"SCHEDULED"`, `["SCHEDULED"]`, `{"type":"\u00ff"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, _ := ParseUpcomingMaintenance(body)
		if !m.Announced {
			if !equalMaintenance(m, UpcomingMaintenance{}) {
				t.Errorf("nothing announced but %+v", m)
			}
			return
		}
		for _, v := range []string{m.Type, m.Status} {
			if v != "" && !IsEnumValue(v) {
				t.Errorf("label value %q is not an enum value", v)
			}
		}
		if !slices.IsSorted(m.Reasons) || len(slices.Compact(slices.Clone(m.Reasons))) != len(m.Reasons) {
			t.Errorf("reasons %q are not sorted and unique", m.Reasons)
		}
		for _, r := range m.Reasons {
			if !IsEnumValue(r) {
				t.Errorf("reason %q is not an enum value", r)
			}
		}
	})
}
