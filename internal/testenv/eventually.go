package testenv

import (
	"testing"
	"time"
)

// Eventually polls check until it returns nil, failing the test with step and the last error after timeout.
// Tests wait on outcomes this way, never on sleeps sized to a machine's speed.
func Eventually(t testing.TB, timeout time.Duration, step string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v: %v", step, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
