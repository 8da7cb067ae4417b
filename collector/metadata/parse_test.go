package metadata

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestParseMaintenanceEvent(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		wantErr    bool
	}{
		{body: "NONE", want: "NONE"},
		{body: "TERMINATE_ON_HOST_MAINTENANCE\n", want: "TERMINATE_ON_HOST_MAINTENANCE"},
		{body: "MIGRATE_ON_HOST_MAINTENANCE", want: "MIGRATE_ON_HOST_MAINTENANCE"},
		{body: "SOME_FUTURE_EVENT", want: "SOME_FUTURE_EVENT"},
		{body: "", wantErr: true},
		{body: "<html><body>Error</body></html>", wantErr: true},
		{body: "NONE\nNONE", wantErr: true},
		{body: strings.Repeat("A", maxEnumLength+1), wantErr: true},
		{body: "\xff\xfe", wantErr: true},
	} {
		got, err := parseMaintenanceEvent(tc.body)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseMaintenanceEvent(%q) = %q, %v; want %q, error %v", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParsePreempted(t *testing.T) {
	for _, tc := range []struct {
		body         string
		want, errors bool
	}{
		{body: "TRUE", want: true},
		{body: "FALSE"},
		{body: "true\n", want: true},
		{body: "", errors: true},
		{body: "1", errors: true},
		{body: "YES", errors: true},
	} {
		got, err := parsePreempted(tc.body)
		if (err != nil) != tc.errors || got != tc.want {
			t.Errorf("parsePreempted(%q) = %v, %v; want %v, error %v", tc.body, got, err, tc.want, tc.errors)
		}
	}
}

// TestParseUpcomingMaintenance covers how the series read the gke package's parse (tested there in full).
func TestParseUpcomingMaintenance(t *testing.T) {
	start := time.Date(2025, 3, 4, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		body    string
		want    *upcomingMaintenance
		wantErr string // substring; "" means no error
	}{
		{name: "empty object", body: "{}"},
		{name: "NONE", body: "NONE"},
		{name: "only can_reschedule", body: `{"can_reschedule": "true"}`},
		{
			name: "documented example",
			body: `{"can_reschedule":"false","latest_window_start_time":"2025-03-05T01:00:00Z","maintenance_status":"PENDING",` +
				`"type":"SCHEDULED","window_end_time":"2025-03-04T03:00:00Z","window_start_time":"2025-03-04T01:00:00Z",` +
				`"maintenance_reasons":["PLANNED_UPDATE"]}`,
			want: &upcomingMaintenance{Type: "SCHEDULED", Status: "PENDING", CanReschedule: "false", Reasons: "PLANNED_UPDATE",
				WindowStart: start, WindowEnd: start.Add(2 * time.Hour), LatestWindowStart: start.Add(24 * time.Hour)},
		},
		{
			name: "bool can_reschedule, unsorted duplicate reasons",
			body: `{"type":"UNSCHEDULED","maintenance_status":"ONGOING","can_reschedule":true,` +
				`"maintenance_reasons":["PLANNED_UPDATE","FAILURE_GPU","PLANNED_UPDATE"]}`,
			want: &upcomingMaintenance{Type: "UNSCHEDULED", Status: "ONGOING", CanReschedule: "true",
				Reasons: "FAILURE_GPU,PLANNED_UPDATE"},
		},
		{
			name:    "garbage can_reschedule is false",
			body:    `{"type":"SCHEDULED","can_reschedule":"maybe"}`,
			want:    &upcomingMaintenance{Type: "SCHEDULED", CanReschedule: "false"},
			wantErr: "can_reschedule",
		},
		{
			name:    "bad timestamp omitted",
			body:    `{"type":"SCHEDULED","window_start_time":"tomorrow","window_end_time":"2025-03-04T03:00:00Z"}`,
			want:    &upcomingMaintenance{Type: "SCHEDULED", CanReschedule: "false", WindowEnd: start.Add(2 * time.Hour)},
			wantErr: `window_start_time "tomorrow"`,
		},
		{name: "malformed", body: `{"type":"SCHEDULED"`, wantErr: "not a JSON object"},
		{name: "html", body: `<html>503</html>`, wantErr: "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseUpcomingMaintenance(tc.body)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && !equalMaintenance(*got, *tc.want)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalMaintenance(a, b upcomingMaintenance) bool {
	return a.Type == b.Type && a.Status == b.Status && a.CanReschedule == b.CanReschedule && a.Reasons == b.Reasons &&
		a.WindowStart.Equal(b.WindowStart) && a.WindowEnd.Equal(b.WindowEnd) && a.LatestWindowStart.Equal(b.LatestWindowStart)
}

// FuzzParseUpcomingMaintenance checks that no document crashes the parser or yields a value the series cannot carry.
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
		m, err := parseUpcomingMaintenance(body)
		if m == nil {
			return
		}
		if m.CanReschedule != "true" && m.CanReschedule != "false" {
			t.Errorf("can_reschedule %q is neither true nor false", m.CanReschedule)
		}
		for _, v := range []string{m.Type, m.Status} {
			if v != "" && !isEnum(v) {
				t.Errorf("label value %q is not an enum value", v)
			}
		}
		if m.Reasons != "" {
			rs := strings.Split(m.Reasons, ",")
			if !slices.IsSorted(rs) || len(slices.Compact(slices.Clone(rs))) != len(rs) {
				t.Errorf("reasons %q are not sorted and unique", m.Reasons)
			}
			for _, r := range rs {
				if !isEnum(r) {
					t.Errorf("reason %q is not an enum value", r)
				}
			}
		}
		_, metricErr := prometheus.NewConstMetric(upcomingInfoDesc, prometheus.GaugeValue, 1,
			"node", m.Type, m.Status, m.CanReschedule, m.Reasons)
		if metricErr != nil {
			t.Errorf("parsed maintenance cannot be a series: %v (parse error %v)", metricErr, err)
		}
	})
}
