package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxEnumLength bounds a value passed through as a label: enum values are short, anything longer is garbage.
const maxEnumLength = 64

// parseMaintenanceEvent reads instance/maintenance-event. Values other than the documented NONE,
// MIGRATE_ON_HOST_MAINTENANCE and TERMINATE_ON_HOST_MAINTENANCE pass through when they look like an enum value.
func parseMaintenanceEvent(body string) (string, error) {
	v := strings.TrimSpace(body)
	if !isEnum(v) {
		return "", fmt.Errorf("maintenance event %s is not an enum value", quote(v))
	}
	return v, nil
}

// parsePreempted reads instance/preempted: TRUE or FALSE.
func parsePreempted(body string) (bool, error) {
	switch v := strings.TrimSpace(body); strings.ToUpper(v) {
	case "TRUE":
		return true, nil
	case "FALSE":
		return false, nil
	default:
		return false, fmt.Errorf("preempted %s is neither TRUE nor FALSE", quote(v))
	}
}

// upcomingMaintenance is what the series need of instance/upcoming-maintenance. Zero times are absent or
// unreadable ones.
type upcomingMaintenance struct {
	Type              string
	Status            string
	CanReschedule     string // "true" or "false"
	Reasons           string // sorted, comma-joined
	WindowStart       time.Time
	WindowEnd         time.Time
	LatestWindowStart time.Time
}

// Fields of the instance/upcoming-maintenance JSON document.
const (
	fieldType              = "type"
	fieldStatus            = "maintenance_status"
	fieldCanReschedule     = "can_reschedule"
	fieldWindowStart       = "window_start_time"
	fieldWindowEnd         = "window_end_time"
	fieldLatestWindowStart = "latest_window_start_time"
	fieldReasons           = "maintenance_reasons"
)

// parseUpcomingMaintenance reads instance/upcoming-maintenance. With nothing scheduled ("{}", "NONE", empty) it
// returns nil and no error. A document that is not a JSON object returns nil and an error. Otherwise it returns the
// maintenance, and an error naming each field it could not read: such fields are left out (times), empty (enums)
// or "false" (can_reschedule), never guessed.
func parseUpcomingMaintenance(body string) (*upcomingMaintenance, error) {
	trimmed := strings.TrimSpace(body)
	if trimmed == "" || strings.EqualFold(trimmed, "NONE") || strings.EqualFold(trimmed, `"NONE"`) || trimmed == "null" {
		return nil, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &doc); err != nil {
		return nil, fmt.Errorf("upcoming maintenance %s is not a JSON object: %w", quote(trimmed), err)
	}
	if doc == nil {
		return nil, nil
	}
	scheduled := false
	for _, f := range []string{fieldType, fieldStatus, fieldWindowStart, fieldWindowEnd, fieldLatestWindowStart} {
		if present(doc[f]) {
			scheduled = true
		}
	}
	if !scheduled {
		return nil, nil
	}

	var errs []error
	m := &upcomingMaintenance{}
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
	for f, dst := range map[string]*time.Time{
		fieldWindowStart:       &m.WindowStart,
		fieldWindowEnd:         &m.WindowEnd,
		fieldLatestWindowStart: &m.LatestWindowStart,
	} {
		if *dst, err = timeField(doc, f); err != nil {
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
		return "", fmt.Errorf("%s %s is not a string", field, quote(string(raw)))
	}
	return strings.TrimSpace(s), nil
}

func enumField(doc map[string]json.RawMessage, field string) (string, error) {
	s, err := stringField(doc, field)
	if err != nil || s == "" {
		return "", err
	}
	if !isEnum(s) {
		return "", fmt.Errorf("%s %s is not an enum value", field, quote(s))
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
		return time.Time{}, fmt.Errorf("%s %s is not an RFC 3339 time", field, quote(s))
	}
	return t, nil
}

// canReschedule accepts a JSON bool or the strings "true"/"false" in any case; missing means "false".
func canReschedule(raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "false", nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return fmt.Sprint(b), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			return "true", nil
		case "false":
			return "false", nil
		}
	}
	return "false", fmt.Errorf("%s %s is not a boolean", fieldCanReschedule, quote(string(raw)))
}

// reasons accepts a list of strings (or one string) and returns the valid ones sorted, deduplicated and
// comma-joined.
func reasons(raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return "", fmt.Errorf("%s %s is not a list of strings", fieldReasons, quote(string(raw)))
		}
		list = []string{one}
	}
	var valid []string
	var errs []error
	for _, r := range list {
		r = strings.TrimSpace(r)
		if !isEnum(r) {
			errs = append(errs, fmt.Errorf("%s entry %s is not an enum value", fieldReasons, quote(r)))
			continue
		}
		valid = append(valid, r)
	}
	slices.Sort(valid)
	return strings.Join(slices.Compact(valid), ","), errors.Join(errs...)
}

// isEnum accepts what an enum value of the metadata server can look like: 1 to 64 ASCII letters, digits, and
// _ - . : / or space. Commas are excluded because reasons are comma-joined.
func isEnum(s string) bool {
	if s == "" || len(s) > maxEnumLength {
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

// quote renders an untrusted value for an error message, cut short.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q…", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
