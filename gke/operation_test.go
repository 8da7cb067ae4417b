package gke

import (
	"slices"
	"testing"
	"time"
)

func TestOperations(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        []string
		wantErr     bool
	}{
		{name: "none"},
		{name: "drain label", labels: map[string]string{LabelOperationType: "drain"}, want: []string{"drain"}},
		{name: "label upper-case", labels: map[string]string{LabelOperationType: " Drain "}, want: []string{"drain"}},
		{name: "annotation json", annotations: map[string]string{AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES","lock_end_timestamp":"2026-12-02T15:00:00Z"}`}, want: []string{"upgrade_nodes"}},
		{name: "annotation yaml", annotations: map[string]string{AnnotationCurrentOperation: "operation_type: AUTO_REPAIR_NODES\nlock_end_timestamp: 1764687600\n"}, want: []string{"auto_repair_nodes"}},
		{name: "both, deduplicated and sorted",
			labels:      map[string]string{LabelOperationType: "drain"},
			annotations: map[string]string{AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES"}`},
			want:        []string{"drain", "upgrade_nodes"}},
		{name: "garbled annotation keeps the label", labels: map[string]string{LabelOperationType: "drain"},
			annotations: map[string]string{AnnotationCurrentOperation: "[not, an, object"}, want: []string{"drain"}, wantErr: true},
		{name: "annotation without a type", annotations: map[string]string{AnnotationCurrentOperation: `{"lock_end_timestamp":"x"}`}, wantErr: true},
		{name: "empty label", labels: map[string]string{LabelOperationType: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Operations(tc.labels, tc.annotations)
			if !slices.Equal(got, tc.want) || (err != nil) != tc.wantErr {
				t.Errorf("Operations = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseTerminationTime(t *testing.T) {
	got, err := ParseTerminationTime("2026-12-09T10:00:00Z")
	if err != nil || !got.Equal(time.Date(2026, 12, 9, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseTerminationTime = %v, %v", got, err)
	}
	if got2, err := ParseTerminationTime("2026-12-09T11:00:00+01:00"); err != nil || !got2.Equal(got) {
		t.Errorf("with an offset: %v, %v", got2, err)
	}
	for _, bad := range []string{"", "tomorrow", "1765274400"} {
		if _, err := ParseTerminationTime(bad); err == nil {
			t.Errorf("ParseTerminationTime(%q) gave no error", bad)
		}
	}
}
