// Package executor carries out actions on nodes: it keeps the live alerts, asks the policy, claims nodes (or whole
// groups of nodes) with conditional patches, cordons, drains with k8s.io/kubectl/pkg/drain, requests GKE
// maintenance, and lifts its own cordons once GKE is done or the maintenance moved. Work is keyed on the maintenance
// it serves and recorded on the Node (package nodestate), so a repeat, a restart or a new leader never acts twice
// and interrupted work resumes. The lifecycle itself is nodestate.Next; this package does its I/O.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/gkeapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// fieldManager names this service in managedFields and audit logs.
const fieldManager = "gke-disruption-exporter-actions"

// Defaults for Options left zero.
const (
	DefaultRequeueInterval = 30 * time.Second
	defaultWorkers         = 4
	// pendingTTL drops a live alert that has not been received again for this long.
	pendingTTL = 24 * time.Hour
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
	// Owner names this instance (its Lease, namespace/name) in the owner annotation of its work.
	Owner string
	// Self is this service's own pod, never evicted; empty when not running in a pod.
	Self types.NamespacedName
	// RequeueInterval is how often waiting work is evaluated again when no node changes (for windows opening).
	RequeueInterval time.Duration
	// PendingTTL drops a live alert that has not been received again for this long.
	PendingTTL time.Duration
	Registerer prometheus.Registerer
	// Fence reports whether this replica surely still holds the Lease; every write (claim, cordon, eviction, label)
	// is made only while it does, and the replica reports itself not leading as soon as it does not. Nil: always.
	Fence func() bool
	// GKE is the cluster in the GKE API (package gkeapi), for the policy keys that need it (Config.NeedsGKEAPI);
	// nil without one.
	GKE GKE
	// Calendar is the cluster's maintenance window, exclusions and node pools' auto-upgrades, for policy windows
	// from the cluster and perform-maintenance in rolling pools; nil: read through GKE at most once a minute
	// (gkeapi.Calendar).
	Calendar Calendar
}

// GKE is the part of the GKE API the executor uses, for its own cluster (package gkeapi).
type GKE interface {
	GetCluster(ctx context.Context) (*containerpb.Cluster, error)
	UpdateNodePool(ctx context.Context, pool, imageType string) (*containerpb.Operation, error)
	GetOperation(ctx context.Context, operation string) (*containerpb.Operation, error)
	FindUpgrade(ctx context.Context, pool string, since time.Time) (*containerpb.Operation, error)
}

// CheckConfig tells why the executor cannot run cfg: a key that needs the GKE API without one.
func CheckConfig(cfg *config.Config, gke GKE) error {
	if key := cfg.NeedsGKEAPI(); key != "" && gke == nil {
		return fmt.Errorf("%s needs the GKE API: run the actions service with --gke.cluster (on GKE the metadata server names the cluster)", key)
	}
	return nil
}

// drainRun is a drain running in the background, for one incarnation of a node.
type drainRun struct {
	uid    types.UID
	cancel context.CancelFunc
}

// Executor acts on nodes while it leads; Submit refuses work otherwise.
type Executor struct {
	logger   *slog.Logger
	opts     Options
	cfg      atomic.Pointer[config.Config]
	client   kubernetes.Interface
	recorder record.EventRecorder
	metrics  *metrics

	factory   informers.SharedInformerFactory
	informer  cache.SharedIndexInformer
	freshness *kube.Freshness // of informer

	// decideMu serialises decisions and group claims, so each one sees every claim made before it.
	decideMu sync.Mutex

	// book is what the leader remembers between decisions: live alerts, notices sent, dry-run claims.
	book *bookkeeping
	// repairs is the ledger of GPU-fault repairs the guard rails count.
	repairs *repairLedger
	// upgrades is the ledger of node pool upgrades done with maintenance.
	upgrades *upgradeLedger

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string] // nil while not leading
	owners  map[string]ownerLease
	drains  map[string]*drainRun
	drainWG sync.WaitGroup

	// opportunistic runs while leading; its pod watch, once started, runs until watchCtx (Run's) ends.
	opportunistic *opportunistic
	watchCtx      context.Context
}

// New builds an executor; Run starts its node watch, Lead its work.
func New(logger *slog.Logger, opts Options) (*Executor, error) {
	if opts.RequeueInterval == 0 {
		opts.RequeueInterval = DefaultRequeueInterval
	}
	if err := CheckConfig(opts.Config, opts.GKE); err != nil {
		return nil, err
	}
	if opts.Calendar == nil && opts.GKE != nil {
		opts.Calendar = gkeapi.NewCalendar(opts.GKE, gkeapi.DefaultCalendarTTL)
	}
	e := &Executor{
		logger:   logger,
		opts:     opts,
		client:   opts.Client,
		recorder: opts.Recorder,
		book:     newBookkeeping(),
		owners:   map[string]ownerLease{},
		drains:   map[string]*drainRun{},
	}
	e.opportunistic = &opportunistic{e: e}
	e.repairs = newRepairLedger(e)
	e.upgrades = newUpgradeLedger(e)
	e.cfg.Store(opts.Config)
	m, err := newMetrics(opts.Registerer, e)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	e.factory = informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithTransform(watchNode))
	if e.informer, e.freshness, err = nodeInformer(e.factory, opts.Registerer); err != nil {
		return nil, err
	}
	_, err = e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.nodeChanged(nil, obj) },
		UpdateFunc: func(oldObj, newObj any) { e.nodeChanged(oldObj, newObj) },
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

// config is the policy in force.
func (e *Executor) config() *config.Config { return e.cfg.Load() }

// dryRun reports whether decisions change nothing.
func (e *Executor) dryRun() bool { return e.opts.DryRun || e.config().DryRun }

// SetConfig replaces the policy (a reload). Running work carries on; every live alert is decided again under the
// new policy.
func (e *Executor) SetConfig(cfg *config.Config) error {
	if err := CheckConfig(cfg, e.opts.GKE); err != nil {
		return err
	}
	e.cfg.Store(cfg)
	e.enqueueAlerts()
	if e.dryRun() {
		// Work under way stops where it is, writing nothing; it resumes when dry run is switched off.
		e.mu.Lock()
		names := slices.Collect(maps.Keys(e.drains))
		e.mu.Unlock()
		for _, name := range names {
			e.stopDrain(name, "")
		}
		return nil
	}
	e.enqueue(e.metrics.state.names()...)
	return nil
}

// Run watches nodes until ctx ends.
func (e *Executor) Run(ctx context.Context) {
	e.mu.Lock()
	e.watchCtx = ctx
	e.mu.Unlock()
	e.factory.Start(ctx.Done())
	<-ctx.Done()
	e.factory.Shutdown()
}

// Leading reports whether this replica currently takes work: it leads and surely still holds the Lease.
func (e *Executor) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queue != nil && e.fenceHeld()
}

// fenceHeld reports whether writes are allowed (Options.Fence).
func (e *Executor) fenceHeld() bool { return e.opts.Fence == nil || e.opts.Fence() }

// Why a write was not made.
var (
	errFenced = errors.New("not written: this replica may no longer hold the Lease")
	errDryRun = errors.New("not written: dry run")
)

// checkFence is called right before every write: only a replica that surely holds the Lease writes, and a dry run
// writes nothing at all.
func (e *Executor) checkFence() error {
	switch {
	case e.dryRun():
		return errDryRun
	case !e.fenceHeld():
		return errFenced
	}
	return nil
}

// HasSynced reports whether the initial node list has been read.
func (e *Executor) HasSynced() bool { return e.informer.HasSynced() }

// Submit takes triggers; only the leader takes work. A firing alert becomes (or refreshes) the node's live alert;
// a resolved one withdraws it. Faulty-host requests are also kept on their nodes before the reply (keepRequests).
func (e *Executor) Submit(ctx context.Context, triggers []webhook.Trigger) error {
	if !e.Leading() {
		return webhook.ErrNotLeader
	}
	if err := e.keepRequests(ctx, triggers); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queue == nil || !e.fenceHeld() {
		return webhook.ErrNotLeader
	}
	now := time.Now()
	for _, t := range triggers {
		if !t.Firing {
			if e.book.resolve(t) {
				e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
				e.logger.Info("alert resolved; waiting work withdrawn", "node", t.Node, "action", t.Action)
			}
			continue
		}
		var uid types.UID
		if node, ok := e.cachedNode(t.Node); ok && t.Action == nodeview.ReportFaultyHost {
			uid = node.UID
		}
		e.book.take(t, now, uid)
		e.queue.Add(t.Node)
	}
	return nil
}

// Lead acts until ctx ends: it resumes unfinished work found on nodes, then takes new work. When it returns, no
// drain or step of this replica is still running, so another replica may take over.
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
	e.metrics.leader.Set(1)

	resumed := 0
	for _, obj := range e.informer.GetStore().List() {
		if node, ok := obj.(*watchedNode); ok && needsAttention(node.view) {
			queue.Add(node.Name)
			resumed++
		}
	}
	e.logger.Info("leading: acting on nodes", "unfinished_nodes", resumed, "dry_run", e.dryRun())

	var workers sync.WaitGroup
	e.mu.Lock()
	watchCtx := e.watchCtx
	e.mu.Unlock()
	if watchCtx != nil {
		workers.Add(1)
		go func() { defer workers.Done(); e.opportunistic.run(ctx, watchCtx) }()
	}
	workers.Add(1)
	go func() { defer workers.Done(); e.watchRepairLedger(ctx) }()
	workers.Add(1)
	go func() { defer workers.Done(); e.followUpgrades(ctx) }()
	for range defaultWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for e.processNext(ctx, queue) {
			}
		}()
	}
	<-ctx.Done()
	// Not leading any more: new alerts get 503 at once (and reach the next leader), no new drain starts.
	e.mu.Lock()
	e.queue = nil
	e.mu.Unlock()
	queue.ShutDown()
	workers.Wait()
	e.drainWG.Wait()
	e.mu.Lock()
	clear(e.owners)
	e.mu.Unlock()
	e.book.reset()
	e.repairs.reset()
	e.metrics.leader.Set(0)
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

// nodeChanged keeps the work gauges, stops a drain whose node went away (deleted, or re-created under the same
// name), and wakes the work a node change can move: the node's own, and, when a node starts or stops counting as
// disrupted, every live alert (a budget slot may have freed).
func (e *Executor) nodeChanged(oldObj, newObj any) {
	oldNode, _ := oldObj.(*watchedNode)
	newNode, _ := newObj.(*watchedNode)
	if newNode == nil && oldNode != nil {
		e.metrics.state.forget(oldNode.Name)
		e.stopDrain(oldNode.Name, "")
		if r := oldNode.view.Record; r.Phase == nodeview.Accepted || r.Phase == nodeview.Draining {
			e.nodeGone(oldNode.Name, r)
		}
		e.book.forget(oldNode.Name)
		e.enqueueAlerts()
		return
	}
	if newNode == nil {
		return
	}
	e.metrics.state.observe(newNode.view)
	if oldNode != nil && oldNode.UID != newNode.UID {
		e.stopDrain(newNode.Name, newNode.UID)
	}
	var names []string
	_, alerted := e.book.alert(newNode.Name)
	if needsAttention(newNode.view) || alerted {
		names = append(names, newNode.Name)
	}
	e.enqueue(names...)
	// What other nodes' decisions read of this one: whether it is disrupted, and who else holds it (GKE's own work
	// on a node of the pool holds back work on the nodes its upgrade replaces).
	if oldNode == nil || oldNode.view.Disrupted() != newNode.view.Disrupted() || oldNode.view.HeldBy != newNode.view.HeldBy {
		e.enqueueAlerts()
	}
}

// nodeGone counts work whose node was deleted before its own part was done (a Spot VM preempted mid-drain, a node
// pool scaled down) as skipped: the work ended without acting to the end, and nothing is left to retry.
func (e *Executor) nodeGone(name string, r nodeview.Record) {
	if !e.Leading() || (r.Owner != "" && r.Owner != e.opts.Owner) {
		return
	}
	e.metrics.actions.WithLabelValues(string(r.Action), resultSkipped).Inc()
	e.logger.Info("work ended: node deleted", "node", name, "action", r.Action, "state", r.Phase, "reason", "node_deleted")
}

// enqueueAlerts wakes every node with a live alert.
func (e *Executor) enqueueAlerts() { e.enqueue(e.book.alerted()...) }

// needsAttention reports work of ours on the node that is not finished: in progress, a cordon still to lift, or a
// faulty-host request kept and not yet claimed.
func needsAttention(node *nodeview.View) bool {
	r := node.Record
	return r.Active() || r.HoldsCordon() || r.Request != nil
}

// Nodes lists the watched nodes: the informer's stripped copies, not to be changed.
func (e *Executor) Nodes() []*nodeview.View { return e.cachedViews() }

// cachedViews are the Views of the informer's nodes, as read when the watch delivered them.
func (e *Executor) cachedViews() []*nodeview.View {
	objs := e.informer.GetStore().List()
	out := make([]*nodeview.View, 0, len(objs))
	for _, obj := range objs {
		if w, ok := obj.(*watchedNode); ok {
			out = append(out, w.view)
		}
	}
	return out
}

// cached returns the informer's copy of a node, with its View.
func (e *Executor) cached(name string) (*watchedNode, bool) {
	obj, ok, _ := e.informer.GetStore().GetByKey(name)
	if !ok {
		return nil, false
	}
	w, ok := obj.(*watchedNode)
	return w, ok
}

// cachedNode returns the informer's copy of a node.
func (e *Executor) cachedNode(name string) (*corev1.Node, bool) {
	w, ok := e.cached(name)
	if !ok {
		return nil, false
	}
	return w.Node, true
}

// waitForCache blocks until the informer holds the node at resourceVersion rv or later, so the next decision counts
// a claim just made. Resource versions are etcd revisions; if one does not parse, equality is required.
func (e *Executor) waitForCache(ctx context.Context, name, rv string) error {
	want, wantErr := strconv.ParseUint(rv, 10, 64)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, ok := e.cachedNode(name); ok {
			got := n.ResourceVersion
			if got == rv {
				return nil
			}
			if v, err := strconv.ParseUint(got, 10, 64); err == nil && wantErr == nil && v >= want {
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
