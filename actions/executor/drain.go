package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/drain"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// defaultTerminationGracePeriod is the API default for pods that do not set one.
const defaultTerminationGracePeriod = 30

// drainAsync runs the node's drain in the background unless one is already running. The drain stops when ctx ends
// (leadership lost, shutdown), when the node is deleted or re-created, or when its work is abandoned; a node still
// "draining" is resumed by the next leader.
func (e *Executor) drainAsync(ctx context.Context, node *corev1.Node) {
	name, uid := node.Name, node.UID
	e.mu.Lock()
	if _, running := e.drains[name]; running || e.queue == nil {
		e.mu.Unlock()
		return
	}
	drainCtx, cancel := context.WithCancel(ctx)
	run := &drainRun{uid: uid, cancel: cancel}
	e.drains[name] = run
	e.drainWG.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.drainWG.Done()
		defer cancel()
		e.drain(drainCtx, name, uid)
		e.mu.Lock()
		if e.drains[name] == run { // a later run on the node is not this one's to forget
			delete(e.drains, name)
		}
		e.mu.Unlock()
		e.enqueue(name)
	}()
}

// stopDrain cancels the node's running drain, unless it is for the incarnation keep (empty: any).
func (e *Executor) stopDrain(name string, keep types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if run, ok := e.drains[name]; ok && (keep == "" || run.uid != keep) {
		run.cancel()
		delete(e.drains, name)
	}
}

// drain retries interrupted drains (API server unavailable, conflicts) until the drain succeeds or fails for good.
func (e *Executor) drain(ctx context.Context, name string, uid types.UID) {
	delay := time.Duration(e.config().Drain.EvictionRetryDelay)
	for {
		finished, err := e.drainOnce(ctx, name, uid)
		if finished || ctx.Err() != nil {
			return
		}
		e.logger.Warn("drain interrupted; retrying", "node", name, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// drainOnce evicts what is left on the node and records the outcome. It reports finished once the outcome is on the
// node (or the node no longer asks for a drain); an error without finished means try again.
func (e *Executor) drainOnce(ctx context.Context, name string, uid types.UID) (finished bool, err error) {
	if e.dryRun() {
		return true, nil // stopped where it is; resumed when dry run is switched off
	}
	node, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	rec := nodeview.Of(node).Record
	if node.UID != uid || rec.Phase != nodeview.Draining {
		return true, nil
	}
	timeout := time.Duration(e.config().Drain.Timeout)
	started := rec.DrainStartedAt
	if started.IsZero() {
		started = time.Now()
	}
	deadline := started.Add(timeout)

	// Now cordoned: an accelerator pod that landed before the cordon wins, and so does a change of mind.
	if why, err := e.preflight(ctx, node, rec); err != nil || why != "" {
		if err != nil {
			return false, err
		}
		return true, e.abandon(ctx, node, rec, nodestate.Observe(nodeview.Of(node)), why)
	}
	var (
		drainErr  error
		kept      []string
		permanent bool
	)
	if remaining := time.Until(deadline); remaining <= 0 {
		drainErr = fmt.Errorf("drain did not finish within %s", timeout)
	} else if kept, err, permanent = e.evict(ctx, name, deadline); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !permanent && time.Now().Before(deadline) {
			return false, err
		}
		drainErr = err
		if !permanent {
			drainErr = fmt.Errorf("drain did not finish within %s: %w", timeout, err)
		}
	}

	// Record on a fresh copy: the node changed while pods were evicted.
	node, err = e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return apierrors.IsNotFound(err), err
	}
	rec = nodeview.Of(node).Record
	if node.UID != uid || rec.Phase != nodeview.Draining || ctx.Err() != nil {
		return true, nil
	}
	if drainErr != nil {
		if err := e.fail(ctx, node, rec, drainErr.Error()); err != nil {
			return false, err
		}
		return true, nil
	}
	if err := e.drained(ctx, node, rec, kept); err != nil {
		return false, err
	}
	return true, nil
}

// drained records a finished drain: done for a drain, or the perform-maintenance request when draining came first.
// kept are the pods the policy left in place (emptyDir data, deleteEmptyDirData: false).
func (e *Executor) drained(ctx context.Context, node *corev1.Node, rec nodeview.Record, kept []string) error {
	if rec.Action.Requests() {
		if obs := nodestate.Observe(nodeview.Of(node)); !obs.InMaintenance && !obs.Maintenance.Serves(rec.Maintenance) {
			return e.abandon(ctx, node, rec, obs, "maintenance "+rec.Maintenance+" is no longer the one announced after the drain; not requested")
		}
		return e.requestMaintenance(ctx, node, rec)
	}
	annotations := map[string]any{
		nodeview.AnnotationState:      string(nodeview.Done),
		nodeview.AnnotationFinishedAt: nodeview.FormatTime(time.Now()),
	}
	msg := "drained"
	if len(kept) > 0 {
		stayed := fmt.Sprintf("%d pods with emptyDir data left in place (drain.deleteEmptyDirData: false): %s", len(kept), strings.Join(kept, ", "))
		annotations[nodeview.AnnotationReason] = stayed
		msg += "; " + stayed
	}
	_, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: annotations})
	if err != nil {
		return fmt.Errorf("recording drain done: %w", err)
	}
	e.succeeded(rec)
	switch {
	case rec.CordonedBy != "" && rec.FaultDrain():
		msg += "; the node stays cordoned until it boots anew (its host repaired), the GPU fault gone with its boot"
	case rec.CordonedBy != "":
		msg += "; the node stays cordoned until GKE has finished maintenance"
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonDrainSucceeded, "%s", msg)
	e.logger.Info("drain succeeded", "node", node.Name)
	return nil
}

// drainPollInterval is how often a drain lists the node's pods to see which are gone: one request per node, however
// many pods it has.
const drainPollInterval = time.Second

// evict evicts the node's pods through the eviction API, so PodDisruptionBudgets hold, leaving DaemonSet pods, mirror
// pods and this service's own pod, and waits until they are gone. Each pod gets its own
// terminationGracePeriodSeconds capped by drain.maxGracePeriod. A pod whose eviction is refused (429: a budget) is
// tried again after drain.evictionRetryDelay. With drain.deleteEmptyDirData false, pods with emptyDir volumes stay
// and are returned as kept. permanent marks errors that retrying cannot fix (pods the policy does not allow
// evicting).
func (e *Executor) evict(ctx context.Context, name string, deadline time.Time) (kept []string, err error, permanent bool) {
	// The deadline bounds every call: client-go itself retries a 429 that carries Retry-After (the API server sends
	// 10s while a PodDisruptionBudget's status is stale) and would outlast it.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cfg := e.config().Drain
	var keptNow []string
	keepEmptyDir := func(pod corev1.Pod) drain.PodDeleteStatus {
		if !cfg.DeleteEmptyDirData && hasEmptyDir(pod) {
			keptNow = append(keptNow, pod.Namespace+"/"+pod.Name)
			return drain.MakePodDeleteStatusSkip()
		}
		return drain.MakePodDeleteStatusOkay()
	}
	log := e.logger.With("node", name)
	helper := &drain.Helper{
		Ctx:                 ctx,
		Client:              fencedClient{e.client, e.checkFence},
		Force:               true, // pods without a controller go too: the node is about to stop anyway
		GracePeriodSeconds:  -1,
		IgnoreAllDaemonSets: true,
		// emptyDir pods are never a reason to refuse the whole drain: keepEmptyDir leaves them when the policy says so.
		DeleteEmptyDirData: true,
		AdditionalFilters:  []drain.PodFilter{e.notSelf, keepEmptyDir},
		Out:                logWriter{log},
		ErrOut:             logWriter{log},
	}
	version, err := drain.CheckEvictionSupport(e.client)
	if err != nil {
		return nil, fmt.Errorf("checking eviction support: %w", err), false
	}
	if version.Empty() {
		return nil, errors.New("the API server does not offer the eviction API"), true
	}
	maxGrace := time.Duration(cfg.MaxGracePeriod)
	cappedHelper := *helper
	cappedHelper.GracePeriodSeconds = int(maxGrace / time.Second)
	retryDelay := time.Duration(cfg.EvictionRetryDelay)
	lastTried := map[types.UID]time.Time{}
	for {
		keptNow = nil
		list, errs := helper.GetPodsForDeletion(name)
		if list == nil {
			return nil, fmt.Errorf("listing pods: %w", errors.Join(errs...)), false
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...), true
		}
		pods := list.Pods()
		if len(pods) == 0 {
			return keptNow, nil, false
		}
		var due []corev1.Pod
		for _, pod := range pods {
			if t, tried := lastTried[pod.UID]; pod.DeletionTimestamp != nil || (tried && time.Since(t) < retryDelay) {
				continue // terminating, or refused a moment ago
			}
			due = append(due, pod)
		}
		own, capped := splitByGrace(due, maxGrace)
		for _, b := range []struct {
			h    *drain.Helper
			pods []corev1.Pod
		}{{helper, own}, {&cappedHelper, capped}} {
			for _, pod := range b.pods {
				lastTried[pod.UID] = time.Now()
				err := b.h.EvictPod(pod, version)
				switch {
				case err == nil || apierrors.IsNotFound(err):
				case apierrors.IsTooManyRequests(err):
					log.Debug("eviction refused; retrying", "pod", pod.Namespace+"/"+pod.Name, "err", err, "retry_in", retryDelay)
				case ctx.Err() != nil:
					return nil, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, ctx.Err()), false
				default:
					return nil, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err), false
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d pods still on the node: %w", len(pods), ctx.Err()), false
		case <-time.After(drainPollInterval):
		}
	}
}

// hasEmptyDir reports a pod with an emptyDir volume, whose data goes with the pod.
func hasEmptyDir(pod corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// splitByGrace separates pods that keep their own grace period from those whose period exceeds the cap (zero: no
// cap).
func splitByGrace(pods []corev1.Pod, maxGrace time.Duration) (own, capped []corev1.Pod) {
	if maxGrace <= 0 {
		return pods, nil
	}
	limit := int64(maxGrace / time.Second)
	for _, p := range pods {
		grace := int64(defaultTerminationGracePeriod)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		if grace > limit {
			capped = append(capped, p)
		} else {
			own = append(own, p)
		}
	}
	return own, capped
}

// notSelf keeps the service's own pod on the node: evicting it would stop the drain half-way.
func (e *Executor) notSelf(pod corev1.Pod) drain.PodDeleteStatus {
	if e.opts.Self.Name != "" && pod.Name == e.opts.Self.Name && pod.Namespace == e.opts.Self.Namespace {
		return drain.MakePodDeleteStatusSkip()
	}
	return drain.MakePodDeleteStatusOkay()
}

// logWriter turns the drain helper's progress lines into debug logs.
type logWriter struct{ logger *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.logger.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
