// Package executor carries out actions on nodes: it keeps the alerts waiting for a decision, asks the policy, claims
// nodes with conditional patches, cordons, drains with k8s.io/kubectl/pkg/drain, requests GKE maintenance, and lifts
// its own cordons once GKE is done. All progress is recorded on the Node (package nodestate), so a restart or a new
// leader resumes where the last one stopped and never acts twice.
package executor

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
)

// fieldManager names this service in managedFields and audit logs.
const fieldManager = "gke-disruption-exporter-actions"

// Defaults for Options left zero.
const (
	DefaultRequeueInterval = 30 * time.Second
	DefaultPendingTTL      = 24 * time.Hour
	defaultWorkers         = 4
)

// Options configure an Executor.
type Options struct {
	Config *config.Config
	// DryRun decides, logs, emits events and metrics, and changes nothing (Config.DryRun has the same effect).
	DryRun bool
	Client kubernetes.Interface
	// Recorder emits the Events on nodes.
	Recorder record.EventRecorder
	// Identity names this replica in the claimed-by and cordoned-by annotations.
	Identity string
	// Self is this service's own pod, never evicted; empty when not running in a pod.
	Self types.NamespacedName
	// RequeueInterval is how often waiting work is evaluated again when no node changes (for windows opening).
	RequeueInterval time.Duration
	// PendingTTL drops waiting work whose alert has not been received again for this long.
	PendingTTL time.Duration
	Registerer prometheus.Registerer
}

// pending is an alert waiting for a decision on its node.
type pending struct {
	trigger    webhook.Trigger
	lastSeen   time.Time
	lastReason string // of the last wait decision, so an unchanged wait emits no new Event
}

// Executor acts on nodes while it leads; Submit refuses work otherwise.
type Executor struct {
	logger   *slog.Logger
	opts     Options
	cfg      *config.Config
	dryRun   bool
	client   kubernetes.Interface
	recorder record.EventRecorder
	metrics  *metrics

	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer

	// decideMu serialises decisions, so each one sees every claim made before it.
	decideMu sync.Mutex

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string] // nil while not leading
	pending map[string]*pending
	drains  map[string]bool // nodes with a drain running
	drainWG sync.WaitGroup
}

// New builds an executor; Run starts its node watch, Lead its work.
func New(logger *slog.Logger, opts Options) (*Executor, error) {
	if opts.RequeueInterval == 0 {
		opts.RequeueInterval = DefaultRequeueInterval
	}
	if opts.PendingTTL == 0 {
		opts.PendingTTL = DefaultPendingTTL
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithTransform(nodeStripper(opts.Config)))
	e := &Executor{
		logger:   logger,
		opts:     opts,
		cfg:      opts.Config,
		dryRun:   opts.DryRun || opts.Config.DryRun,
		client:   opts.Client,
		recorder: opts.Recorder,
		metrics:  m,
		factory:  factory,
		informer: factory.Core().V1().Nodes().Informer(),
		pending:  map[string]*pending{},
		drains:   map[string]bool{},
	}
	_, err = e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { e.nodeChanged(nil, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			e.nodeChanged(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			e.nodeChanged(obj, nil)
		},
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Run watches nodes until ctx ends.
func (e *Executor) Run(ctx context.Context) {
	e.factory.Start(ctx.Done())
	<-ctx.Done()
	e.factory.Shutdown()
}

// Leading reports whether this replica currently takes work.
func (e *Executor) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queue != nil
}

// HasSynced reports whether the initial node list has been read.
func (e *Executor) HasSynced() bool { return e.informer.HasSynced() }

// Submit queues triggers; only the leader takes work.
func (e *Executor) Submit(triggers []webhook.Trigger) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queue == nil {
		return webhook.ErrNotLeader
	}
	now := time.Now()
	for _, t := range triggers {
		p := e.pending[t.Node]
		if !t.Firing {
			if p != nil && p.trigger.Action == t.Action && !t.StartsAt.Before(p.trigger.StartsAt) {
				delete(e.pending, t.Node)
				e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
				e.logger.Info("alert resolved; waiting work withdrawn", "node", t.Node, "action", t.Action)
			}
			continue
		}
		if p == nil {
			p = &pending{}
			e.pending[t.Node] = p
		}
		p.trigger, p.lastSeen = t, now
		e.queue.Add(t.Node)
	}
	return nil
}

// Lead acts until ctx ends: it resumes unfinished work found on nodes, then takes new work. When it returns, no
// drain of this replica is still running, so another replica may take over.
func (e *Executor) Lead(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), e.informer.HasSynced) {
		return ctx.Err()
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "actions"})
	e.mu.Lock()
	e.queue = queue
	e.mu.Unlock()

	resumed := 0
	for _, obj := range e.informer.GetStore().List() {
		if node, ok := obj.(*corev1.Node); ok && needsAttention(node) {
			queue.Add(node.Name)
			resumed++
		}
	}
	e.logger.Info("leading: acting on nodes", "unfinished_nodes", resumed, "dry_run", e.dryRun)

	var workers sync.WaitGroup
	for range defaultWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for e.processNext(ctx, queue) {
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	workers.Wait()
	e.drainWG.Wait()
	e.mu.Lock()
	e.queue = nil
	clear(e.pending)
	e.mu.Unlock()
	e.metrics.inProgress.reset()
	e.logger.Info("stopped leading")
	return nil
}

func (e *Executor) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	name, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(name)
	after, err := e.reconcile(ctx, name)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		e.logger.Warn("node step failed; retrying", "node", name, "err", err)
		queue.AddRateLimited(name)
	case after > 0:
		queue.Forget(name)
		queue.AddAfter(name, after)
	default:
		queue.Forget(name)
	}
	return true
}

// enqueue adds nodes to the current queue, if leading.
func (e *Executor) enqueue(names ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queue == nil {
		return
	}
	for _, n := range names {
		e.queue.Add(n)
	}
}

// nodeChanged wakes the work a node change can move: the node's own unfinished work, and, when a node starts or
// stops counting as disrupted, every waiting alert (a budget slot may have freed).
func (e *Executor) nodeChanged(oldObj, newObj any) {
	oldNode, _ := oldObj.(*corev1.Node)
	newNode, _ := newObj.(*corev1.Node)
	var names []string
	if newNode != nil && needsAttention(newNode) {
		names = append(names, newNode.Name)
	}
	if oldNode == nil || newNode == nil || nodestate.Disrupted(oldNode) != nodestate.Disrupted(newNode) {
		e.mu.Lock()
		for name := range e.pending {
			names = append(names, name)
		}
		e.mu.Unlock()
	}
	e.enqueue(names...)
}

// needsAttention reports unfinished work of ours on the node: an action in progress or a cordon still to lift.
func needsAttention(node *corev1.Node) bool {
	r := nodestate.Read(node)
	return r.Active() || (r.Phase == nodestate.Done && r.CordonedBy != "")
}

// cachedNodes lists the informer's nodes.
func (e *Executor) cachedNodes() []*corev1.Node {
	objs := e.informer.GetStore().List()
	out := make([]*corev1.Node, 0, len(objs))
	for _, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// waitForCache blocks until the informer holds the node at resourceVersion rv or later, so the next decision counts
// a claim just made. Resource versions are etcd revisions; if one does not parse, equality is required.
func (e *Executor) waitForCache(ctx context.Context, name, rv string) error {
	want, wantErr := strconv.ParseUint(rv, 10, 64)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if obj, ok, _ := e.informer.GetStore().GetByKey(name); ok {
			got := obj.(*corev1.Node).ResourceVersion
			if got == rv {
				return nil
			}
			if n, err := strconv.ParseUint(got, 10, 64); err == nil && wantErr == nil && n >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s at resourceVersion %s not in the watch cache after 10s", name, rv)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
