package nodes

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
)

// Collector serves the gke_node_* series from a Node informer.
type Collector struct {
	logger      *slog.Logger
	factory     informers.SharedInformerFactory
	informer    cache.SharedIndexInformer
	store       *store
	parseErrors *prometheus.CounterVec
}

// New builds the collector; Run starts its watch. Its parse-error counter registers with reg.
func New(logger *slog.Logger, client kubernetes.Interface, reg prometheus.Registerer) (*Collector, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(Strip))
	c := &Collector{
		logger:   logger,
		factory:  factory,
		informer: factory.Core().V1().Nodes().Informer(),
		store:    newStore(),
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: collector.Namespace,
			Name:      "node_label_parse_errors_total",
			Help:      "Node label values that could not be read, counted once per value seen.",
		}, []string{"label"}),
	}
	c.parseErrors.WithLabelValues(gke.LabelScheduledMaintenanceTime)
	if err := reg.Register(c.parseErrors); err != nil {
		return nil, err
	}
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.apply(nil, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			c.apply(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				c.store.delete(node.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// apply renders a node added or changed. A bad label value is logged and counted once, when it first appears.
func (c *Collector) apply(oldObj, newObj any) {
	node, ok := newObj.(*v1.Node)
	if !ok {
		return
	}
	r, errs := render(node)
	old, _ := oldObj.(*v1.Node)
	for _, e := range errs {
		if old != nil && old.Labels[e.label] == e.value {
			continue
		}
		c.parseErrors.WithLabelValues(e.label).Inc()
		c.logger.Warn("ignoring unreadable node label", "node", node.Name, "label", e.label, "value", e.value)
	}
	c.store.set(node.Name, &r)
}

// Run watches nodes until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	<-ctx.Done()
	c.factory.Shutdown()
}

// HasSynced reports whether the initial node list has been read.
func (c *Collector) HasSynced() bool { return c.informer.HasSynced() }

var errNotSynced = errors.New("node list not synced yet")

// Update serves no client_golang series: it only reports the collector's health.
func (c *Collector) Update(chan<- prometheus.Metric) error {
	if !c.HasSynced() {
		return errNotSynced
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
