package cloudmonitoring

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryable codes mean the API is briefly unreachable or throttling: worth trying again before the next interval,
// backing off. Other failures (permissions, a bad filter) will not heal by themselves and wait for the interval.
func retryable(code codes.Code) bool {
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// backoff is the wait before the retry after the given number of consecutive failures: it doubles from a sixteenth
// of the interval up to four intervals, and jitter (in [0, 1)) spreads it over its upper half so that exporters
// throttled together do not retry together.
func backoff(interval time.Duration, failures int, jitter float64) time.Duration {
	d := interval / 16
	limit := 4 * interval
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + time.Duration(jitter*float64(d/2))
}

// retryDelay is the wait the server asked for in the error's RetryInfo (quota errors carry one: retrying sooner
// falls into the same quota period), or 0.
func retryDelay(err error) time.Duration {
	s, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0)
		}
	}
	return 0
}
