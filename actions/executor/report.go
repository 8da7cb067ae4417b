package executor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Event reasons of faulty-host reports.
const (
	reasonHostReported = "DisruptionHostReported"
	reasonReportStatus = "DisruptionReportStatus"
	reasonHostReplaced = "DisruptionHostReplaced"
)

// reported tells whether work for incident (a faulty-host report, a GPU fault's drain) must not be decided now: the
// incident is acted on already (or would have been, in a dry run), or other work on the node ends first. A
// non-empty why refuses it.
func (e *Executor) reported(rec nodeview.Record, name, incident string, t webhook.Trigger) (bool, string) {
	simulated := e.dryRun() && e.book.simulatedIncident(name) != ""
	switch {
	case rec.Incident == incident || (simulated && e.book.simulatedIncident(name) == incident):
		// A repeat (of the alert, after a restart or under a new leader): the incident has its report.
		e.book.bind(name, t, incident)
		return true, ""
	case rec.Active() && rec.Action == nodeview.ReportFaultyHost:
		return true, fmt.Sprintf("the host is already reported as faulty (%s) and the report is in progress; GKE rejects another report until it completes",
			rec.Incident)
	case rec.Active() || simulated:
		return true, ""
	case rec.Action == nodeview.ReportFaultyHost && gke.ReportStatus(rec.ReportStatus) == gke.ReportOperationDone &&
		t.StartsAt.Before(rec.FinishedAt):
		return true, fmt.Sprintf("the incident began at %s, before GKE finished replacing the host at %s: it was the replaced host's",
			t.StartsAt.UTC().Format(time.RFC3339), rec.FinishedAt.UTC().Format(time.RFC3339))
	}
	return false, ""
}

// claimIncident claims the node for work keyed on an incident rather than a maintenance: a faulty-host report of
// behavior, or a GPU fault's drain. The claim is conditional on the node as read; if it changed, the alert is
// decided again on the node as it is. Caller holds decideMu.
func (e *Executor) claimIncident(ctx context.Context, node *nodeview.View, action nodeview.Action, behavior gke.FaultBehavior, incident, why string) error {
	annotations := e.claimAnnotations(action, "")
	annotations[nodeview.AnnotationMaintenance] = nil
	annotations[nodeview.AnnotationIncident] = incident
	what := string(action) + " for incident " + incident
	if action == nodeview.ReportFaultyHost {
		annotations[nodeview.AnnotationFaultBehavior] = string(behavior)
		annotations[nodeview.AnnotationReportRequest] = nil // the request is the claim's now
		what = fmt.Sprintf("%s (%s)", action, behavior)
	}
	claimed, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: annotations})
	if err != nil {
		return fmt.Errorf("claiming node: %w", err)
	}
	e.book.served(node.Name)
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonAccepted, "accepted %s: %s", what, why)
	if err := e.waitForCache(ctx, claimed.Name, claimed.ResourceVersion); err != nil {
		e.logger.Warn("the next decision may not count this claim", "err", err)
	}
	e.enqueue(node.Name)
	return nil
}

// reportHost labels fault-behavior: GKE evicts the pods, reports the host and replaces it. A final status left by an
// earlier report is cleared with it, so every status seen afterwards is this report's.
func (e *Executor) reportHost(ctx context.Context, node *corev1.Node, rec nodeview.Record) error {
	behavior := faultBehavior(rec.FaultBehavior)
	labels := map[string]any{gke.LabelFaultBehavior: string(behavior)}
	if _, stale := node.Labels[gke.LabelReportAndReplaceStatus]; stale {
		labels[gke.LabelReportAndReplaceStatus] = nil
		labels[gke.LabelReportAndReplaceOperation] = nil
	}
	_, err := e.patchNode(ctx, node.Name, nodePatch{
		resourceVersion: node.ResourceVersion,
		labels:          labels,
		annotations: map[string]any{nodeview.AnnotationState: string(nodeview.HostReported),
			nodeview.AnnotationRequestedAt: nodeview.FormatTime(time.Now())},
	})
	if err != nil {
		return fmt.Errorf("reporting the host: %w", err)
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonHostReported,
		"set %s=%s: GKE evicts the pods, reports the host as faulty and replaces it", gke.LabelFaultBehavior, behavior)
	e.logger.Info("host reported as faulty", "node", node.Name, "fault_behavior", behavior, "incident", rec.Incident)
	return nil
}

// faultBehavior reads a behavior recorded by this service; one it cannot read is reported as unspecified.
func faultBehavior(s string) gke.FaultBehavior {
	if b, ok := gke.ParseFaultBehavior(s); ok {
		return b
	}
	return gke.FaultUnspecified
}

// noteReportStatus records GKE's new report-and-replace status, with an Event once per status.
func (e *Executor) noteReportStatus(ctx context.Context, node *corev1.Node, why string) error {
	v := nodeview.Of(node)
	if _, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion,
		annotations: map[string]any{nodeview.AnnotationReportStatus: string(v.ReportStatus)}}); err != nil {
		return fmt.Errorf("recording the report status: %w", err)
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonReportStatus, "%s%s", why, operation(v))
	e.logger.Info("report status", "node", node.Name, "status", v.ReportStatus, "operation", v.ReportOperation)
	return nil
}

// endReport ends a report once GKE's status is final: done (the host replaced, succeeded) or failed (Error, with a
// Warning Event).
func (e *Executor) endReport(ctx context.Context, node *corev1.Node, rec nodeview.Record, phase nodeview.Phase, why string) error {
	v := nodeview.Of(node)
	why += operation(v)
	if _, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:        string(phase),
		nodeview.AnnotationFinishedAt:   nodeview.FormatTime(time.Now()),
		nodeview.AnnotationReportStatus: string(v.ReportStatus),
		nodeview.AnnotationReason:       why,
	}}); err != nil {
		return fmt.Errorf("ending the report: %w", err)
	}
	if phase == nodeview.Failed {
		e.metrics.actions.WithLabelValues(string(rec.Action), resultFailed).Inc()
		e.observeDuration(rec)
		e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonActionFailed, "%s failed: %s", rec.Action, why)
		e.logger.Error("action failed", "node", node.Name, "action", rec.Action, "reason", why)
		return nil
	}
	e.succeeded(rec)
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonHostReplaced, "%s", why)
	e.logger.Info("host replaced", "node", node.Name, "operation", v.ReportOperation)
	return nil
}

// operation names GKE's Compute Engine operation in messages, when the node shows it.
func operation(v *nodeview.View) string {
	if v.ReportOperation == "" {
		return ""
	}
	return "; operation " + v.ReportOperation
}
