package nodeview

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

func nodeWith(labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
}

func TestPendingMaintenance(t *testing.T) {
	window := `{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true","window_start_time":"2025-12-05T10:00:00Z","window_end_time":"2025-12-05T14:00:00Z"}`
	for _, tc := range []struct {
		name          string
		labels, annot map[string]string
		key           string
		resched       gke.CanReschedule
	}{
		{"nothing", nil, nil, "", gke.CanRescheduleUnknown},
		{"label", map[string]string{gke.LabelScheduledMaintenanceTime: "1764928800"}, nil, "scheduled/1764928800", gke.CanRescheduleUnknown},
		{"label not epoch seconds", map[string]string{gke.LabelScheduledMaintenanceTime: "soon"}, nil, "", gke.CanRescheduleUnknown},
		{"negative label", map[string]string{gke.LabelScheduledMaintenanceTime: "-5"}, nil, "", gke.CanRescheduleUnknown},
		{"announced window", nil, map[string]string{gke.AnnotationUpcomingMaintenance: window}, "window/2025-12-05T10:00:00Z", gke.CanRescheduleTrue},
		{"label wins the key, annotation gives can_reschedule", map[string]string{gke.LabelScheduledMaintenanceTime: "1764928800"},
			map[string]string{gke.AnnotationUpcomingMaintenance: window}, "scheduled/1764928800", gke.CanRescheduleTrue},
		{"boolean can_reschedule", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{"can_reschedule":false,"window_start_time":"2025-12-05T10:00:00Z"}`}, "window/2025-12-05T10:00:00Z", gke.CanRescheduleFalse},
		{"garbage annotation", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{not json`}, "", gke.CanRescheduleUnknown},
		{"empty object", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{}`}, "", gke.CanRescheduleUnknown},
		{"ongoing is not pending", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{"maintenance_status":"ONGOING","window_start_time":"2025-12-05T10:00:00Z"}`}, "", gke.CanRescheduleUnknown},
		{"complete is not pending", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{"maintenance_status":"COMPLETE","window_start_time":"2025-12-05T10:00:00Z"}`}, "", gke.CanRescheduleUnknown},
		{"bad window time", nil, map[string]string{gke.AnnotationUpcomingMaintenance: `{"window_start_time":"tomorrow"}`}, "", gke.CanRescheduleUnknown},
	} {
		m := Of(nodeWith(tc.labels, tc.annot)).Maintenance
		if m.Key() != tc.key || m.CanReschedule != tc.resched {
			t.Errorf("%s: key %q can_reschedule %q, want %q %q", tc.name, m.Key(), m.CanReschedule, tc.key, tc.resched)
		}
		if m.Pending() != (tc.key != "") {
			t.Errorf("%s: pending %v", tc.name, m.Pending())
		}
	}
}

func TestMaintenanceServes(t *testing.T) {
	start := time.Date(2025, 12, 5, 10, 0, 0, 0, time.UTC)
	label := Maintenance{Label: "1764928800"}
	window := Maintenance{WindowStart: start}
	both := Maintenance{Label: "1764928800", WindowStart: start}
	moved := Maintenance{Label: "1765000000"}
	for _, tc := range []struct {
		name string
		m    Maintenance
		key  string
		want bool
	}{
		{"same label", label, label.Key(), true},
		{"label moved", moved, label.Key(), false},
		{"nothing pending", Maintenance{}, label.Key(), false},
		{"no key recorded", label, "", false},
		{"keyed on the window, GKE then adds the label", both, window.Key(), true},
		{"keyed on the label, GKE drops it but announces the same window", window, label.Key(), true},
		{"keyed on the label, a different window announced", Maintenance{WindowStart: start.Add(time.Hour)}, label.Key(), false},
	} {
		if got := tc.m.Serves(tc.key); got != tc.want {
			t.Errorf("%s: Serves = %v, want %v", tc.name, got, tc.want)
		}
	}
	if at, ok := KeyStart(label.Key()); !ok || !at.Equal(start) {
		t.Errorf("KeyStart(label) = %v %v", at, ok)
	}
	if at, ok := KeyStart(window.Key()); !ok || !at.Equal(start) {
		t.Errorf("KeyStart(window) = %v %v", at, ok)
	}
	if _, ok := KeyStart(""); ok {
		t.Error("KeyStart of no key")
	}
}
