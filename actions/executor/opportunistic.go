package executor

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// idleTracker follows, from a pod watch, the pods bound to each node that use extended resources, and since when
// the nodes have had none. What happened before the watch started, or while it was broken, is unknown, so idleness
// counts at most from then (and from the node's creation). Which resources make a node busy is read from the policy
// at each question, so a reload applies to the pods already seen.
type idleTracker struct {
	mu        sync.Mutex
	started   time.Time
	resources func() []string
	pods      map[types.UID]podUse
	onNode    map[string]map[types.UID]bool
	lastBusy  map[string]time.Time
	// optedOut are the pods on each node that asked not to be disrupted (policy.OptsOut), by UID: namespace/name.
	optedOut map[string]map[types.UID]string
	// blind is set by a watch error and cleared when a watch opens again; then started moves to that moment.
	blind  bool
	synced func() bool
}

// podUse is a pod bound to a node and not finished, with the extended resources it asks for.
type podUse struct {
	node      string
	resources []corev1.ResourceName
}

func newIdleTracker(resources func() []string) *idleTracker {
	return &idleTracker{started: time.Now(), resources: resources, pods: map[types.UID]podUse{},
		onNode: map[string]map[types.UID]bool{}, lastBusy: map[string]time.Time{}, optedOut: map[string]map[types.UID]string{}}
}

// extendedResources are the resources other than the built-in ones (cpu, memory, ...) a bound, unfinished pod
// requests or is limited to, in any container.
func extendedResources(pod *corev1.Pod) []corev1.ResourceName {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	var out []corev1.ResourceName
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name, q := range list {
				if strings.Contains(string(name), "/") && !q.IsZero() && !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// usesAny reports a resource among the accelerator resources.
func usesAny(used []corev1.ResourceName, accelerators []string) bool {
	for _, r := range used {
		if slices.Contains(accelerators, string(r)) {
			return true
		}
	}
	return false
}

// observe records a pod's state; a nil pod is one deleted.
func (t *idleTracker) observe(uid types.UID, pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.pods[uid]; ok {
		delete(t.onNode[prev.node], uid)
		if len(t.onNode[prev.node]) == 0 {
			delete(t.onNode, prev.node)
		}
		delete(t.pods, uid)
		t.lastBusy[prev.node] = time.Now()
	}
	for node, pods := range t.optedOut {
		if _, ok := pods[uid]; ok {
			delete(pods, uid)
			if len(pods) == 0 {
				delete(t.optedOut, node)
			}
		}
	}
	if pod == nil {
		return
	}
	if policy.OptsOut(pod) {
		node := pod.Spec.NodeName
		if t.optedOut[node] == nil {
			t.optedOut[node] = map[types.UID]string{}
		}
		t.optedOut[node][uid] = pod.Namespace + "/" + pod.Name
	}
	if used := extendedResources(pod); len(used) > 0 {
		node := pod.Spec.NodeName
		if t.onNode[node] == nil {
			t.onNode[node] = map[types.UID]bool{}
		}
		t.onNode[node][uid] = true
		t.pods[uid] = podUse{node: node, resources: used}
	}
}

// watchFailed makes every node busy until the watch is back.
func (t *idleTracker) watchFailed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.blind = true
}

// watching notes a pod watch opened. After a failure it follows the list that replays the pods: what ran in the gap
// is unknown, so idleness counts from now.
func (t *idleTracker) watching() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blind {
		t.blind, t.started = false, time.Now()
	}
}

// idle is how long no accelerator pod has run on the node; 0 while one does, before the pod list is read, and
// while the watch is broken.
func (t *idleTracker) idle(node *nodeview.View) time.Duration {
	if t.synced != nil && !t.synced() {
		return 0
	}
	accelerators := t.resources()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blind {
		return 0
	}
	for uid := range t.onNode[node.Name] {
		if usesAny(t.pods[uid].resources, accelerators) {
			return 0
		}
	}
	since := t.started
	if c := node.Created; c.After(since) {
		since = c
	}
	if b := t.lastBusy[node.Name]; b.After(since) {
		since = b
	}
	return time.Since(since)
}

// optOut names a pod on the node that asked not to be disrupted, or "".
func (t *idleTracker) optOut(node *nodeview.View) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := slices.Sorted(maps.Values(t.optedOut[node.Name]))
	if len(names) == 0 {
		return ""
	}
	return names[0]
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
	for _, key := range []string{policy.AnnotationDoNotDisrupt, policy.AnnotationKarpenterDoNotDisrupt} {
		if v, ok := pod.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
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

// opportunistic is the loop that takes idle nodes with reschedulable maintenance into maintenance, pool by pool,
// while the executor leads. It decides and claims through its executor (the node cache, budgets, bookkeeping and
// group claims, under the lock every decision takes); what it keeps of its own is the pod watch that tells which
// nodes are idle.
type opportunistic struct {
	e *Executor
	// idle tracks accelerator pods, from the first policy that asks for opportunistic maintenance.
	idleOnce sync.Once
	idle     *idleTracker
}

// startIdleTracking starts the pod watch the first time a policy asks for opportunistic maintenance.
func (o *opportunistic) startIdleTracking(ctx context.Context, cfg *config.Config) *idleTracker {
	e := o.e
	o.idleOnce.Do(func() {
		t := newIdleTracker(func() []string { return e.config().AcceleratorResources })
		pods := e.client.CoreV1().Pods(metav1.NamespaceAll)
		// On the node cache's freshness model too: errors counted as {resource="pods"}, and a stale pod cache
		// makes Fresh fail. The informer's error handler sees what breaks a running watch.
		watched := e.freshness.Watch("pods")
		lw := watched.ListWatch(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
			// The reflector retries a refused watch by itself, without telling its error handler: note it here.
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				w, err := pods.Watch(ctx, o)
				if err != nil {
					t.watchFailed()
				} else {
					t.watching()
				}
				return w, err
			},
		}, false)
		inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
		watched.Track(inf.LastSyncResourceVersion)
		if err := errors.Join(inf.SetTransform(stripPod), inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			t.watchFailed()
			watched.ErrorHandler(ctx, r, err)
		})); err != nil {
			e.logger.Error("watching pods for opportunistic maintenance", "err", err)
			return
		}
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
		go inf.RunWithContext(ctx)
		o.idle = t
		e.logger.Info("watching pods for opportunistic maintenance", "accelerator_resources", cfg.AcceleratorResources)
	})
	return o.idle
}

// run decides every RequeueInterval until ctx (leading) ends; the pod watch runs until watchCtx ends.
func (o *opportunistic) run(ctx context.Context, watchCtx context.Context) {
	e := o.e
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
			e.book.setOpportunisticWaits(nil) // a reload took opportunistic maintenance away: nothing waits for it
			continue
		}
		if t := o.startIdleTracking(watchCtx, cfg); t != nil {
			o.pass(ctx, cfg, t)
		}
	}
}

// pass decides once for every pool with opportunistic maintenance.
func (o *opportunistic) pass(ctx context.Context, cfg *config.Config, t *idleTracker) {
	e := o.e
	calendar := e.calendar(ctx, cfg.WindowsFromCluster())
	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	all := e.cachedViews()
	now := time.Now()
	waits := map[string]opportunisticWait{} // this pass's, replacing the last pass's whole
	defer e.book.setOpportunisticWaits(waits)
	for i := range cfg.Pools {
		disrupted := e.disruptedWithReserved(all)
		p := &cfg.Pools[i]
		if p.Opportunistic == nil {
			continue
		}
		var nodes []*nodeview.View
		for _, n := range all {
			if cfg.MatchPool(n.Labels) == p {
				nodes = append(nodes, n)
			}
		}
		in := policy.OpportunisticInput{Pool: p, Nodes: nodes, Idle: t.idle, Disrupted: disrupted, Claimable: e.pickable,
			AlertSaysReschedulable: e.alertSaysReschedulable, OptedOut: t.optOut, Now: now}
		members, why := policy.PickOpportunistic(in)
		if members == nil {
			o.noteOptOut(p.Name, in, t, waits)
			continue
		}
		// Windows, pause, the cluster cap and the pool's own budget hold as for any action.
		pool, cluster := policy.Survey(cfg, members[0], all, disrupted)
		req := policy.Request{Action: nodeview.OpportunisticMaintenance, CanReschedule: true}
		d := policy.Decide(cfg, policy.Input{Request: req, Node: members[0], Members: members, Pool: pool, Cluster: cluster,
			Disrupted: disrupted, Calendar: calendar, Now: now})
		if code, why := e.book.dueWorkWaits(p.Name, time.Now(), pendingTTL); code != "" && d.Verdict == policy.Act {
			// Room that frees up goes to due work first, whichever pass sees it first.
			d = policy.Decision{Verdict: policy.Wait, Pool: p.Name, Code: code, Reason: why}
		}
		if d.Verdict == policy.Wait {
			waits[p.Name] = opportunisticWait{code: d.Code, nodes: len(members)}
			key := members[0].Maintenance.Key() + "|" + d.Code
			if e.book.noteOnce(noticeOpportunisticWait, members[0].Name, key) {
				e.event(members[0].Name, members[0].UID, corev1.EventTypeNormal, reasonWaiting, "%s waits: %s (%s)", req.Action, d.Reason, why)
				e.logger.Info("opportunistic maintenance waits", "pool", p.Name, "node", members[0].Name, "reason", d.Reason)
			}
			continue
		}
		if d.Verdict != policy.Act {
			e.logger.Debug("opportunistic maintenance not started", "pool", p.Name, "node", members[0].Name, "verdict", d.Verdict, "reason", d.Reason)
			continue
		}
		if e.dryRun() {
			e.book.simulate(req.Action, members)
			for _, n := range members {
				e.metrics.actions.WithLabelValues(string(req.Action), resultDryRun).Inc()
				e.event(n.Name, n.UID, corev1.EventTypeNormal, reasonDryRun, "dry run: would start opportunistic maintenance: %s", why)
			}
			continue
		}
		if err := e.claimGroup(ctx, req.Action, members, why, true); err != nil {
			e.logger.Warn("opportunistic maintenance not claimed", "pool", p.Name, "node", members[0].Name, "err", err)
		}
		all = e.cachedViews()
	}
}

// noteOptOut records, when no unit of the pool may go, the unit that would go but for a pod that opted out: it waits
// (reason pod_opt_out) until the pod ends.
func (o *opportunistic) noteOptOut(pool string, in policy.OpportunisticInput, t *idleTracker, waits map[string]opportunisticWait) {
	e := o.e
	in.OptedOut = nil
	held, _ := policy.PickOpportunistic(in)
	if held == nil {
		return
	}
	pod := ""
	for _, n := range held {
		if pod = t.optOut(n); pod != "" {
			break
		}
	}
	if pod == "" {
		return // the second pick differs by the clock (a node idle long enough in between), not by a pod
	}
	waits[pool] = opportunisticWait{code: policy.WaitPodOptOut, nodes: len(held)}
	key := held[0].Maintenance.Key() + "|" + policy.WaitPodOptOut
	if e.book.noteOnce(noticeOpportunisticWait, held[0].Name, key) {
		e.event(held[0].Name, held[0].UID, corev1.EventTypeNormal, reasonWaiting, "%s waits: pod %s asked not to be disrupted (annotation %s or %s); optional work waits until it ends",
			nodeview.OpportunisticMaintenance, pod, policy.AnnotationDoNotDisrupt, policy.AnnotationKarpenterDoNotDisrupt)
		e.logger.Info("opportunistic maintenance waits for a pod that opted out", "pool", pool, "node", held[0].Name, "pod", pod)
	}
}

// alertSaysReschedulable reports a live alert for the node labelled can_reschedule="true".
func (e *Executor) alertSaysReschedulable(n *nodeview.View) bool {
	return e.book.saysReschedulable(n.Name)
}

// preflight is what must still hold right before work disrupts the node (evicts its pods, or asks GKE for
// maintenance): for opportunistic maintenance, every node of the operation still opted in, reschedulable, idle (read
// from the API) and working on it, since a multi-host slice is maintained as a whole. It returns why not, or "".
func (e *Executor) preflight(ctx context.Context, node *corev1.Node, rec nodeview.Record) (string, error) {
	if rec.Action != nodeview.OpportunisticMaintenance {
		return "", nil
	}
	members := []*nodeview.View{nodeview.Of(node)}
	for _, name := range rec.Group {
		if name == node.Name {
			continue
		}
		m, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "node " + name + " of the same operation is gone", nil
		}
		if err != nil {
			return "", err
		}
		v := nodeview.Of(m)
		if r := v.Record; !r.Active() && !r.MaintenanceSeen {
			return "node " + name + " of the same operation left it (" + r.Reason + ")", nil
		}
		members = append(members, v)
	}
	for _, m := range members {
		switch cr := m.Maintenance.CanReschedule; {
		case m.OpportunisticDisabled:
			return m.Name + " was labelled " + gke.LabelOpportunisticDisable + "=true", nil
		case m.OpportunisticConfigured:
			return m.Name + " is now left to GKE's own opportunistic maintenance (" + gke.AnnotationOpportunisticConfig + ")", nil
		case cr == gke.CanRescheduleFalse || cr == gke.CanRescheduleUnknown && !e.alertSaysReschedulable(m):
			return "GKE no longer says the maintenance of " + m.Name + " can be rescheduled", nil
		}
		pod, busy, err := e.acceleratorPodOn(ctx, m.Name)
		if err != nil {
			return "", err
		}
		if busy {
			return "pod " + pod + " started using an accelerator on " + m.Name + "; the node is left to it", nil
		}
	}
	return "", nil
}

// acceleratorPodOn reports a pod using an accelerator on the node, read from the API: the check that an
// opportunistic claim still holds once the node is cordoned.
func (e *Executor) acceleratorPodOn(ctx context.Context, node string) (string, bool, error) {
	pods, err := e.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return "", false, err
	}
	accelerators := e.config().AcceleratorResources
	for i := range pods.Items {
		// A pod being deleted is leaving (it may be one this service evicted), not one that landed.
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && usesAny(extendedResources(p), accelerators) {
			return p.Namespace + "/" + p.Name, true, nil
		}
	}
	return "", false, nil
}
