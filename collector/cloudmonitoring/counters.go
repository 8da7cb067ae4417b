package cloudmonitoring

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// day is the counting period: every counter is the sum of its series' points whose end time falls in the current UTC
// day, (midnight, next midnight].
const day = 24 * time.Hour

// dayOf is the start of the UTC day a point ending at end belongs to; a point ending at midnight closes the day
// before.
func dayOf(end time.Time) time.Time {
	return end.Add(-time.Nanosecond).UTC().Truncate(day) // UTC, without a monotonic reading: a map key
}

// anchorAt is the start of the day whose counts are exposed at now: the current UTC day, switching lookback after
// midnight, so that the previous day's late points still count in it.
func anchorAt(now time.Time, lookback time.Duration) time.Time {
	return now.Add(-lookback).UTC().Truncate(day)
}

// family turns the points of one interruption metric into counters, one per label set. Every point is a count since
// the previous sample, so a counter is the sum of its series' points of the current day, each added once: a series
// remembers the end times of the points it has counted for as long as a listing may return them again.
//
// A series first seen while running is exposed at zero for one poll interval before its count shows, so that
// Prometheus has a zero sample to compute increase() and rate() from; so is every series that counts in a new day,
// so that the drop to the new day's count always reads as a reset. A series with no point in the current day is
// kept at zero while its latest point is newer than the idle timeout, then dropped.
type family struct {
	desc     *prometheus.Desc
	hold     time.Duration // how long a new series stays at zero
	idle     time.Duration // how long a series without points in the current day is kept
	lookback time.Duration
	anchor   time.Time // the day exposed
	series   map[string]*counter
	key      []byte // scratch for looking series up without allocating
}

type counter struct {
	labels    []string
	counts    map[time.Time]float64 // by day: the exposed one and, just after midnight, the next one
	latest    time.Time             // end time of the latest point
	heldUntil time.Time             // exposed at zero until then
	seen      []time.Time           // end times of counted points a listing may still return
	value     float64               // exposed
	metric    prometheus.Metric
}

func newFamily(desc *prometheus.Desc, hold, idle, lookback time.Duration) *family {
	return &family{desc: desc, hold: hold, idle: idle, lookback: lookback, series: map[string]*counter{}}
}

// observe takes one point of the series with labels. A point whose end time the series has already counted is
// ignored. fresh says the point turned up while running rather than in the first listing after start, so a series it
// creates is new to Prometheus too. labels may be reused by the caller afterwards.
func (f *family) observe(labels []string, end time.Time, value float64, now time.Time, fresh bool) {
	f.key = f.key[:0]
	for _, l := range labels {
		f.key = append(append(f.key, l...), 0xff)
	}
	c := f.series[string(f.key)]
	if c == nil {
		c = &counter{labels: slices.Clone(labels), counts: map[time.Time]float64{}}
		if fresh {
			c.heldUntil = now.Add(f.hold)
		}
		c.metric = f.render(c, anchorAt(now, f.lookback))
		f.series[string(f.key)] = c
	}
	if slices.ContainsFunc(c.seen, end.Equal) {
		return
	}
	c.seen = append(c.seen, end)
	if end.After(c.latest) {
		c.latest = end
	}
	if d := dayOf(end); !d.Before(anchorAt(now, f.lookback)) {
		c.counts[d] += value
	}
}

// commit moves to a new day when one has begun, exposes what is counted, forgets end times not after horizon (no
// listing will return them again), and drops series with no point in the day that have been idle for the idle time.
func (f *family) commit(now, horizon time.Time) {
	anchor := anchorAt(now, f.lookback)
	newDay := !f.anchor.IsZero() && anchor.After(f.anchor)
	f.anchor = anchor
	for key, c := range f.series {
		for d := range c.counts {
			if d.Before(anchor) {
				delete(c.counts, d)
			}
		}
		count, counts := c.counts[anchor]
		if newDay && counts {
			c.heldUntil = now.Add(f.hold)
		}
		c.seen = slices.DeleteFunc(c.seen, func(end time.Time) bool { return !end.After(horizon) })
		if !counts && now.Sub(c.latest) > f.idle {
			if len(c.seen) == 0 {
				delete(f.series, key)
			}
			continue
		}
		if now.Before(c.heldUntil) {
			count = 0
		}
		if count != c.value || newDay || c.metric == nil {
			c.value = count
			c.metric = f.render(c, anchor)
		}
	}
}

func (f *family) render(c *counter, anchor time.Time) prometheus.Metric {
	return prometheus.MustNewConstMetricWithCreatedTimestamp(f.desc, prometheus.CounterValue, c.value, anchor, c.labels...)
}

// metrics appends the family's exposed counters to out.
func (f *family) metrics(out []prometheus.Metric, now time.Time) []prometheus.Metric {
	for _, c := range f.series {
		if _, counts := c.counts[f.anchor]; counts || now.Sub(c.latest) <= f.idle {
			out = append(out, c.metric)
		}
	}
	return out
}
