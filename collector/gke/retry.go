package gke

import (
	"google.golang.org/grpc/codes"
)

// retryable codes mean the API is briefly unreachable or throttling: worth trying again before the next interval.
// Other failures (permissions, a disabled API, a wrong cluster) will not heal by themselves and wait for it.
func retryable(code codes.Code) bool {
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
