package googleapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClientOptions(t *testing.T) {
	if _, err := ClientOptions("", true, "--x.endpoint", "--x.insecure"); err == nil ||
		!strings.Contains(err.Error(), "--x.insecure") || !strings.Contains(err.Error(), "--x.endpoint") {
		t.Errorf("plaintext without an endpoint: %v, want an error naming both flags", err)
	}
	for _, tc := range []struct {
		endpoint  string
		plaintext bool
		want      int
	}{{"", false, 0}, {"127.0.0.1:1", false, 1}, {"127.0.0.1:1", true, 3}} {
		if opts, err := ClientOptions(tc.endpoint, tc.plaintext, "e", "p"); err != nil || len(opts) != tc.want {
			t.Errorf("ClientOptions(%q, %t) = %d options, %v; want %d", tc.endpoint, tc.plaintext, len(opts), err, tc.want)
		}
	}
}

func TestCode(t *testing.T) {
	for err, want := range map[error]codes.Code{
		nil: codes.OK,
		status.Error(codes.PermissionDenied, "no"):                            codes.PermissionDenied,
		fmt.Errorf("GetCluster: %w", status.Error(codes.Unavailable, "down")): codes.Unavailable,
		fmt.Errorf("poll: %w", context.DeadlineExceeded):                      codes.DeadlineExceeded,
		context.Canceled:             codes.Canceled,
		errors.New("something else"): codes.Unknown,
	} {
		if got := Code(err); got != want {
			t.Errorf("Code(%v) = %s, want %s", err, got, want)
		}
	}
}
