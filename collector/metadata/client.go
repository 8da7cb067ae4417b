package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
)

// maxBodyBytes bounds a metadata answer; the watched values are a few hundred bytes.
const maxBodyBytes = 64 << 10

var errBodyTooLarge = fmt.Errorf("metadata answer larger than %d bytes", maxBodyBytes)

// reply is one answer of the metadata server.
type reply struct {
	status   int
	body     string
	etag     string
	tooLarge bool // a 200 whose body exceeded maxBodyBytes: a value, but an unreadable one
}

// client issues metadata requests itself, one attempt each, with the headers cloud.google.com/go/compute/metadata
// sends and the host it resolves ($GCE_METADATA_HOST, else the link-local address). The library is not used: it
// retries timeouts and 5xx answers several times inside one call, which hides a dead server for minutes, and it
// returns neither the ETag nor the status a hanging-GET loop needs. Every attempt is counted, and each has a
// deadline of the hanging GET's timeout plus a slack, so a connection that died silently is noticed.
type client struct {
	http       *http.Client
	base       string
	timeoutSec int
	slack      time.Duration
	requests   *prometheus.CounterVec
}

// metadataHost is where the metadata server listens, as the Google libraries resolve it.
func metadataHost() string {
	if h := os.Getenv("GCE_METADATA_HOST"); h != "" {
		return h
	}
	return "169.254.169.254"
}

// newTransport dials the metadata server directly: it is only reachable from the VM itself, never via a proxy.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		MaxIdleConnsPerHost: len(watchedPaths) + 1,
		IdleConnTimeout:     90 * time.Second,
	}
}

func newClient(requests *prometheus.CounterVec, timeoutSec int, slack time.Duration) *client {
	return &client{
		http:       &http.Client{Transport: newTransport()},
		base:       "http://" + metadataHost() + "/computeMetadata/v1/",
		timeoutSec: timeoutSec,
		slack:      slack,
		requests:   requests,
	}
}

// get reads path. With wait it is a hanging GET: the server answers when the value's ETag differs from lastETag
// (or, without one, when the value changes), or after timeoutSec with the current value. An error is a failure
// to get any answer in time; error statuses come back as a reply.
func (c *client) get(ctx context.Context, path, lastETag string, wait bool) (reply, error) {
	target := c.base + path
	deadline := c.slack
	if wait {
		q := url.Values{"wait_for_change": {"true"}, "timeout_sec": {strconv.Itoa(c.timeoutSec)}}
		if lastETag != "" {
			q.Set("last_etag", lastETag)
		}
		target += "?" + q.Encode()
		deadline += time.Duration(c.timeoutSec) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	r, err := c.do(ctx, target)
	code := "error"
	if err == nil {
		code = strconv.Itoa(r.status)
	}
	c.requests.WithLabelValues(path, code).Inc()
	return r, err
}

func (c *client) do(ctx context.Context, target string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	req.Header.Set("User-Agent", "gke-disruption-exporter/"+version.Version)
	res, err := c.http.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	// One byte more than the limit tells an answer of exactly the limit from a longer one.
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBodyBytes+1))
	if err != nil {
		return reply{}, fmt.Errorf("reading the answer: %w", err)
	}
	r := reply{status: res.StatusCode, etag: res.Header.Get("ETag")}
	if len(body) > maxBodyBytes {
		if r.status == http.StatusOK {
			r.tooLarge = true
			return r, nil
		}
		body = body[:maxBodyBytes]
	}
	r.body = string(body)
	if r.status != http.StatusOK {
		r.body = strings.TrimSpace(r.body)
	}
	return r, nil
}

// NoServer reports whether err means no metadata server answered at all: nothing listens at its address, or its
// host name does not resolve (not on GCE). A server that answers with an error, or too slowly, is not that.
func NoServer(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return !dnsErr.IsTimeout
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial" && !opErr.Timeout()
}

// StatusError is an answer other than 200 or 404 from the metadata server.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("status %d: %s", e.Code, quote(e.Body)) }

// Refused reports whether err is an answer that will not change by asking again: a client error other than 404 and
// 429. GCE's metadata server answers 403 only to a request without Metadata-Flavor, which this client always sends,
// so a 403 comes from something else at its address (a proxy, a sandbox), not from a server that is starting.
func Refused(err error) bool {
	var s *StatusError
	return errors.As(err, &s) && s.Code >= 400 && s.Code < 500 && s.Code != http.StatusNotFound && s.Code != http.StatusTooManyRequests
}

// Attributes reads the instance attributes named by keys (instance/attributes/<key>), one attempt each within
// timeout. A key that is not defined reads as "".
func Attributes(ctx context.Context, timeout time.Duration, keys ...string) (map[string]string, error) {
	c := &client{http: &http.Client{Transport: newTransport()}, base: "http://" + metadataHost() + "/computeMetadata/v1/"}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := map[string]string{}
	var errs []error
	for _, key := range keys {
		r, err := c.do(ctx, c.base+"instance/attributes/"+key)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("instance/attributes/%s: %w", key, err))
		case r.status == http.StatusNotFound:
			out[key] = ""
		case r.status != http.StatusOK:
			errs = append(errs, fmt.Errorf("instance/attributes/%s: %w", key, &StatusError{Code: r.status, Body: r.body}))
		default:
			out[key] = strings.TrimSpace(r.body)
		}
	}
	return out, errors.Join(errs...)
}
