package metadata

import (
	"strings"
	"testing"
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
