package nodes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Option changes a Collector's defaults.
type Option func(*Collector)

// WithFailureGrace sets how long list/watch may fail before gke_disruption_collector_success{collector="nodes"} is 0
// (default kube.DefaultFailureGrace).
func WithFailureGrace(d time.Duration) Option { return func(c *Collector) { c.failureGrace = d } }

// Collector serves the gke_node_* series from a Node informer.
type Collector struct {
	logger       *slog.Logger
	informer     cache.SharedIndexInformer
	handler      cache.ResourceEventHandlerRegistration
	store        *store
	parseErrors  *prometheus.CounterVec
	freshness    *kube.Freshness
	failureGrace time.Duration
	// keeps are what the consumers sharing the watch (Share) keep of a node, in the order of record.shared.
	keeps []func(*nodeview.View) any
	// beforeEvent, when set (tests), runs before the handler applies each event.
	beforeEvent func()
}

// New builds the collector; Run starts its watch. Its parse-error and watch-error counters register with reg.
func New(logger *slog.Logger, client kubernetes.Interface, reg prometheus.Registerer, opts ...Option) (*Collector, error) {
	c := &Collector{
		logger:       logger,
		store:        newStore(),
		failureGrace: kube.DefaultFailureGrace,
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "node_label_parse_errors_total",
			Help:      "Node label and annotation values that could not be read, counted once per value seen.",
		}, []string{"label"}),
	}
	for _, o := range opts {
		o(c)
	}
	c.parseErrors.WithLabelValues(gke.LabelScheduledMaintenanceTime)
	c.parseErrors.WithLabelValues(gke.AnnotationUpcomingMaintenance)
	c.parseErrors.WithLabelValues(nodeview.UnreadableXidCondition)
	c.parseErrors.WithLabelValues(gke.AnnotationCurrentOperation)
	c.parseErrors.WithLabelValues(gke.AnnotationMachineTerminationDatetime)
	if err := reg.Register(c.parseErrors); err != nil {
		return nil, err
	}
	var err error
	if c.freshness, err = kube.NewFreshness(reg, c.failureGrace); err != nil {
		return nil, err
	}
	watched := c.freshness.Watch("nodes")

	nodes := client.CoreV1().Nodes()
	lw := watched.ListWatch(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, opts)
		},
	}, false)
	// No indexers: the collector only walks its own store.
	c.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Node{},
		cache.SharedIndexInformerOptions{ObjectDescription: "nodes"})
	if err := c.informer.SetTransform(func(obj any) (any, error) { return transform(obj, c.keeps) }); err != nil {
		return nil, err
	}
	if err := c.informer.SetWatchErrorHandlerWithContext(watched.ErrorHandler); err != nil {
		return nil, err
	}
	watched.Track(c.informer.LastSyncResourceVersion)
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
		c.logger.Warn("ignoring unreadable node label, annotation or condition", "node", r.name, "key", e.key, "value", gke.Quote(e.value))
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

// Share makes the collector's node watch another consumer's too, so that a process running both decodes and reads
// each Node once: keep is handed each node's View in the informer transform, and handler receives what it kept
// (deletions included, tombstones unwrapped). Call it before Run. The registration's HasSynced tells when handler
// has received the whole initial list.
func (c *Collector) Share(keep func(*nodeview.View) any, handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i := len(c.keeps)
	c.keeps = append(c.keeps, keep)
	kept := func(obj any) (any, bool) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		r, ok := obj.(*record)
		if !ok || i >= len(r.shared) {
			return nil, false
		}
		return r.shared[i], true
	}
	return c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if k, ok := kept(obj); ok {
				handler.OnAdd(k, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := kept(oldObj)
			if k, ok := kept(newObj); ok {
				handler.OnUpdate(old, k)
			}
		},
		DeleteFunc: func(obj any) {
			if k, ok := kept(obj); ok {
				handler.OnDelete(k)
			}
		},
	})
}

// WatchErr is the node watch's failure, once it has lasted longer than the failure grace: for the consumers
// sharing it.
func (c *Collector) WatchErr() error { return c.freshness.Err() }

// Run watches nodes until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	c.informer.RunWithContext(ctx)
}

// HasSynced reports whether the event handler has stored every node of the initial list, not only whether the
// informer has read it: until then a scrape would show part of the cluster.
func (c *Collector) HasSynced() bool { return c.handler.HasSynced() }

var errNotSynced = errors.New("node list not synced yet")

// Update serves no client_golang series: it only reports the collector's health. It fails until the initial list
// is stored, and while list/watch has failed for longer than the failure grace without delivering data since (the
// last known series stay).
func (c *Collector) Update(chan<- prometheus.Metric) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	return c.freshness.Err()
}

// TextGeneration numbers the rendered series: a scrape serves its cached copy while it stays the same.
func (c *Collector) TextGeneration() uint64 { return c.store.TextGeneration() }

// WriteText copies the rendered series.
func (c *Collector) WriteText(w io.Writer) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	return c.store.WriteText(w)
}
