package gke

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxEnumLength bounds a value passed through as a label: enum values are short, anything longer is garbage.
const MaxEnumLength = 64

// CanReschedule says whether GKE can start an announced maintenance early, on request (perform-maintenance).
type CanReschedule uint8

const (
	// CanRescheduleUnknown: the field is missing or unreadable. Nothing may be requested on it.
	CanRescheduleUnknown CanReschedule = iota
	CanRescheduleFalse
	CanRescheduleTrue
)

// String is "true", "false" or "unknown".
func (c CanReschedule) String() string {
	switch c {
	case CanRescheduleTrue:
		return "true"
	case CanRescheduleFalse:
		return "false"
	default:
		return "unknown"
	}
}

// LabelValue is the can_reschedule label of the upcoming-maintenance series: "true" only when GKE said so,
// else "false" (alerts and actions treat anything but "true" alike).
func (c CanReschedule) LabelValue() string {
	if c == CanRescheduleTrue {
		return "true"
	}
	return "false"
}

// UpcomingMaintenance is GCE's announcement of host maintenance: the metadata server's
// instance/upcoming-maintenance and the node annotation node.gke.io/upcoming-maintenance carry the same snake_case
// JSON. The zero value means nothing is announced; zero times are absent or unreadable ones.
type UpcomingMaintenance struct {
	// Announced: the document names a maintenance (any of type, status or a window time is set).
	Announced         bool
	Type              string // SCHEDULED, UNSCHEDULED, UNKNOWN_TYPE, or an unknown value passed through
	Status            string // PENDING, ONGOING, COMPLETE, UNKNOWN, …
	CanReschedule     CanReschedule
	Reasons           []string // sorted, deduplicated: PLANNED_UPDATE, FAILURE_GPU, …
	WindowStart       time.Time
	WindowEnd         time.Time
	LatestWindowStart time.Time
}

// JoinedReasons is Reasons comma-joined, as the series' reasons label carries them.
func (m UpcomingMaintenance) JoinedReasons() string { return strings.Join(m.Reasons, ",") }

// Fields of the upcoming-maintenance JSON document.
const (
	fieldType              = "type"
	fieldStatus            = "maintenance_status"
	fieldCanReschedule     = "can_reschedule"
	fieldWindowStart       = "window_start_time"
	fieldWindowEnd         = "window_end_time"
	fieldLatestWindowStart = "latest_window_start_time"
	fieldReasons           = "maintenance_reasons"
)

// ErrNotJSONObject is wrapped by ParseUpcomingMaintenance's error when the document is not a JSON object at all.
var ErrNotJSONObject = errors.New("not a JSON object")

// ParseUpcomingMaintenance reads an upcoming-maintenance document. With nothing announced ("{}", "NONE", empty,
// null) it returns the zero value and no error. A document that is not a JSON object returns the zero value and an
// error wrapping ErrNotJSONObject. Otherwise it returns the maintenance, and an error naming each field it could
// not read: such fields are left out (times, reasons), empty (enums) or unknown (can_reschedule), never guessed.
func ParseUpcomingMaintenance(body string) (UpcomingMaintenance, error) {
	trimmed := strings.TrimSpace(body)
	if trimmed == "" || strings.EqualFold(trimmed, "NONE") || strings.EqualFold(trimmed, `"NONE"`) || trimmed == "null" {
		return UpcomingMaintenance{}, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &doc); err != nil {
		return UpcomingMaintenance{}, fmt.Errorf("upcoming maintenance %s is %w: %w", Quote(trimmed), ErrNotJSONObject, err)
	}
	announced := false
	for _, f := range []string{fieldType, fieldStatus, fieldWindowStart, fieldWindowEnd, fieldLatestWindowStart} {
		if present(doc[f]) {
			announced = true
		}
	}
	if !announced {
		return UpcomingMaintenance{}, nil
	}

	var errs []error
	m := UpcomingMaintenance{Announced: true}
	var err error
	if m.Type, err = enumField(doc, fieldType); err != nil {
		errs = append(errs, err)
	}
	if m.Status, err = enumField(doc, fieldStatus); err != nil {
		errs = append(errs, err)
	}
	if m.CanReschedule, err = canReschedule(doc[fieldCanReschedule]); err != nil {
		errs = append(errs, err)
	}
	if m.Reasons, err = reasons(doc[fieldReasons]); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{
		{fieldWindowStart, &m.WindowStart},
		{fieldWindowEnd, &m.WindowEnd},
		{fieldLatestWindowStart, &m.LatestWindowStart},
	} {
		if *f.dst, err = timeField(doc, f.name); err != nil {
			errs = append(errs, err)
		}
	}
	return m, errors.Join(errs...)
}

// present reports whether a field is there with a value: not missing, null or "".
func present(raw json.RawMessage) bool {
	v := strings.TrimSpace(string(raw))
	return v != "" && v != "null" && v != `""`
}

func stringField(doc map[string]json.RawMessage, field string) (string, error) {
	raw := doc[field]
	if !present(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s %s is not a string", field, Quote(string(raw)))
	}
	return strings.TrimSpace(s), nil
}

func enumField(doc map[string]json.RawMessage, field string) (string, error) {
	s, err := stringField(doc, field)
	if err != nil || s == "" {
		return "", err
	}
	if !IsEnumValue(s) {
		return "", fmt.Errorf("%s %s is not an enum value", field, Quote(s))
	}
	return s, nil
}

func timeField(doc map[string]json.RawMessage, field string) (time.Time, error) {
	s, err := stringField(doc, field)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %s is not an RFC 3339 time", field, Quote(s))
	}
	return t, nil
}

// canReschedule accepts a JSON bool or the strings "true"/"false" in any case (GKE writes a string).
func canReschedule(raw json.RawMessage) (CanReschedule, error) {
	if !present(raw) {
		return CanRescheduleUnknown, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return CanRescheduleUnknown, fmt.Errorf("%s %s is not a boolean", fieldCanReschedule, Quote(string(raw)))
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			b = true
		case "false":
		default:
			return CanRescheduleUnknown, fmt.Errorf("%s %s is not a boolean", fieldCanReschedule, Quote(string(raw)))
		}
	}
	if b {
		return CanRescheduleTrue, nil
	}
	return CanRescheduleFalse, nil
}

// reasons accepts a list of strings (or one string) and returns the valid ones sorted and deduplicated.
func reasons(raw json.RawMessage) ([]string, error) {
	if !present(raw) {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("%s %s is not a list of strings", fieldReasons, Quote(string(raw)))
		}
		list = []string{one}
	}
	var valid []string
	var errs []error
	for _, r := range list {
		r = strings.TrimSpace(r)
		if !IsEnumValue(r) {
			errs = append(errs, fmt.Errorf("%s entry %s is not an enum value", fieldReasons, Quote(r)))
			continue
		}
		valid = append(valid, r)
	}
	slices.Sort(valid)
	return slices.Compact(valid), errors.Join(errs...)
}

// IsEnumValue accepts what a GCE enum value can look like: 1 to MaxEnumLength ASCII letters, digits, and
// _ - . : / or space. Commas are excluded because reasons are comma-joined.
func IsEnumValue(s string) bool {
	if s == "" || len(s) > MaxEnumLength {
		return false
	}
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case strings.ContainsRune("_-.:/ ", r):
		default:
			return false
		}
	}
	return true
}

// Quote renders an untrusted value for an error or log message, cut short.
func Quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q…", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
