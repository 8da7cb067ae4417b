package nodeview

import (
	"strconv"
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Maintenance is the maintenance GKE has announced on a node and not yet started: its scheduled-maintenance-time
// label, else the window GKE's maintenance handler announced in the node.gke.io/upcoming-maintenance annotation.
type Maintenance struct {
	// Label is the scheduled-maintenance-time label's value ("" when absent or not epoch seconds).
	Label string
	// WindowStart is the announced window's start (zero when not announced).
	WindowStart time.Time
	// CanReschedule is GKE's word on the annotation; unknown without one.
	CanReschedule gke.CanReschedule
	// Reasons are the announcement's maintenance_reasons (PLANNED_UPDATE, FAILURE_GPU, …).
	Reasons []string
}

// Reschedulable reports GKE's word that the maintenance can be started early on request (perform-maintenance).
func (m Maintenance) Reschedulable() bool { return m.CanReschedule == gke.CanRescheduleTrue }

// LabelKey is the Key of a maintenance known by its scheduled-maintenance-time label value.
func LabelKey(v string) string { return "scheduled/" + v }

// Key identifies the maintenance in AnnotationMaintenance: the label's value when there is one, else the window
// start. Empty means no maintenance.
func (m Maintenance) Key() string {
	switch {
	case m.Label != "":
		return LabelKey(m.Label)
	case !m.WindowStart.IsZero():
		return "window/" + m.WindowStart.UTC().Format(time.RFC3339)
	}
	return ""
}

// Pending reports whether any maintenance is announced.
func (m Maintenance) Pending() bool { return m.Key() != "" }

// Start is when the maintenance is due: the label's time, else the window start.
func (m Maintenance) Start() time.Time {
	if secs, ok := gke.ParseMaintenanceTime(m.Label); ok {
		return time.Unix(secs, 0).UTC()
	}
	return m.WindowStart
}

// Serves reports whether work recorded for key serves this maintenance. The label and the annotation describe the
// same maintenance: work keyed on the window still serves it after GKE adds the label, and work keyed on the label
// after GKE drops it but keeps announcing the window at the same time.
func (m Maintenance) Serves(key string) bool {
	if key == "" || !m.Pending() {
		return false
	}
	if key == m.Key() {
		return true
	}
	// The other source announces the same maintenance when it names the same instant.
	at, ok := KeyStart(key)
	if !ok {
		return false
	}
	if strings.HasPrefix(key, "window/") {
		if !m.WindowStart.IsZero() {
			return m.WindowStart.Equal(at)
		}
		return m.Start().Equal(at)
	}
	return m.Label == "" && m.WindowStart.Equal(at)
}

// pendingMaintenance is the maintenance announced and not yet started: the scheduled-maintenance-time label (a
// malformed one announces nothing), else the announced window while GKE says it is PENDING (or does not say). Of a
// malformed annotation only the fields that read are used (gke.ParseUpcomingMaintenance).
func pendingMaintenance(scheduled string, u gke.UpcomingMaintenance) Maintenance {
	m := Maintenance{Label: scheduled}
	if u.Announced {
		switch strings.ToUpper(u.Status) {
		case "", "PENDING", "UNKNOWN", "MAINTENANCE_STATUS_UNKNOWN":
			if !u.WindowStart.IsZero() {
				m.WindowStart = u.WindowStart.UTC().Truncate(time.Second) // keys and labels are whole seconds
			}
			m.CanReschedule = u.CanReschedule
			m.Reasons = u.Reasons
		}
	}
	return m
}

// HardwareFailureAnnounced reports GKE's annotation naming a maintenance, pending or under way, whose reasons say
// the hardware failed: the node's host is (to be) repaired.
func (v *View) HardwareFailureAnnounced() bool {
	return v.Upcoming.Announced && gke.HardwareFailure(v.Upcoming.Reasons)
}

// KeyStart is when the maintenance a Key names was due.
func KeyStart(key string) (time.Time, bool) {
	if v, ok := strings.CutPrefix(key, "scheduled/"); ok {
		secs, err := strconv.ParseInt(v, 10, 64)
		return time.Unix(secs, 0).UTC(), err == nil
	}
	if v, ok := strings.CutPrefix(key, "window/"); ok {
		t, err := time.Parse(time.RFC3339, v)
		return t, err == nil
	}
	return time.Time{}, false
}
