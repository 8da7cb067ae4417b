package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
)

// Event reasons on nodes.
const (
	reasonAccepted                = "DisruptionActionAccepted"
	reasonWaiting                 = "DisruptionActionWaiting"
	reasonRefused                 = "DisruptionActionRefused"
	reasonDryRun                  = "DisruptionActionDryRun"
	reasonDrainStarted            = "DisruptionDrainStarted"
	reasonDrainSucceeded          = "DisruptionDrainSucceeded"
	reasonDrainFailed             = "DisruptionDrainFailed"
	reasonActionFailed            = "DisruptionActionFailed"
	reasonMaintenanceRequested    = "DisruptionMaintenanceRequested"
	reasonMaintenanceNotRequested = "DisruptionMaintenanceNotRequested"
	reasonMaintenanceFinished     = "DisruptionMaintenanceFinished"
)

// reconcile moves one node on: it re-reads the node from the API (alerts and the cache are only hints), advances
// work in progress, or decides on an alert waiting for the node. A positive duration asks to be called again then.
func (e *Executor) reconcile(ctx context.Context, name string) (time.Duration, error) {
	node, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		e.metrics.inProgress.set(name, "", false)
		if t, ok := e.takePending(name); ok {
			e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
			e.logger.Info("skipping alert: node does not exist", "node", name, "action", t.Action)
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	rec := nodestate.Read(node)
	e.metrics.inProgress.set(name, rec.Action, rec.Active())
	if needsAttention(node) {
		if e.dryRun {
			e.logger.Debug("dry run: leaving unfinished work on the node as it is", "node", name, "action", rec.Action, "state", rec.Phase)
			return 0, nil
		}
		return 0, e.advance(ctx, node, rec)
	}
	return e.decide(ctx, node, rec)
}

// decide asks the policy about the alert waiting for node and claims the node if it may act.
func (e *Executor) decide(ctx context.Context, node *corev1.Node, rec nodestate.Record) (time.Duration, error) {
	e.mu.Lock()
	p, ok := e.pending[node.Name]
	var work pending
	if ok {
		work = *p
	}
	e.mu.Unlock()
	if !ok {
		return 0, nil
	}
	t := work.trigger
	log := e.logger.With("node", node.Name, "action", t.Action)
	if time.Since(work.lastSeen) > e.opts.PendingTTL {
		e.dropPending(node.Name, t)
		e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
		log.Info("dropping waiting work: its alert was not received again", "ttl", e.opts.PendingTTL)
		return 0, nil
	}
	if (rec.Phase == nodestate.Done || rec.Phase == nodestate.Failed) && !t.StartsAt.After(rec.TriggerStartsAt) {
		e.dropPending(node.Name, t)
		log.Debug("alert already handled on this node", "state", rec.Phase, "alert_starts_at", t.StartsAt)
		return 0, nil
	}

	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	pool, cluster := policy.Survey(e.cfg, node, e.cachedNodes())
	d := policy.Decide(e.cfg, policy.Request{Action: t.Action, CanReschedule: t.CanReschedule}, node, pool, cluster, time.Now())
	log = log.With("pool", d.Pool, "verdict", d.Verdict, "reason", d.Reason)
	switch d.Verdict {
	case policy.Refuse:
		e.dropPending(node.Name, t)
		e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
		e.event(node, corev1.EventTypeWarning, reasonRefused, "refused %s: %s", t.Action, d.Reason)
		log.Info("action refused")
		return 0, nil
	case policy.Wait:
		if e.noteWait(node.Name, d.Reason) {
			e.event(node, corev1.EventTypeNormal, reasonWaiting, "%s waits: %s", t.Action, d.Reason)
			log.Info("action waits")
		}
		return e.opts.RequeueInterval, nil
	}
	if e.dryRun {
		e.dropPending(node.Name, t)
		e.metrics.actions.WithLabelValues(string(t.Action), resultDryRun).Inc()
		e.event(node, corev1.EventTypeNormal, reasonDryRun, "dry run: would %s: %s", t.Action, d.Reason)
		log.Info("dry run: would act")
		return 0, nil
	}

	annotations := map[string]any{
		nodestate.AnnotationAction:               string(t.Action),
		nodestate.AnnotationState:                string(nodestate.Accepted),
		nodestate.AnnotationClaimedBy:            e.opts.Identity,
		nodestate.AnnotationAcceptedAt:           nodestate.FormatTime(time.Now()),
		nodestate.AnnotationTriggerStartsAt:      nodestate.FormatTime(t.StartsAt),
		nodestate.AnnotationReason:               nil,
		nodestate.AnnotationDrainStartedAt:       nil,
		nodestate.AnnotationMaintenanceSeen:      nil,
		nodestate.AnnotationFinishedAt:           nil,
		nodestate.AnnotationScheduledMaintenance: nil,
	}
	if v, ok := nodestate.ScheduledMaintenance(node); ok {
		annotations[nodestate.AnnotationScheduledMaintenance] = v
	}
	claimed, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: annotations})
	if err != nil {
		return 0, fmt.Errorf("claiming node: %w", err)
	}
	e.dropPending(node.Name, t)
	e.metrics.inProgress.set(node.Name, t.Action, true)
	e.event(node, corev1.EventTypeNormal, reasonAccepted, "accepted %s: %s", t.Action, d.Reason)
	log.Info("action accepted")
	if err := e.waitForCache(ctx, node.Name, claimed.ResourceVersion); err != nil {
		log.Warn("the next decision may not count this claim", "err", err)
	}
	e.enqueue(node.Name)
	return 0, nil
}

// advance takes the next step of work in progress, or lifts our cordon once GKE is done.
func (e *Executor) advance(ctx context.Context, node *corev1.Node, rec nodestate.Record) error {
	switch rec.Phase {
	case nodestate.Accepted:
		switch {
		case rec.Action == nodestate.Drain || (rec.Action == nodestate.PerformMaintenance && e.cfg.PerformMaintenance.DrainFirst):
			return e.startDrain(ctx, node)
		case rec.Action == nodestate.PerformMaintenance:
			return e.requestMaintenance(ctx, node, rec)
		default:
			return e.fail(ctx, node, rec, fmt.Sprintf("unknown action %q in annotation %s", rec.Action, nodestate.AnnotationAction))
		}
	case nodestate.Draining:
		e.drainAsync(ctx, node.Name)
		return nil
	default:
		return e.finishIfGKEDone(ctx, node, rec)
	}
}

// startDrain cordons the node, recording the cordon as ours only if the node was schedulable, and starts draining.
func (e *Executor) startDrain(ctx context.Context, node *corev1.Node) error {
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodestate.AnnotationState:          string(nodestate.Draining),
		nodestate.AnnotationDrainStartedAt: nodestate.FormatTime(time.Now()),
	}}
	how := "node was already cordoned (not by us; that cordon stays)"
	if !node.Spec.Unschedulable {
		p.unschedulable = ptr(true)
		p.annotations[nodestate.AnnotationCordonedBy] = e.opts.Identity
		how = "cordoned"
	}
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("cordoning: %w", err)
	}
	e.event(node, corev1.EventTypeNormal, reasonDrainStarted, "%s; draining (timeout %s)", how, time.Duration(e.cfg.Drain.Timeout))
	e.logger.Info("drain started", "node", node.Name, "cordon", how)
	e.drainAsync(ctx, node.Name)
	return nil
}

// requestMaintenance sets perform-maintenance=true: GKE starts the scheduled maintenance. If the maintenance the
// node was claimed for is no longer scheduled (it happened or moved during the drain), nothing is requested: the
// label would ask for a different event, or stay on the node for ever.
func (e *Executor) requestMaintenance(ctx context.Context, node *corev1.Node, rec nodestate.Record) error {
	if v, ok := nodestate.ScheduledMaintenance(node); !ok || (rec.ScheduledMaintenance != "" && v != rec.ScheduledMaintenance) {
		reason := fmt.Sprintf("the maintenance scheduled at %s is no longer pending; not requested", rec.ScheduledMaintenance)
		_, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
			nodestate.AnnotationState:      string(nodestate.Done),
			nodestate.AnnotationReason:     reason,
			nodestate.AnnotationFinishedAt: nodestate.FormatTime(time.Now()),
		}})
		if err != nil {
			return fmt.Errorf("recording maintenance not requested: %w", err)
		}
		e.metrics.actions.WithLabelValues(string(rec.Action), resultSkipped).Inc()
		e.metrics.inProgress.set(node.Name, "", false)
		e.event(node, corev1.EventTypeNormal, reasonMaintenanceNotRequested, "%s", reason)
		e.logger.Info("maintenance not requested", "node", node.Name, "reason", reason)
		return nil
	}
	_, err := e.patchNode(ctx, node.Name, nodePatch{
		resourceVersion: node.ResourceVersion,
		labels:          map[string]any{gke.LabelPerformMaintenance: "true"},
		annotations:     map[string]any{nodestate.AnnotationState: string(nodestate.MaintenanceRequested)},
	})
	if err != nil {
		return fmt.Errorf("requesting maintenance: %w", err)
	}
	e.succeeded(rec)
	e.event(node, corev1.EventTypeNormal, reasonMaintenanceRequested, "set %s=true: GKE starts the scheduled maintenance", gke.LabelPerformMaintenance)
	e.logger.Info("maintenance requested", "node", node.Name)
	return nil
}

// fail records a failure and lifts our cordon: a node is never left cordoned by work that gave up.
func (e *Executor) fail(ctx context.Context, node *corev1.Node, rec nodestate.Record, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024] + "…"
	}
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodestate.AnnotationState:      string(nodestate.Failed),
		nodestate.AnnotationReason:     reason,
		nodestate.AnnotationFinishedAt: nodestate.FormatTime(time.Now()),
		nodestate.AnnotationCordonedBy: nil,
	}}
	uncordoned := ""
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		uncordoned = "; uncordoned"
	}
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("recording failure: %w", err)
	}
	e.metrics.actions.WithLabelValues(string(rec.Action), resultFailed).Inc()
	e.observeDuration(rec)
	e.metrics.inProgress.set(node.Name, "", false)
	eventReason := reasonActionFailed
	if rec.Phase == nodestate.Draining {
		eventReason = reasonDrainFailed
	}
	e.event(node, corev1.EventTypeWarning, eventReason, "%s failed: %s%s", rec.Action, reason, uncordoned)
	e.logger.Error("action failed", "node", node.Name, "action", rec.Action, "reason", reason, "uncordoned", uncordoned != "")
	return nil
}

// succeeded counts an action whose own part is complete (pods evicted, or maintenance requested).
func (e *Executor) succeeded(rec nodestate.Record) {
	e.metrics.actions.WithLabelValues(string(rec.Action), resultSucceeded).Inc()
	e.observeDuration(rec)
}

func (e *Executor) observeDuration(rec nodestate.Record) {
	if !rec.AcceptedAt.IsZero() {
		e.metrics.duration.WithLabelValues(string(rec.Action)).Observe(time.Since(rec.AcceptedAt).Seconds())
	}
}

// finishIfGKEDone watches a node after our part: it notes GKE maintenance when it appears, and once GKE is done
// marks perform-maintenance work done and lifts our own cordon (never anyone else's).
func (e *Executor) finishIfGKEDone(ctx context.Context, node *corev1.Node, rec nodestate.Record) error {
	if nodestate.InMaintenance(node) && !rec.MaintenanceSeen {
		_, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion,
			annotations: map[string]any{nodestate.AnnotationMaintenanceSeen: "true"}})
		if err != nil {
			return fmt.Errorf("recording maintenance seen: %w", err)
		}
		e.logger.Info("GKE maintenance under way", "node", node.Name)
		return nil
	}
	if !gkeFinished(node, rec) {
		return nil
	}
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{nodestate.AnnotationCordonedBy: nil}}
	if rec.Phase == nodestate.MaintenanceRequested {
		p.annotations[nodestate.AnnotationState] = string(nodestate.Done)
		p.annotations[nodestate.AnnotationFinishedAt] = nodestate.FormatTime(time.Now())
	}
	msg := "GKE finished maintenance"
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		msg += "; uncordoned (our cordon)"
	}
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("finishing: %w", err)
	}
	e.metrics.inProgress.set(node.Name, "", false)
	e.event(node, corev1.EventTypeNormal, reasonMaintenanceFinished, "%s", msg)
	e.logger.Info(msg, "node", node.Name, "action", rec.Action)
	return nil
}

// gkeFinished: the node is quiet (no maintenance label or taint, no pending perform-maintenance request, Ready) and
// maintenance demonstrably happened since the claim (seen under way, or the scheduled time label gone or changed).
// Quiet alone is not enough: a drained node is quiet before its maintenance starts.
func gkeFinished(node *corev1.Node, rec nodestate.Record) bool {
	if nodestate.InMaintenance(node) || nodestate.PerformMaintenanceRequested(node) || !nodestate.Ready(node) {
		return false
	}
	if rec.MaintenanceSeen {
		return true
	}
	if rec.ScheduledMaintenance != "" {
		v, ok := nodestate.ScheduledMaintenance(node)
		return !ok || v != rec.ScheduledMaintenance
	}
	return false
}

// takePending removes and returns the node's waiting alert.
func (e *Executor) takePending(name string) (webhook.Trigger, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pending[name]
	if !ok {
		return webhook.Trigger{}, false
	}
	delete(e.pending, name)
	return p.trigger, true
}

// dropPending removes the node's waiting alert if it is still t; a newer alert that arrived meanwhile stays.
func (e *Executor) dropPending(name string, t webhook.Trigger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pending[name]; ok && p.trigger == t {
		delete(e.pending, name)
	}
}

// noteWait records a wait decision and reports whether its reason is new (worth an Event).
func (e *Executor) noteWait(name, reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pending[name]
	if !ok || p.lastReason == reason {
		return false
	}
	p.lastReason = reason
	return true
}

// event records a Kubernetes Event on the node.
func (e *Executor) event(node *corev1.Node, eventType, reason, format string, args ...any) {
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
	e.recorder.Eventf(ref, eventType, reason, format, args...)
}
