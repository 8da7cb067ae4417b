package gke

import "testing"

func TestParseMaintenanceTime(t *testing.T) {
	for value, want := range map[string]int64{"1733040000": 1733040000, "0": 0, "253402300799": 253402300799} {
		if got, ok := ParseMaintenanceTime(value); !ok || got != want {
			t.Errorf("ParseMaintenanceTime(%q) = %d, %v; want %d", value, got, ok, want)
		}
	}
	for _, value := range []string{"", "tomorrow", "-5", "1733040000.5", " 1", "253402300800", "99999999999999"} {
		if got, ok := ParseMaintenanceTime(value); ok {
			t.Errorf("ParseMaintenanceTime(%q) = %d, want not ok", value, got)
		}
	}
}

func TestMaintenanceState(t *testing.T) {
	for value, want := range map[string]string{"ONGOING": "ongoing", "terminating": "terminating", "passthrough": "passthrough", "": ""} {
		if got := MaintenanceState(map[string]string{LabelActiveNodeMaintenance: value}); got != want {
			t.Errorf("MaintenanceState(%q) = %q, want %q", value, got, want)
		}
	}
}

func TestOpportunisticTriggered(t *testing.T) {
	for value, want := range map[string]bool{
		"opportunistic-triggered: true":          true,
		`{"opportunistic-triggered": "true"}`:    true,
		"opportunistic-triggered=true":           true,
		"Opportunistic-Triggered":                true,
		"other: x, opportunistic-triggered:true": true,
		"opportunistic-triggered: false":         false,
		"":                                       false,
		"garbage\x00":                            false,
	} {
		got := OpportunisticTriggered(map[string]string{AnnotationMaintenanceState: value})
		if got != want {
			t.Errorf("OpportunisticTriggered(%q) = %v, want %v", value, got, want)
		}
	}
	if OpportunisticTriggered(nil) {
		t.Error("no annotation must not count as triggered")
	}
}
