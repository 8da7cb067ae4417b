package nodeview

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadRoundTrip(t *testing.T) {
	at := time.Date(2025, 6, 7, 10, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationAction:          string(Drain),
		AnnotationState:           string(Draining),
		AnnotationCordonedBy:      "replica-a",
		AnnotationAcceptedAt:      FormatTime(at),
		AnnotationDrainStartedAt:  "not a time",
		AnnotationMaintenanceSeen: "true",
		AnnotationMaintenance:     LabelKey("1750000000"),
		AnnotationGroup:           "a,b,c",
	}}}
	r := ReadRecord(node.Annotations)
	if r.Action != Drain || r.Phase != Draining || r.CordonedBy != "replica-a" || !r.AcceptedAt.Equal(at) || !r.MaintenanceSeen {
		t.Errorf("record %+v", r)
	}
	if r.Maintenance != "scheduled/1750000000" || strings.Join(r.Group, "|") != "a|b|c" {
		t.Errorf("maintenance %q, group %q", r.Maintenance, r.Group)
	}
	if !r.DrainStartedAt.IsZero() {
		t.Errorf("unreadable time read as %v, want zero", r.DrainStartedAt)
	}
	if !r.Active() {
		t.Error("draining is active")
	}
	for _, p := range []Phase{Done, Failed, ""} {
		if (Record{Phase: p}).Active() {
			t.Errorf("%q must not be active", p)
		}
	}
}

func TestParseAction(t *testing.T) {
	for _, s := range []string{"drain", "perform-maintenance"} {
		if a, ok := ParseAction(s); !ok || string(a) != s {
			t.Errorf("ParseAction(%q) = %q, %v", s, a, ok)
		}
	}
	for _, s := range []string{"", "Drain", "reboot"} {
		if _, ok := ParseAction(s); ok {
			t.Errorf("ParseAction(%q) accepted", s)
		}
	}
}

// TestReadLegacyMaintenance: work recorded by earlier releases (the label's value in scheduled-maintenance-time)
// keeps its maintenance.
func TestReadLegacyMaintenance(t *testing.T) {
	r := ReadRecord(map[string]string{Prefix + "scheduled-maintenance-time": "1750000000"})
	if r.Maintenance != LabelKey("1750000000") {
		t.Errorf("maintenance %q", r.Maintenance)
	}
}

func TestGPUIncidentKey(t *testing.T) {
	key := GPUIncidentKey("b1f3-77", "79")
	if boot, xid, ok := ParseGPUIncident(key); !ok || boot != "b1f3-77" || xid != "79" {
		t.Errorf("ParseGPUIncident(%q) = %q, %q, %v", key, boot, xid, ok)
	}
	if _, _, ok := ParseGPUIncident(IncidentKey(time.Unix(1700000000, 0))); ok {
		t.Error("an alert episode's incident read as a GPU fault's")
	}
}
