package cli

import (
	"os"
	"testing"
	"time"
)

// TestMain renders every golden in UTC, whatever the machine's time zone: status prints local time.
func TestMain(m *testing.M) {
	time.Local = time.UTC
	os.Exit(m.Run())
}
