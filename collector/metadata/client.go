package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	gcemetadata "cloud.google.com/go/compute/metadata"
	"github.com/prometheus/client_golang/prometheus"
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

// client issues metadata requests through the cloud.google.com/go/compute/metadata client, which resolves
// GCE_METADATA_HOST, sets Metadata-Flavor and retries transient failures. Its public API returns neither the ETag
// nor the status of an answer, which a hanging-GET loop needs, so a RoundTripper under it observes both and hands
// them back through the request's context. The same RoundTripper counts every attempt, the library's retries
// included, and bounds the size of an answer.
type client struct {
	md         *gcemetadata.Client
	timeoutSec int
}

// observation is what the RoundTripper saw of the last attempt of one call.
type observation struct {
	status int
	etag   string
}

type observationKey struct{}

// pathKey carries the watched path (without query) to the RoundTripper for the requests_total label.
type pathKey struct{}

type observingTransport struct {
	base     http.RoundTripper
	requests *prometheus.CounterVec
}

func (t *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	path, _ := req.Context().Value(pathKey{}).(string)
	res, err := t.base.RoundTrip(req)
	if err != nil {
		t.requests.WithLabelValues(path, "error").Inc()
		return nil, err
	}
	t.requests.WithLabelValues(path, strconv.Itoa(res.StatusCode)).Inc()
	if o, ok := req.Context().Value(observationKey{}).(*observation); ok {
		o.status, o.etag = res.StatusCode, res.Header.Get("ETag")
	}
	res.Body = &limitedBody{ReadCloser: res.Body, left: maxBodyBytes}
	return res, nil
}

// limitedBody fails a read past its limit, so an endless answer cannot exhaust memory.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly the limit from a longer one.
		var probe [1]byte
		if n, _ := b.ReadCloser.Read(probe[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

func newClient(logger *slog.Logger, requests *prometheus.CounterVec, timeoutSec int, requestTimeout time.Duration) *client {
	base := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: len(watchedPaths),
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{
		Transport: &observingTransport{base: base, requests: requests},
		Timeout:   requestTimeout,
	}
	return &client{
		md:         gcemetadata.NewWithOptions(&gcemetadata.Options{Client: hc, Logger: logger}),
		timeoutSec: timeoutSec,
	}
}

// get reads path. With wait it is a hanging GET: the server answers when the value's ETag differs from lastETag
// (or, without one, when the value changes), or after timeoutSec with the current value. An error is a failure
// to get any answer; error statuses come back as a reply.
func (c *client) get(ctx context.Context, path, lastETag string, wait bool) (reply, error) {
	suffix := path
	if wait {
		q := url.Values{"wait_for_change": {"true"}, "timeout_sec": {strconv.Itoa(c.timeoutSec)}}
		if lastETag != "" {
			q.Set("last_etag", lastETag)
		}
		suffix += "?" + q.Encode()
	}
	var seen observation
	ctx = context.WithValue(context.WithValue(ctx, pathKey{}, path), observationKey{}, &seen)
	body, err := c.md.GetWithContext(ctx, suffix)
	var notDefined gcemetadata.NotDefinedError
	var status *gcemetadata.Error
	switch {
	case err == nil:
		return reply{status: http.StatusOK, body: body, etag: seen.etag}, nil
	case errors.As(err, &notDefined):
		return reply{status: http.StatusNotFound}, nil
	case errors.As(err, &status):
		return reply{status: status.Code, body: status.Message}, nil
	case errors.Is(err, errBodyTooLarge) && seen.status == http.StatusOK:
		return reply{status: http.StatusOK, etag: seen.etag, tooLarge: true}, nil
	default:
		return reply{}, err
	}
}
