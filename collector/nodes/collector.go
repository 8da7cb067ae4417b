package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// DefaultFailureGrace is how long list/watch may fail before the collector reports failure: long enough for an
// API server restart or a rolling upgrade, short enough that series nobody refreshes are flagged.
const DefaultFailureGrace = time.Minute

// Option changes a Collector's defaults.
type Option func(*Collector)

// WithFailureGrace sets how long list/watch may fail before gke_disruption_collector_success{collector="nodes"} is 0.
func WithFailureGrace(d time.Duration) Option { return func(c *Collector) { c.failureGrace = d } }

// Collector serves the gke_node_* series from a Node informer.
type Collector struct {
	logger       *slog.Logger
	informer     cache.SharedIndexInformer
	handler      cache.ResourceEventHandlerRegistration
	store        *store
	parseErrors  *prometheus.CounterVec
	watchErrors  prometheus.Counter
	failureGrace time.Duration
	now          func() time.Time
	// beforeEvent, when set (tests), runs before the handler applies each event.
	beforeEvent func()

	mu           sync.Mutex
	failingSince time.Time // zero while list/watch works
	lastErr      error     // the last list/watch error, counted already
}

// New builds the collector; Run starts its watch. Its parse-error and watch-error counters register with reg.
func New(logger *slog.Logger, client kubernetes.Interface, reg prometheus.Registerer, opts ...Option) (*Collector, error) {
	c := &Collector{
		logger:       logger,
		store:        newStore(),
		failureGrace: DefaultFailureGrace,
		now:          time.Now,
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "node_label_parse_errors_total",
			Help:      "Node label and annotation values that could not be read, counted once per value seen.",
		}, []string{"label"}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace:   nodeview.Namespace,
			Name:        "watch_errors_total",
			Help:        "Failed list or watch requests and broken watches of the Kubernetes API.",
			ConstLabels: prometheus.Labels{"resource": "nodes"},
		}),
	}
	for _, o := range opts {
		o(c)
	}
	c.parseErrors.WithLabelValues(gke.LabelScheduledMaintenanceTime)
	c.parseErrors.WithLabelValues(gke.AnnotationUpcomingMaintenance)
	for _, m := range []prometheus.Collector{c.parseErrors, c.watchErrors} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}

	nodes := client.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := nodes.List(ctx, opts)
			c.observe(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := nodes.Watch(ctx, opts)
			c.observe(err)
			return w, err
		},
	}
	// No indexers: the collector only walks its own store.
	c.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Node{},
		cache.SharedIndexInformerOptions{ObjectDescription: "nodes"})
	if err := c.informer.SetTransform(Transform); err != nil {
		return nil, err
	}
	if err := c.informer.SetWatchErrorHandlerWithContext(c.watchError); err != nil {
		return nil, err
	}
	var err error
	c.handler, err = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.apply(nil, obj) },
		UpdateFunc: c.apply,
		DeleteFunc: func(obj any) {
			c.event()
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if r, ok := obj.(*record); ok {
				c.store.delete(r.name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Collector) event() {
	if c.beforeEvent != nil {
		c.beforeEvent()
	}
}

// apply stores a node added or changed. A bad value is logged and counted once, when it first appears.
func (c *Collector) apply(oldObj, newObj any) {
	c.event()
	r, ok := newObj.(*record)
	if !ok {
		return
	}
	old, _ := oldObj.(*record)
	for _, e := range r.bad {
		if old != nil && containsError(old.bad, e) {
			continue
		}
		c.parseErrors.WithLabelValues(e.key).Inc()
		c.logger.Warn("ignoring unreadable node label or annotation", "node", r.name, "key", e.key, "value", gke.Quote(e.value))
	}
	c.store.set(r)
}

func containsError(errs []parseError, e parseError) bool {
	for _, o := range errs {
		if o == e {
			return true
		}
	}
	return false
}

// observe notes the outcome of a list or watch call: an error is counted and starts (or continues) a failure, a
// success ends it.
func (c *Collector) observe(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.failingSince = time.Time{}
		c.lastErr = nil
		return
	}
	c.watchErrors.Inc()
	c.lastErr = err
	if c.failingSince.IsZero() {
		c.failingSince = c.now()
	}
}

// watchError is the informer's watch error handler. Errors of list and watch calls were counted by observe; this
// counts what breaks a running watch. A watch that expired or ended normally is routine and not counted.
func (c *Collector) watchError(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr != nil && errors.Is(err, c.lastErr) {
		return
	}
	c.watchErrors.Inc()
	c.lastErr = err
	if c.failingSince.IsZero() {
		c.failingSince = c.now()
	}
}

// Run watches nodes until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	c.informer.RunWithContext(ctx)
}

// HasSynced reports whether the event handler has stored every node of the initial list, not only whether the
// informer has read it: until then a scrape would show part of the cluster.
func (c *Collector) HasSynced() bool { return c.handler.HasSynced() }

var errNotSynced = errors.New("node list not synced yet")

// Update serves no client_golang series: it only reports the collector's health. It fails until the initial list
// is stored, and while list/watch has failed for longer than the failure grace (the last known series stay).
func (c *Collector) Update(chan<- prometheus.Metric) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	c.mu.Lock()
	since, err := c.failingSince, c.lastErr
	c.mu.Unlock()
	if !since.IsZero() && c.now().Sub(since) > c.failureGrace {
		return fmt.Errorf("node list/watch failing since %s: %v", since.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// WriteText copies the rendered series.
func (c *Collector) WriteText(w io.Writer) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	return c.store.WriteText(w)
}
