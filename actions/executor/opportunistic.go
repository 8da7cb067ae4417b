package executor

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
)

// idleTracker follows, from a pod watch, which nodes run a pod requesting an accelerator and since when the others
// have run none. What happened before the watch started is unknown, so idleness counts at most from then (and from
// the node's creation).
type idleTracker struct {
	mu        sync.Mutex
	started   time.Time
	resources []string
	busy      map[string]map[types.UID]bool // node -> accelerator pods on it, not finished
	podNode   map[types.UID]string
	lastBusy  map[string]time.Time
	synced    func() bool
}

func newIdleTracker(resources []string) *idleTracker {
	return &idleTracker{started: time.Now(), resources: resources, busy: map[string]map[types.UID]bool{},
		podNode: map[types.UID]string{}, lastBusy: map[string]time.Time{}}
}

// usesAccelerator reports a pod requesting (or limited to) one of the accelerator resources, bound to a node and
// not finished.
func (t *idleTracker) usesAccelerator(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, r := range t.resources {
			if q, ok := c.Resources.Requests[corev1.ResourceName(r)]; ok && !q.IsZero() {
				return true
			}
			if q, ok := c.Resources.Limits[corev1.ResourceName(r)]; ok && !q.IsZero() {
				return true
			}
		}
	}
	return false
}

// observe records a pod's state; a nil pod is one deleted.
func (t *idleTracker) observe(uid types.UID, pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.podNode[uid]; ok {
		delete(t.busy[prev], uid)
		if len(t.busy[prev]) == 0 {
			delete(t.busy, prev)
		}
		delete(t.podNode, uid)
		t.lastBusy[prev] = time.Now()
	}
	if pod != nil && t.usesAccelerator(pod) {
		node := pod.Spec.NodeName
		if t.busy[node] == nil {
			t.busy[node] = map[types.UID]bool{}
		}
		t.busy[node][uid] = true
		t.podNode[uid] = node
	}
}

// idle is how long no accelerator pod has run on the node; 0 while one does or before the pod list is read.
func (t *idleTracker) idle(node *corev1.Node) time.Duration {
	if t.synced != nil && !t.synced() {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.busy[node.Name]) > 0 {
		return 0
	}
	since := t.started
	if c := node.CreationTimestamp.Time; c.After(since) {
		since = c
	}
	if b := t.lastBusy[node.Name]; b.After(since) {
		since = b
	}
	return time.Since(since)
}

// stripPod keeps what the idle tracker reads.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion}}
	out.Spec.NodeName = pod.Spec.NodeName
	out.Status.Phase = pod.Status.Phase
	keep := func(cs []corev1.Container) []corev1.Container {
		var kept []corev1.Container
		for _, c := range cs {
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				kept = append(kept, corev1.Container{Name: c.Name, Resources: c.Resources})
			}
		}
		return kept
	}
	out.Spec.Containers, out.Spec.InitContainers = keep(pod.Spec.Containers), keep(pod.Spec.InitContainers)
	return out, nil
}

// startIdleTracking starts the pod watch the first time a policy asks for opportunistic maintenance.
func (e *Executor) startIdleTracking(ctx context.Context, cfg *config.Config) *idleTracker {
	e.idleOnce.Do(func() {
		t := newIdleTracker(cfg.AcceleratorResources)
		factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithTransform(stripPod))
		inf := factory.Core().V1().Pods().Informer()
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p := obj.(*corev1.Pod); t.observe(p.UID, p) },
			UpdateFunc: func(_, obj any) { p := obj.(*corev1.Pod); t.observe(p.UID, p) },
			DeleteFunc: func(obj any) {
				if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tombstone.Obj
				}
				if p, ok := obj.(*corev1.Pod); ok {
					t.observe(p.UID, nil)
				}
			},
		})
		if err != nil {
			e.logger.Error("watching pods for opportunistic maintenance", "err", err)
			return
		}
		t.synced = reg.HasSynced
		factory.Start(ctx.Done())
		e.idle = t
		e.logger.Info("watching pods for opportunistic maintenance", "accelerator_resources", cfg.AcceleratorResources)
	})
	return e.idle
}

// runOpportunistic takes idle nodes with reschedulable maintenance into maintenance, pool by pool, while leading.
func (e *Executor) runOpportunistic(ctx context.Context, watchCtx context.Context) {
	ticker := time.NewTicker(e.opts.RequeueInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		cfg := e.config()
		if !cfg.Opportunistic() {
			continue
		}
		if t := e.startIdleTracking(watchCtx, cfg); t != nil {
			e.opportunisticPass(ctx, cfg, t)
		}
	}
}

// opportunisticPass decides once for every pool with opportunistic maintenance.
func (e *Executor) opportunisticPass(ctx context.Context, cfg *config.Config, t *idleTracker) {
	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	all := e.cachedNodes()
	now := time.Now()
	for i := range cfg.Pools {
		disrupted := e.disruptedWithReserved(all)
		p := &cfg.Pools[i]
		if p.Opportunistic == nil {
			continue
		}
		var nodes []*corev1.Node
		for _, n := range all {
			if cfg.MatchPool(n.Labels) == p {
				nodes = append(nodes, n)
			}
		}
		members, why := policy.PickOpportunistic(policy.OpportunisticInput{Pool: p, Nodes: nodes, Idle: t.idle,
			Disrupted: disrupted, Claimable: e.claimable, AlertSaysReschedulable: e.alertSaysReschedulable, Now: now})
		if members == nil {
			e.setOpportunisticWait(p.Name, opportunisticWait{})
			continue
		}
		// Windows, pause, the cluster cap and the pool's own budget hold as for any action.
		pool, cluster := policy.Survey(cfg, members[0], all, disrupted)
		req := policy.Request{Action: nodestate.OpportunisticMaintenance, CanReschedule: true}
		d := policy.Decide(cfg, policy.Input{Request: req, Node: members[0], Members: members, Pool: pool, Cluster: cluster,
			Disrupted: disrupted, Now: now})
		if d.Verdict == policy.Wait {
			e.setOpportunisticWait(p.Name, opportunisticWait{code: d.Code, nodes: len(members)})
			key := nodestate.PendingMaintenance(members[0]).Key() + "|" + d.Code
			if e.noteOnce(e.opportunisticWaited, members[0].Name, key) {
				e.event(members[0], corev1.EventTypeNormal, reasonWaiting, "%s waits: %s (%s)", req.Action, d.Reason, why)
				e.logger.Info("opportunistic maintenance waits", "pool", p.Name, "node", members[0].Name, "reason", d.Reason)
			}
			continue
		}
		e.setOpportunisticWait(p.Name, opportunisticWait{})
		if d.Verdict != policy.Act {
			e.logger.Debug("opportunistic maintenance not started", "pool", p.Name, "node", members[0].Name, "verdict", d.Verdict, "reason", d.Reason)
			continue
		}
		if e.dryRun() {
			e.simulate(req.Action, members)
			for _, n := range members {
				e.metrics.actions.WithLabelValues(string(req.Action), resultDryRun).Inc()
				e.event(n, corev1.EventTypeNormal, reasonDryRun, "dry run: would start opportunistic maintenance: %s", why)
			}
			continue
		}
		if err := e.claimGroup(ctx, req.Action, members, why, true); err != nil {
			e.logger.Warn("opportunistic maintenance not claimed", "pool", p.Name, "node", members[0].Name, "err", err)
		}
		all = e.cachedNodes()
	}
}

// alertSaysReschedulable reports a live alert for the node labelled can_reschedule="true".
func (e *Executor) alertSaysReschedulable(n *corev1.Node) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.alerts[n.Name]
	return ok && a.trigger.CanReschedule
}

// opportunisticWait is an idle unit of a pool that could start its maintenance but waits: the wait's code and the
// unit's size; the zero value is none.
type opportunisticWait struct {
	code  string
	nodes int
}

func (e *Executor) setOpportunisticWait(pool string, w opportunisticWait) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.code == "" {
		delete(e.opportunisticWaits, pool)
		return
	}
	e.opportunisticWaits[pool] = w
}

// acceleratorPodOn reports a pod using an accelerator on the node, read from the API: the check that an
// opportunistic claim still holds once the node is cordoned.
func (e *Executor) acceleratorPodOn(ctx context.Context, node string) (string, bool, error) {
	pods, err := e.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return "", false, err
	}
	t := &idleTracker{resources: e.config().AcceleratorResources}
	for i := range pods.Items {
		if p := &pods.Items[i]; t.usesAccelerator(p) {
			return p.Namespace + "/" + p.Name, true, nil
		}
	}
	return "", false, nil
}
