// Package metadata is the node agent's collector: it watches the instance's own GCE metadata server
// (instance/maintenance-event, instance/upcoming-maintenance, instance/preempted) with hanging GETs and serves the
// gce_instance_* series from the last answers.
package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Config tunes the watch loops; zero fields take the defaults.
type Config struct {
	// TimeoutSec is the timeout_sec of a hanging GET: how long the server holds a request without a change.
	TimeoutSec int
	// Slack is how much longer than TimeoutSec a hanging GET may take, and how long a plain GET may take, before
	// the request is abandoned: a dead connection is noticed within TimeoutSec + Slack.
	Slack time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential wait after a failed request. MaxBackoff is short by
	// default: a failing path is blind, and the server answering again must be noticed within a second.
	MinBackoff, MaxBackoff time.Duration
	// MaxIdlePoll bounds the growing wait between requests of a path the server answers at once without a change
	// (upcoming-maintenance's "nothing scheduled" 503 ignores wait_for_change).
	MaxIdlePoll time.Duration
	// UnsupportedRecheck is how often upcoming-maintenance is asked again after a 404.
	UnsupportedRecheck time.Duration
}

func (c Config) withDefaults() Config {
	if c.TimeoutSec <= 0 {
		c.TimeoutSec = 60
	}
	if c.Slack <= 0 {
		c.Slack = 3 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(time.Second, c.MinBackoff)
	}
	if c.MaxIdlePoll < c.MinBackoff {
		c.MaxIdlePoll = max(30*time.Second, c.MinBackoff)
	}
	if c.UnsupportedRecheck <= 0 {
		c.UnsupportedRecheck = 10 * time.Minute
	}
	return c
}

var (
	maintenanceEventDesc = prometheus.NewDesc("gce_instance_maintenance_event",
		"Host maintenance event of the instance (instance/maintenance-event); it changes about 60 s before the event.",
		[]string{"node", "event"}, nil)
	preemptedDesc = prometheus.NewDesc("gce_instance_preempted",
		"Whether the Spot or preemptible instance has been preempted (instance/preempted).",
		[]string{"node"}, nil)
	upcomingInfoDesc = prometheus.NewDesc("gce_instance_upcoming_maintenance_info",
		"Maintenance scheduled for the instance (instance/upcoming-maintenance); absent when none.",
		[]string{"node", "type", "status", "can_reschedule", "reasons"}, nil)
	windowStartDesc = prometheus.NewDesc("gce_instance_upcoming_maintenance_window_start_timestamp_seconds",
		"Start of the upcoming maintenance window.",
		[]string{"node"}, nil)
	windowEndDesc = prometheus.NewDesc("gce_instance_upcoming_maintenance_window_end_timestamp_seconds",
		"End of the upcoming maintenance window.",
		[]string{"node"}, nil)
	latestWindowStartDesc = prometheus.NewDesc("gce_instance_upcoming_maintenance_latest_window_start_timestamp_seconds",
		"Latest time the upcoming maintenance window may start.",
		[]string{"node"}, nil)
)

// state is the instance as the last answers describe it. Empty or nil fields have no series.
type state struct {
	event          string
	preemptedKnown bool
	preempted      bool
	upcoming       gke.UpcomingMaintenance
}

// watchedPath is one metadata key and how its answers change the state. apply with ok false clears what the path
// contributes (nothing scheduled, or not served).
type watchedPath struct {
	name string
	// optional says the path may be missing on some VMs: its "nothing scheduled" answers (a 503 that says no
	// notifications were received) and a 404 (not served) are answers, not failures. On the other paths a 404 is a
	// failure like any other: the state is kept and the path asked again, since GCE gives the maintenance-event
	// warning only if the key was queried.
	optional bool
	apply    func(s *state, body string, ok bool) error
}

const (
	pathMaintenanceEvent    = "instance/maintenance-event"
	pathUpcomingMaintenance = "instance/upcoming-maintenance"
	pathPreempted           = "instance/preempted"
)

var watchedPaths = []watchedPath{
	{name: pathMaintenanceEvent, apply: func(s *state, body string, ok bool) error {
		s.event = ""
		if !ok {
			return nil
		}
		event, err := parseMaintenanceEvent(body)
		s.event = event
		return err
	}},
	{name: pathUpcomingMaintenance, optional: true, apply: func(s *state, body string, ok bool) error {
		s.upcoming = gke.UpcomingMaintenance{}
		if !ok {
			return nil
		}
		var err error
		s.upcoming, err = gke.ParseUpcomingMaintenance(body)
		return err
	}},
	{name: pathPreempted, apply: func(s *state, body string, ok bool) error {
		s.preemptedKnown, s.preempted = false, false
		if !ok {
			return nil
		}
		preempted, err := parsePreempted(body)
		s.preemptedKnown, s.preempted = err == nil, preempted
		return err
	}},
}

// Collector serves the gce_instance_* series of one node. Run keeps its state current; Update only reads it.
type Collector struct {
	logger *slog.Logger
	node   string
	cfg    Config
	client *client

	mu         sync.Mutex
	state      state
	lastAnswer map[string]answer
	unreadable map[string]error // why a path's last value could not be read in full; nil when it could
	failing    map[string]error // paths whose latest request failed, or that have not answered yet
	changed    chan struct{}
	ready      chan struct{}

	requests    *prometheus.CounterVec
	lastChange  *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	parseErrors *prometheus.CounterVec
	supported   *prometheus.GaugeVec
}

// New builds the collector for node (the value of label node). Its self-monitoring series register with reg.
func New(logger *slog.Logger, node string, reg prometheus.Registerer, cfg Config) (*Collector, error) {
	if node == "" || !utf8.ValidString(node) {
		return nil, fmt.Errorf("metadata collector: node name %q is empty or not UTF-8", node)
	}
	cfg = cfg.withDefaults()
	c := &Collector{
		logger:     logger,
		node:       node,
		cfg:        cfg,
		lastAnswer: map[string]answer{},
		unreadable: map[string]error{},
		failing:    map[string]error{},
		changed:    make(chan struct{}),
		ready:      make(chan struct{}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace, Subsystem: "metadata", Name: "requests_total",
			Help: "Requests to the metadata server by path and HTTP status (error: no answer).",
		}, []string{"path", "code"}),
		lastChange: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace, Subsystem: "metadata", Name: "last_change_timestamp_seconds",
			Help: "When the agent last saw the value of a path change, its first answer included.",
		}, []string{"path"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace, Subsystem: "metadata", Name: "last_success_timestamp_seconds",
			Help: "When the metadata server last answered a request for a path with a value the agent could read (a hanging GET answers at least every timeout_sec).",
		}, []string{"path"}),
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace, Subsystem: "metadata", Name: "parse_errors_total",
			Help: "Metadata values that could not be read in full, counted once per value seen.",
		}, []string{"path"}),
		supported: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace, Subsystem: "metadata", Name: "path_supported",
			Help: "Whether the metadata server serves a path (0 after a 404); absent before its first answer.",
		}, []string{"path"}),
	}
	for _, p := range watchedPaths {
		c.parseErrors.WithLabelValues(p.name)
		c.failing[p.name] = errNotAnswered
	}
	for _, m := range []prometheus.Collector{c.requests, c.lastChange, c.lastSuccess, c.parseErrors, c.supported} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	c.client = newClient(c.requests, cfg.TimeoutSec, cfg.Slack)
	return c, nil
}

// Ready is closed once every watched path has answered.
func (c *Collector) Ready() <-chan struct{} { return c.ready }

// Changed returns a channel closed at the next change of an answer.
func (c *Collector) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

var errNotAnswered = errors.New("no answer yet")

// Update emits the series of the current state. It fails while any path's latest request failed: the series then
// show the last known state, which may be stale.
func (c *Collector) Update(ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	s := c.state
	var errs []error
	for _, p := range watchedPaths {
		if err := c.failing[p.name]; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		}
	}
	c.mu.Unlock()

	if s.event != "" {
		ch <- prometheus.MustNewConstMetric(maintenanceEventDesc, prometheus.GaugeValue, 1, c.node, s.event)
	}
	if s.preemptedKnown {
		v := 0.0
		if s.preempted {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(preemptedDesc, prometheus.GaugeValue, v, c.node)
	}
	if m := s.upcoming; m.Announced {
		ch <- prometheus.MustNewConstMetric(upcomingInfoDesc, prometheus.GaugeValue, 1,
			c.node, m.Type, m.Status, m.CanReschedule.LabelValue(), m.JoinedReasons())
		for desc, t := range map[*prometheus.Desc]time.Time{
			windowStartDesc:       m.WindowStart,
			windowEndDesc:         m.WindowEnd,
			latestWindowStartDesc: m.LatestWindowStart,
		} {
			if !t.IsZero() {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, epochSeconds(t), c.node)
			}
		}
	}
	return errors.Join(errs...)
}

func epochSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
