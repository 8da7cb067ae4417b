package cloudmonitoring

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// family turns the points of one interruption metric into counters, one per label set. Every point is a count since
// the previous sample, so a counter is the sum of its series' points, each added once: a series remembers the end
// times of the points it has counted, for as long as a query may return them again.
//
// A series seen for the first time is exposed at zero for one poll interval before its count shows, so that
// Prometheus has a zero sample to compute increase() and rate() from: a counter born at 1 would hide its first
// interruption from both.
type family struct {
	desc   *prometheus.Desc
	hold   time.Duration // how long a new series stays at zero
	idle   time.Duration // how long a series without new points is kept
	series map[string]*counter
	key    []byte // scratch for looking series up without allocating
}

type counter struct {
	labels     []string
	value      float64 // exposed
	pending    float64 // counted, not yet exposed
	created    time.Time
	lastActive time.Time
	seen       []time.Time // end times of counted points not older than the dedupe horizon
	metric     prometheus.Metric
}

func newFamily(desc *prometheus.Desc, hold, idle time.Duration) *family {
	return &family{desc: desc, hold: hold, idle: idle, series: map[string]*counter{}}
}

// observe takes one point of the series with labels. A point whose end time the series has already counted is
// ignored. While priming (the first successful listing after start) points are only remembered, so a restarted
// exporter does not count again what the previous process exposed: its counters start at zero.
// labels may be reused by the caller afterwards.
func (f *family) observe(labels []string, end time.Time, value float64, now time.Time, priming bool) {
	f.key = f.key[:0]
	for _, l := range labels {
		f.key = append(append(f.key, l...), 0xff)
	}
	c := f.series[string(f.key)]
	if c == nil {
		c = &counter{labels: slices.Clone(labels), created: now, lastActive: now}
		c.metric = f.render(c)
		f.series[string(f.key)] = c
	}
	if slices.ContainsFunc(c.seen, end.Equal) {
		return
	}
	c.seen = append(c.seen, end)
	if priming {
		return
	}
	c.pending += value
	c.lastActive = now
}

// commit exposes pending counts of series older than the hold time, forgets points that ended before horizon (no
// query will return them again), and drops series idle for longer than the idle time that remember no points.
func (f *family) commit(now, horizon time.Time) {
	for key, c := range f.series {
		if c.pending != 0 && !now.Before(c.created.Add(f.hold)) {
			c.value += c.pending
			c.pending = 0
			c.metric = f.render(c)
		}
		c.seen = slices.DeleteFunc(c.seen, func(end time.Time) bool { return end.Before(horizon) })
		if len(c.seen) == 0 && c.pending == 0 && now.Sub(c.lastActive) > f.idle {
			delete(f.series, key)
		}
	}
}

func (f *family) render(c *counter) prometheus.Metric {
	return prometheus.MustNewConstMetricWithCreatedTimestamp(f.desc, prometheus.CounterValue, c.value, c.created, c.labels...)
}

// metrics appends the family's counters to out.
func (f *family) metrics(out []prometheus.Metric) []prometheus.Metric {
	for _, c := range f.series {
		out = append(out, c.metric)
	}
	return out
}
