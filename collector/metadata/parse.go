package metadata

import (
	"fmt"
	"strings"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// maxEnumLength bounds a value passed through as a label: enum values are short, anything longer is garbage.
const maxEnumLength = gke.MaxEnumLength

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

// isEnum accepts what an enum value of the metadata server can look like (gke.IsEnumValue).
func isEnum(s string) bool { return gke.IsEnumValue(s) }

// quote renders an untrusted value for an error message, cut short.
func quote(s string) string { return gke.Quote(s) }
