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
	var drainErr error
	if remaining := time.Until(deadline); remaining <= 0 {
		drainErr = fmt.Errorf("drain did not finish within %s", timeout)
	} else if err, permanent := e.evict(ctx, name, deadline); err != nil {
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
	if err := e.drained(ctx, node, rec); err != nil {
		return false, err
	}
	return true, nil
}

// drained records a finished drain: done for a drain, or the perform-maintenance request when draining came first.
func (e *Executor) drained(ctx context.Context, node *corev1.Node, rec nodeview.Record) error {
	if rec.Action.Requests() {
		if obs := nodestate.Observe(nodeview.Of(node)); !obs.InMaintenance && !obs.Maintenance.Serves(rec.Maintenance) {
			return e.abandon(ctx, node, rec, obs, "maintenance "+rec.Maintenance+" is no longer the one announced after the drain; not requested")
		}
		return e.requestMaintenance(ctx, node, rec)
	}
	_, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:      string(nodeview.Done),
		nodeview.AnnotationFinishedAt: nodeview.FormatTime(time.Now()),
	}})
	if err != nil {
		return fmt.Errorf("recording drain done: %w", err)
	}
	e.succeeded(rec)
	msg := "drained"
	if rec.CordonedBy != "" {
		msg += "; the node stays cordoned until GKE has finished maintenance"
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonDrainSucceeded, "%s", msg)
	e.logger.Info("drain succeeded", "node", node.Name)
	return nil
}

// evict evicts the node's pods through the eviction API, so PodDisruptionBudgets hold, leaving DaemonSet pods, mirror
// pods and this service's own pod. Each pod gets its own terminationGracePeriodSeconds capped by
// drain.maxGracePeriod: the drain helper applies one grace period to all the pods it is given, so pods over the cap
// go in one batch with the cap and the others in a batch keeping their own. permanent marks errors that retrying
// cannot fix (pods the policy does not allow evicting).
func (e *Executor) evict(ctx context.Context, name string, deadline time.Time) (err error, permanent bool) {
	// The deadline bounds every call, not only the helper's wait: client-go itself retries a 429 that carries
	// Retry-After (the API server sends 10s while a PodDisruptionBudget's status is stale) and would outlast it.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	helper := &drain.Helper{
		Ctx:                  ctx,
		Client:               e.client,
		Force:                true, // pods without a controller go too: the node is about to stop anyway
		GracePeriodSeconds:   -1,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   e.config().Drain.DeleteEmptyDirData,
		Timeout:              time.Until(deadline),
		EvictErrorRetryDelay: time.Duration(e.config().Drain.EvictionRetryDelay),
		AdditionalFilters:    []drain.PodFilter{e.notSelf},
		Out:                  logWriter{e.logger.With("node", name)},
		ErrOut:               logWriter{e.logger.With("node", name)},
	}
	list, errs := helper.GetPodsForDeletion(name)
	if list == nil {
		return fmt.Errorf("listing pods: %w", errors.Join(errs...)), false
	}
	if len(errs) > 0 {
		return errors.Join(errs...), true
	}
	own, capped := splitByGrace(list.Pods(), time.Duration(e.config().Drain.MaxGracePeriod))
	batches := []struct {
		pods  []corev1.Pod
		grace int
	}{{own, -1}, {capped, int(time.Duration(e.config().Drain.MaxGracePeriod) / time.Second)}}
	results := make(chan error, len(batches))
	for _, b := range batches {
		h := *helper
		h.GracePeriodSeconds = b.grace
		go func() { results <- h.DeleteOrEvictPods(b.pods) }()
	}
	var all []error
	for range batches {
		if err := <-results; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...), false
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
