package main

import (
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestRepairsResetCommand runs repairs reset as a process: nothing tripped is exit 0 and says so; a breaker named
// but not tripped, or a bad --actions.lease, is exit 2 and one line.
func TestRepairsResetCommand(t *testing.T) {
	api := testenv.StartAPIServer(t)
	code, stdout, stderr := runMain(t, "repairs", "reset", "--kubeconfig="+api.Kubeconfig, "--actions.lease=default/actions")
	if code != 0 || !strings.Contains(stdout, "no circuit breaker is tripped") || stderr != "" {
		t.Errorf("nothing tripped: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runMain(t, "repairs", "reset", "--kubeconfig="+api.Kubeconfig, "--actions.lease=default/actions", "--pool=training")
	if code != 2 {
		t.Errorf("a breaker not tripped: exit %d", code)
	}
	oneLine(t, stderr, "repairs reset", "not tripped: pool/training")
	code, _, stderr = runMain(t, "repairs", "reset", "--kubeconfig="+api.Kubeconfig, "--actions.lease=actions")
	if code != 2 {
		t.Errorf("a bad --actions.lease: exit %d", code)
	}
	oneLine(t, stderr, "repairs reset", "want NAMESPACE/NAME")
}
