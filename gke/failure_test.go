package gke

import (
	"regexp"
	"strings"
	"testing"
)

func TestHardwareFailure(t *testing.T) {
	re := regexp.MustCompile(`^(?:` + FailureReasonsRegexp + `)$`)
	for _, tc := range []struct {
		reasons []string
		want    bool
	}{
		{nil, false},
		{[]string{"PLANNED_UPDATE"}, false},
		{[]string{"PLANNED_NETWORK_UPDATE", "INFRASTRUCTURE_RELOCATION"}, false},
		{[]string{"FAILURE_GPU"}, true},
		{[]string{"FAILURE_GPU", "FAILURE_GPU_XID"}, true}, // as announced in the field
		{[]string{"PLANNED_UPDATE", "FAILURE_NVLINK"}, true},
		{[]string{"FAILURE_SOMETHING_NEW"}, true},
		{[]string{"failure_gpu"}, true},
		{[]string{"NOT_A_FAILURE_GPU"}, false},
	} {
		if got := HardwareFailure(tc.reasons); got != tc.want {
			t.Errorf("HardwareFailure(%q) = %t, want %t", tc.reasons, got, tc.want)
		}
		// The label the series carry: upper-case reasons joined by commas, as the parser keeps them.
		joined := strings.Join(tc.reasons, ",")
		if joined == strings.ToUpper(joined) && re.MatchString(joined) != tc.want {
			t.Errorf("FailureReasonsRegexp on %q = %t, want %t", joined, !tc.want, tc.want)
		}
	}
}

func TestGPUFailure(t *testing.T) {
	for reasons, want := range map[string]bool{"FAILURE_GPU_XID,FAILURE_GPU": true, "failure_gpu": true,
		"FAILURE_MEMORY": false, "PLANNED_UPDATE": false, "": false} {
		if got := GPUFailure(strings.Split(reasons, ",")); got != want {
			t.Errorf("GPUFailure(%s) = %v, want %v", reasons, got, want)
		}
	}
}
