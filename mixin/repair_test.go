package mixin

import (
	"encoding/json"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// TestHardwareFailureReasonsMatchVocabulary: the alert and the actions service call the same reasons a hardware
// failure.
func TestHardwareFailureReasonsMatchVocabulary(t *testing.T) {
	var got string
	if err := json.Unmarshal([]byte(evaluate(t, `(import 'mixin.libsonnet')._config.hardwareFailureReasons`)), &got); err != nil {
		t.Fatal(err)
	}
	if got != gke.FailureReasonsRegexp {
		t.Errorf("_config.hardwareFailureReasons %q, gke.FailureReasonsRegexp %q", got, gke.FailureReasonsRegexp)
	}
}
