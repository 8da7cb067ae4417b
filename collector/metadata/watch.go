package metadata

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// outcome is what an answer means for a path.
type outcome int

const (
	outcomeValue       outcome = iota // 200: a value, possibly unreadable
	outcomeNothing                    // optional path, 503 saying no notifications were received: nothing scheduled
	outcomeUnsupported                // optional path, 404: the server does not serve it
	outcomeFailure                    // no answer, or an error status: keep what is known and retry soon
)

// answer identifies an answer; a repeat of the last one changes nothing.
type answer struct {
	outcome  outcome
	body     string
	tooLarge bool
}

func classify(p watchedPath, r reply, err error) outcome {
	switch {
	case err != nil:
		return outcomeFailure
	case r.status == http.StatusOK:
		return outcomeValue
	case r.status == http.StatusNotFound && p.optional:
		return outcomeUnsupported
	case r.status == http.StatusServiceUnavailable && p.optional &&
		strings.Contains(strings.ToLower(r.body), "notification"):
		return outcomeNothing
	default:
		return outcomeFailure
	}
}

// Run watches every path until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range watchedPaths {
		wg.Go(func() { c.watch(ctx, p) })
	}
	wg.Wait()
}

// watch keeps one path current with hanging GETs: the first request reads the value, each next one waits for it to
// differ from the last ETag, so a change arrives within one round trip. Failures are retried within MaxBackoff, so
// the value is read again within about a second of the server answering again. A server that answers a hanging GET
// at once without a change (it ignores wait_for_change) is asked again after a growing pause, so the loop never
// spins.
func (c *Collector) watch(ctx context.Context, p watchedPath) {
	logger := c.logger.With("path", p.name)
	failures := backoff{min: c.cfg.MinBackoff, max: c.cfg.MaxBackoff}
	idle := backoff{min: c.cfg.MinBackoff, max: c.cfg.MaxIdlePoll}
	held := time.Duration(c.cfg.TimeoutSec) * time.Second / 2
	var (
		etag string
		hang bool
	)
	for {
		begin := time.Now()
		r, err := c.client.get(ctx, p.name, etag, hang)
		if ctx.Err() != nil {
			return
		}
		out := classify(p, r, err)
		if out == outcomeFailure {
			c.fail(logger, p, r, err)
			// Read the value once, plainly, before waiting again: a hanging GET with the ETag from before the
			// failure would not answer until the value changes or the wait times out, so success (and any change
			// made meanwhile) would show only then.
			hang = false
			if !sleep(ctx, failures.next()) {
				return
			}
			continue
		}
		failures.reset()
		changed := c.record(logger, p, out, r)
		var pause time.Duration
		switch {
		case out == outcomeUnsupported:
			etag, hang = "", false
			pause = jitter(c.cfg.UnsupportedRecheck)
		case hang && !changed && time.Since(begin) < held:
			etag = r.etag
			pause = idle.next()
		default:
			etag, hang = r.etag, true
			idle.reset()
		}
		if !sleep(ctx, pause) {
			return
		}
	}
}

// fail notes that the latest request for p got no usable answer; the state is kept.
func (c *Collector) fail(logger *slog.Logger, p watchedPath, r reply, err error) {
	if err == nil {
		err = fmt.Errorf("status %d: %s", r.status, quote(r.body))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.failing[p.name]; prev == nil || prev == errNotAnswered {
		logger.Warn("metadata request failed; keeping the last known value and retrying", "err", err)
	}
	c.failing[p.name] = err
}

// record applies an answer to the state; it reports whether the answer differs from the path's last one. A value
// that cannot be read in full fails the path, as no answer would, for as long as the server keeps giving it.
func (c *Collector) record(logger *slog.Logger, p watchedPath, out outcome, r reply) bool {
	a := answer{outcome: out, body: r.body, tooLarge: r.tooLarge}
	c.mu.Lock()
	defer c.mu.Unlock()
	last, answered := c.lastAnswer[p.name]
	if answered && last == a {
		c.settleLocked(logger, p, c.unreadable[p.name])
		return false
	}
	c.lastAnswer[p.name] = a

	var err error
	switch {
	case out == outcomeValue && r.tooLarge:
		err = p.apply(&c.state, "", false)
		if err == nil {
			err = errBodyTooLarge
		}
	case out == outcomeValue:
		err = p.apply(&c.state, r.body, true)
	default:
		err = p.apply(&c.state, "", false)
	}
	if err != nil {
		c.parseErrors.WithLabelValues(p.name).Inc()
		logger.Warn("ignoring what cannot be read of a metadata value", "err", err)
	}
	c.unreadable[p.name] = err
	c.settleLocked(logger, p, err)
	if out == outcomeUnsupported {
		logger.Info("metadata server does not serve this path; its series stay absent")
		c.supported.WithLabelValues(p.name).Set(0)
	} else {
		c.supported.WithLabelValues(p.name).Set(1)
	}
	c.lastChange.WithLabelValues(p.name).SetToCurrentTime()

	if !answered && len(c.lastAnswer) == len(watchedPaths) {
		close(c.ready)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return true
}

// settleLocked notes that p answered: a success, or, when its value could not be read, a failure whose last
// success stays where it was.
func (c *Collector) settleLocked(logger *slog.Logger, p watchedPath, unreadable error) {
	prev := c.failing[p.name]
	if unreadable != nil {
		c.failing[p.name] = fmt.Errorf("unreadable value: %w", unreadable)
		return
	}
	if prev != nil && prev != errNotAnswered {
		logger.Info("metadata server answers again")
	}
	c.failing[p.name] = nil
	c.lastSuccess.WithLabelValues(p.name).SetToCurrentTime()
}

// backoff is a jittered exponential wait.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return jitter(b.cur)
}

func (b *backoff) reset() { b.cur = 0 }

// jitter spreads d over [d/2, d], so agents on many nodes do not retry in step.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
