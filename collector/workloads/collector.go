// Package workloads is the workloads collector: it watches the pods on GPU, TPU and Spot nodes, finds the workload
// each belongs to (its top owner), and keeps each workload's gke_workload_* series and readiness findings rendered,
// so a scrape is a byte copy whatever the number of pods.
package workloads

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// Flags are the readiness thresholds (--readiness.*).
type Flags struct {
	MinGracePeriod *time.Duration
	SpotNotice     *time.Duration
}

// AddFlags adds the readiness thresholds to cmd.
func AddFlags(cmd *kingpin.CmdClause) *Flags {
	return &Flags{
		MinGracePeriod: cmd.Flag("readiness.min-grace-period",
			"Least terminationGracePeriodSeconds a pod on a GPU/TPU node should have: the time its checkpoint takes.").
			Default("30s").Duration(),
		SpotNotice: cmd.Flag("readiness.spot-notice",
			"Shutdown window a Spot node gives ordinary pods; more grace than this is cut short.").
			Default("15s").Duration(),
	}
}

// Config is the checks' configuration from the flags.
func (f *Flags) Config() readiness.Config {
	return readiness.Config{MinGracePeriod: *f.MinGracePeriod, SpotNotice: *f.SpotNotice}
}

// ownerResources are the owners whose own controller is looked up (see followed), read as metadata only.
var ownerResources = map[string]schema.GroupVersionResource{
	"ReplicaSet":  {Group: "apps", Version: "v1", Resource: "replicasets"},
	"StatefulSet": {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"Job":         {Group: "batch", Version: "v1", Resource: "jobs"},
}

// leaderPodSelector selects the leader pods of LeaderWorkerSets: the one pod of each group with worker index 0.
const leaderPodSelector = "leaderworkerset.sigs.k8s.io/worker-index=0"

// OwnerResources are the owner resources the collector lists (as metadata), for callers that check access first.
func OwnerResources() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(ownerResources))
	for _, gvr := range ownerResources {
		out = append(out, gvr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// podFieldSelector leaves out pods not bound to a node and finished ones: the API server does not send them.
const podFieldSelector = "spec.nodeName!=,status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// Collector serves the gke_workload_* and gke_readiness_findings series.
type Collector struct {
	logger    *slog.Logger
	state     *state
	nodes     *cache.Reflector // nil when the node watch is shared
	nodesSink *sink
	// nodeWatch is the shared node watch (WithNodeWatch), nil when the collector watches nodes itself.
	nodeWatch   NodeWatch
	nodesSynced cache.InformerSynced
	pods        *cache.Reflector
	podsSink    *sink
	owners      metadatainformer.SharedInformerFactory
	leaders     metadatainformer.SharedInformerFactory // LeaderWorkerSet leader pods
	ownerInf    map[string]cache.SharedIndexInformer
	typed       informers.SharedInformerFactory // PodDisruptionBudgets
	configMap   informers.SharedInformerFactory // the one ConfigMap
	synced      []cache.InformerSynced
	freshness   *kube.Freshness

	failureGrace time.Duration
}

// Option changes a Collector's defaults.
type Option func(*Collector)

// WithFailureGrace sets how long a watch may fail before gke_disruption_collector_success{collector="workloads"} is 0
// (default kube.DefaultFailureGrace).
func WithFailureGrace(d time.Duration) Option { return func(c *Collector) { c.failureGrace = d } }

// NodeWatch is a node watch another collector runs, shared so that a process running both decodes and reads each
// Node once (nodes.Collector).
type NodeWatch interface {
	// Share hands keep each node's View and handler what keep returned; the registration tells when handler has
	// received the whole initial list.
	Share(keep func(*nodeview.View) any, handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	// WatchErr is the watch's failure, once it has lasted longer than its failure grace.
	WatchErr() error
}

// WithNodeWatch reads nodes from w, which its owner runs, instead of from a watch of the collector's own.
func WithNodeWatch(w NodeWatch) Option { return func(c *Collector) { c.nodeWatch = w } }

// New builds the collector; Run starts its watches.
// Its watch-error counter registers with reg.
func New(logger *slog.Logger, client kubernetes.Interface, meta metadata.Interface, cfg readiness.Config, reg prometheus.Registerer,
	opts ...Option) (*Collector, error) {
	c := &Collector{logger: logger, ownerInf: map[string]cache.SharedIndexInformer{}, failureGrace: kube.DefaultFailureGrace}
	for _, o := range opts {
		o(c)
	}
	c.state = newState(cfg, c.lookupOwner)
	var err error
	if c.freshness, err = kube.NewFreshness(reg, c.failureGrace); err != nil {
		return nil, err
	}
	// The reflectors take no error handler: their calls and frames are watched through their ListWatch.
	reflect := func(resource string, lw *cache.ListWatch, expected runtime.Object, store cache.ReflectorStore) *cache.Reflector {
		watched := c.freshness.Watch(resource)
		r := cache.NewReflectorWithOptions(watched.ListWatch(lw, true), expected, store,
			cache.ReflectorOptions{Name: "workloads " + resource})
		watched.Track(r.LastSyncResourceVersion)
		return r
	}
	// Informers report what breaks a watch to their handler; their calls are retried quietly by client-go, but
	// the reflectors above see the same API server.
	watchInformer := func(resource string, inf cache.SharedIndexInformer) error {
		watched := c.freshness.Watch(resource)
		watched.Track(inf.LastSyncResourceVersion)
		return inf.SetWatchErrorHandlerWithContext(watched.ErrorHandler)
	}

	if c.nodeWatch != nil {
		reg, err := c.nodeWatch.Share(func(v *nodeview.View) any { return nodeFrom(v) }, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.state.setNode(obj.(nodeInfo)) },
			UpdateFunc: func(_, obj any) { c.state.setNode(obj.(nodeInfo)) },
			DeleteFunc: func(obj any) { c.state.deleteNode(obj.(nodeInfo).name) },
		})
		if err != nil {
			return nil, err
		}
		c.nodesSynced = reg.HasSynced
	} else {
		c.nodesSink = &sink{
			transform: keepNode,
			set: func(obj any) {
				if n, ok := keptNodeOf(obj); ok {
					c.state.setNode(n.info)
				}
			},
			del: func(obj any) {
				if n, ok := keptNodeOf(obj); ok {
					c.state.deleteNode(n.Name)
				}
			},
			replace: func(objs []any) {
				nodes := make([]nodeInfo, 0, len(objs))
				for _, obj := range objs {
					if n, ok := keptNodeOf(obj); ok {
						nodes = append(nodes, n.info)
					}
				}
				c.state.replaceNodes(nodes)
			},
		}
		c.nodes = reflect("nodes",
			cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll, fields.Everything()),
			&corev1.Node{}, c.nodesSink)
		c.nodesSynced = c.nodesSink.hasSynced
	}

	c.podsSink = &sink{
		transform: keepPod,
		set: func(obj any) {
			if p, ok := keptPodOf(obj); ok {
				c.state.setPod(p.in, p.keep)
			}
		},
		del: func(obj any) {
			if p, ok := keptPodOf(obj); ok {
				c.state.deletePod(p.Namespace, p.Name)
			}
		},
		replace: func(objs []any) {
			pods := make([]*podInput, 0, len(objs))
			keep := make([]bool, 0, len(objs))
			for _, obj := range objs {
				if p, ok := keptPodOf(obj); ok {
					pods, keep = append(pods, p.in), append(keep, p.keep)
				}
			}
			c.state.replacePods(pods, keep)
		},
	}
	c.pods = reflect("pods",
		cache.NewFilteredListWatchFromClient(client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
			func(o *metav1.ListOptions) { o.FieldSelector = podFieldSelector }),
		&corev1.Pod{}, c.podsSink)

	// The owner walk's caches: metadata of the owner kinds it follows, and of the LeaderWorkerSet leader pods, which
	// own their group's worker StatefulSet wherever they run.
	c.owners = metadatainformer.NewSharedInformerFactoryWithOptions(meta, 0, metadatainformer.WithTransform(stripOwner))
	c.leaders = metadatainformer.NewFilteredSharedInformerFactory(meta, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = leaderPodSelector })
	leaders := c.leaders.ForResource(corev1.SchemeGroupVersion.WithResource("pods")).Informer()
	if err := leaders.SetTransform(stripOwner); err != nil {
		return nil, err
	}
	owners := map[string]cache.SharedIndexInformer{"Pod": leaders}
	for kind, gvr := range ownerResources {
		owners[kind] = c.owners.ForResource(gvr).Informer()
	}
	for kind, inf := range owners {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
					c.state.ownerChanged(m.Namespace, m.UID, false)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
				m, ok2 := newObj.(*metav1.PartialObjectMetadata)
				if ok1 && ok2 {
					c.state.ownerChanged(m.Namespace, m.UID, !sameController(o, m))
				}
			},
		}); err != nil {
			return nil, err
		}
		resource := "leaderpods"
		if gvr, ok := ownerResources[kind]; ok {
			resource = gvr.Resource
		}
		if err := watchInformer(resource, inf); err != nil {
			return nil, err
		}
		c.ownerInf[kind] = inf
		c.synced = append(c.synced, inf.HasSynced)
	}

	c.typed = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripPDB))
	pdbs := c.typed.Policy().V1().PodDisruptionBudgets().Informer()
	if _, err := pdbs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.setPDB,
		UpdateFunc: func(_, obj any) { c.setPDB(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				c.state.deletePDB(pdb.Namespace, pdb.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	if err := watchInformer("poddisruptionbudgets", pdbs); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, pdbs.HasSynced)

	// RBAC grants this one ConfigMap by name: list and watch it by a field selector on its name.
	c.configMap = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(gke.NamespaceDisruptionHandling),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", gke.ConfigMapDisruptionHandling).String()
		}))
	cms := c.configMap.Core().V1().ConfigMaps().Informer()
	setCM := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == gke.ConfigMapDisruptionHandling {
			c.state.setGracefulTermination(readiness.GracefulTerminationEnabled(cm.Data))
		}
	}
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    setCM,
		UpdateFunc: func(_, obj any) { setCM(obj) },
		DeleteFunc: func(any) { c.state.setGracefulTermination(false) },
	}); err != nil {
		return nil, err
	}
	if err := watchInformer("configmaps", cms); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, cms.HasSynced, c.nodesSynced, c.podsSink.hasSynced)
	return c, nil
}

func (c *Collector) setPDB(obj any) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return
	}
	blocks := readiness.PDBBlocksDrain(pdb)
	if !blocks {
		c.state.setPDB(pdb.Namespace, pdb.Name, nil, false)
		return
	}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.logger.Warn("ignoring PodDisruptionBudget with an unreadable selector", "pdb", pdb.Namespace+"/"+pdb.Name, "err", err)
		c.state.setPDB(pdb.Namespace, pdb.Name, nil, false)
		return
	}
	c.state.setPDB(pdb.Namespace, pdb.Name, selector, true)
}

// lookupOwner reads an owner's controller from the metadata caches.
func (c *Collector) lookupOwner(namespace, apiVersion, kind, name string, uid types.UID) (*ownerInput, bool) {
	inf, ok := c.ownerInf[kind]
	if !ok {
		return nil, false
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.UID != uid {
		return nil, false // a newer object of the same name
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil {
		return nil, true
	}
	return &ownerInput{apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name, uid: ref.UID}, true
}

// Run watches until ctx ends. Pods are read once the nodes and owners are, so that each pod's node and workload
// are known when it arrives.
func (c *Collector) Run(ctx context.Context) {
	c.owners.Start(ctx.Done())
	c.leaders.Start(ctx.Done())
	c.typed.Start(ctx.Done())
	c.configMap.Start(ctx.Done())
	if c.nodes != nil {
		go c.nodes.RunWithContext(ctx)
	}
	ownersSynced := append([]cache.InformerSynced{c.nodesSynced}, c.synced[:len(c.ownerInf)]...)
	if cache.WaitForCacheSync(ctx.Done(), ownersSynced...) {
		go c.pods.RunWithContext(ctx)
	}
	<-ctx.Done()
	c.owners.Shutdown()
	c.leaders.Shutdown()
	c.typed.Shutdown()
	c.configMap.Shutdown()
}

// HasSynced reports whether the initial lists have been read.
func (c *Collector) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

var errNotSynced = errors.New("pod, node, owner, PodDisruptionBudget or ConfigMap list not synced yet")

// Update serves no client_golang series: it only reports the collector's health. It fails until the initial lists
// are read, and while any watch has failed for longer than the failure grace without delivering data since.
func (c *Collector) Update(chan<- prometheus.Metric) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	if c.nodeWatch != nil {
		return errors.Join(c.freshness.Err(), c.nodeWatch.WatchErr())
	}
	return c.freshness.Err()
}

// WriteText copies the rendered series.
func (c *Collector) WriteText(w io.Writer) error {
	if !c.HasSynced() {
		return errNotSynced
	}
	return c.state.WriteText(w)
}

// sink receives a reflector's objects and hands them on converted; it keeps nothing itself.
type sink struct {
	// transform is what the reflector's watch-list buffer applies to each object of the first sync (Transformer).
	transform cache.TransformFunc
	set, del  func(obj any)
	replace   func(objs []any)
	synced    atomic.Bool
}

func (k *sink) Add(obj any) error    { k.set(obj); return nil }
func (k *sink) Update(obj any) error { k.set(obj); return nil }
func (k *sink) Delete(obj any) error { k.del(obj); return nil }
func (k *sink) Resync() error        { return nil }
func (k *sink) Replace(objs []any, _ string) error {
	k.replace(objs)
	k.synced.Store(true)
	return nil
}
func (k *sink) hasSynced() bool { return k.synced.Load() }

// Transformer makes the reflector keep, while the first sync streams in, only what the sink keeps.
func (k *sink) Transformer() cache.TransformFunc { return k.transform }
