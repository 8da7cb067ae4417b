package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// requestWriteTimeout bounds recording a faulty-host request on its node while the sender waits for the reply.
const requestWriteTimeout = 10 * time.Second

// keepRequests records on their nodes the faulty-host reports among triggers, and removes those a resolved alert
// withdraws, before the triggers are answered: a report asked for once (report-faulty sends its request once, not
// again and again like Alertmanager) then survives a restart or a change of leader while it waits. A node the
// watch does not know is left to the decision, which reads it from the API.
func (e *Executor) keepRequests(ctx context.Context, triggers []webhook.Trigger) error {
	if e.dryRun() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestWriteTimeout)
	defer cancel()
	for _, t := range triggers {
		if t.Action != nodeview.ReportFaultyHost || t.Xid != "" {
			continue // a GPU fault's alert is repeated by Alertmanager, and its incident is the node's, not the request's
		}
		// A withdrawal is conditional on the node as read: one that changed meanwhile (a status update, another
		// controller's label) is read again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return e.keepRequest(ctx, t) })
		switch {
		case errors.Is(err, errFenced):
			return webhook.ErrNotLeader
		case err != nil && t.Firing:
			return fmt.Errorf("recording the faulty-host request on node %s: %w", t.Node, err)
		case err != nil:
			return fmt.Errorf("withdrawing the faulty-host request on node %s: %w", t.Node, err)
		}
	}
	return nil
}

// keepRequest records t's request on its node, or removes the request a resolved t withdraws.
func (e *Executor) keepRequest(ctx context.Context, t webhook.Trigger) error {
	node, ok := e.cachedNode(t.Node)
	if !t.Firing {
		// The watch may not show yet a request kept a moment ago: a withdrawal reads the node as it is.
		read, err := e.client.CoreV1().Nodes().Get(ctx, t.Node, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the node: %w", err)
		}
		node, ok = read, err == nil
	}
	if !ok {
		return nil
	}
	kept, has := nodeview.ReadReportRequest(node.Annotations)
	var value any
	var resourceVersion string // a withdrawal must not remove a newer request kept meanwhile
	switch {
	case t.Firing && ((has && kept.StartsAt.Equal(t.StartsAt) && kept.FaultBehavior == string(t.FaultBehavior)) ||
		nodeview.ReadRecord(node.Annotations).Incident == nodeview.IncidentKey(t.StartsAt)):
		return nil // kept already, or claimed
	case t.Firing && e.book.refusedFor(t.Node, nodeview.IncidentKey(t.StartsAt)):
		// Refused already (a repeat is refused again): keeping it would only be undone, a write each way per repeat.
		return nil
	case t.Firing:
		value = nodeview.ReportRequest{StartsAt: t.StartsAt, FaultBehavior: string(t.FaultBehavior), Owner: e.opts.Owner,
			ReceivedAt: time.Now()}.Encode()
	case has && !t.StartsAt.Before(kept.StartsAt):
		value, resourceVersion = nil, node.ResourceVersion // withdrawn
	default:
		return nil
	}
	_, err := e.patchNode(ctx, t.Node, nodePatch{resourceVersion: resourceVersion, leaveOwner: true,
		annotations: map[string]any{nodeview.AnnotationReportRequest: value}})
	return err
}

// adoptRequest makes the faulty-host request kept on the node its live alert, when the node has no live alert:
// after a restart or a change of leader, or once the instance that took the request is gone. A request of another
// instance whose Lease is held is left to it, and looked at again after foreignRecheck.
func (e *Executor) adoptRequest(ctx context.Context, node *nodeview.View) (liveAlert, time.Duration, bool) {
	if node.Record.Request == nil {
		return liveAlert{}, 0, false
	}
	req := *node.Record.Request
	if req.Owner != "" && req.Owner != e.opts.Owner && e.ownerLive(ctx, req.Owner) {
		return liveAlert{}, foreignRecheck, false
	}
	a, adopted := e.book.adopt(node.Name, liveAlert{trigger: requestTrigger(node.Name, req), lastSeen: req.ReceivedAt, uid: node.UID})
	if !adopted {
		return a, 0, true // received meanwhile
	}
	e.logger.Info("taking up a faulty-host request kept on the node", "node", node.Name, "incident", req.Incident(),
		"fault_behavior", req.FaultBehavior, "taken_by", req.Owner)
	return a, 0, true
}

// requestTrigger is the trigger a kept request stands for.
func requestTrigger(node string, req nodeview.ReportRequest) webhook.Trigger {
	return webhook.Trigger{Node: node, Action: nodeview.ReportFaultyHost, Firing: true,
		FaultBehavior: faultBehavior(req.FaultBehavior), StartsAt: req.StartsAt}
}

// endRequest removes the kept request for t's incident once its alert is dropped (refused, or not received again
// within the TTL). The removal is conditional on the node as cached: a request that changed meanwhile stays, and is
// decided again by the next leader.
func (e *Executor) endRequest(ctx context.Context, name string, t webhook.Trigger) {
	if t.Action != nodeview.ReportFaultyHost || e.dryRun() {
		return
	}
	node, ok := e.cachedNode(name)
	if !ok {
		return
	}
	if kept, has := nodeview.ReadReportRequest(node.Annotations); !has || !kept.StartsAt.Equal(t.StartsAt) {
		return
	}
	if _, err := e.patchNode(ctx, name, nodePatch{resourceVersion: node.ResourceVersion, leaveOwner: true,
		annotations: map[string]any{nodeview.AnnotationReportRequest: nil}}); err != nil {
		e.logger.Warn("removing an ended faulty-host request; the next leader decides it again", "node", name, "err", err)
	}
}
