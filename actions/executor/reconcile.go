package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Event reasons on nodes.
const (
	reasonAccepted             = "DisruptionActionAccepted"
	reasonWaiting              = "DisruptionActionWaiting"
	reasonRefused              = "DisruptionActionRefused"
	reasonDryRun               = "DisruptionActionDryRun"
	reasonAbandoned            = "DisruptionActionAbandoned"
	reasonHandedOver           = "DisruptionHandedOverToGKE"
	reasonDrainStarted         = "DisruptionDrainStarted"
	reasonDrainSucceeded       = "DisruptionDrainSucceeded"
	reasonDrainFailed          = "DisruptionDrainFailed"
	reasonActionFailed         = "DisruptionActionFailed"
	reasonMaintenanceRequested = "DisruptionMaintenanceRequested"
	reasonMaintenanceStarted   = "DisruptionMaintenanceStarted"
	reasonMaintenanceFinished  = "DisruptionMaintenanceFinished"
	reasonOverlap              = "DisruptionActionOverlap"
)

// reconcile moves one node on: it re-reads the node from the API (alerts and the cache are only hints), takes the
// next step of work in progress (nodestate.Next), or decides on the node's live alert.
func (e *Executor) reconcile(ctx context.Context, name string) (after time.Duration, err error) {
	node, err := e.readNode(ctx, name)
	if apierrors.IsNotFound(err) {
		if a, ok := e.book.alert(name); ok {
			e.book.withdraw(name, a.trigger)
			e.metrics.actions.WithLabelValues(string(a.trigger.Action), resultSkipped).Inc()
			e.logger.Info("skipping alert: node does not exist", "node", name, "action", a.trigger.Action)
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	view := nodeview.Of(node)
	rec, obs := view.Record, nodestate.Observe(view)
	if rec.Active() {
		e.book.served(name)
	}
	if (rec.Active() || rec.HoldsCordon()) && !e.dryRun() {
		if !e.mayAct(ctx, rec) {
			e.noteForeign(node, rec)
			return foreignRecheck, nil
		}
		if obs.Upgrade, err = e.poolUpgrade(ctx, view); err != nil {
			return 0, err
		}
		step, why := nodestate.Next(rec, obs, e.config().PerformMaintenance.DrainFirst)
		if rec.Phase.WaitsForUpgrade() {
			// GKE's operation, other members' claims and the deadline move on with time, not with this node.
			defer func() {
				if err == nil && (after == 0 || e.opts.RequeueInterval < after) {
					after = e.opts.RequeueInterval
				}
			}()
		}
		if step != nodestate.StepNone {
			return 0, e.apply(ctx, node, rec, obs, step, why)
		}
		if left, due := e.startDeadline(rec, obs); due {
			return 0, e.notStarted(ctx, node, rec, obs)
		} else if left > 0 {
			defer func() { // woken at the deadline
				if after == 0 || left < after {
					after = left
				}
			}()
		}
	}
	return e.decide(ctx, view)
}

// reasonNotStarted begins the reason of a request GKE did not take up within its start deadline.
const reasonNotStarted = "not_started"

// startDeadline is how long a request GKE has shown nothing for still has, or due once it has had its deadline: a
// perform-maintenance request with no maintenance under way (performMaintenance.startDeadline), a faulty-host
// report with no report-and-replace status (reportFaultyHost.startDeadline).
func (e *Executor) startDeadline(rec nodeview.Record, obs nodestate.Observation) (left time.Duration, due bool) {
	var deadline time.Duration
	switch cfg := e.config(); {
	case rec.Phase == nodeview.MaintenanceRequested && !rec.MaintenanceSeen && !obs.InMaintenance:
		deadline = time.Duration(cfg.PerformMaintenance.StartDeadline)
	case rec.Phase == nodeview.HostReported && rec.ReportStatus == "" && obs.ReportStatus == "":
		deadline = time.Duration(cfg.ReportFaultyHost.StartDeadline)
	default:
		return 0, false
	}
	since := rec.RequestedAt
	if since.IsZero() {
		since = rec.AcceptedAt
	}
	left = time.Until(since.Add(deadline))
	return left, left <= 0
}

// notStarted ends a request GKE has not taken up in time: failed (not_started), the request (perform-maintenance or
// fault-behavior label) withdrawn and our cordon lifted, so the slot is free again; the Warning Event and
// gke_disruption_actions_total{result="failed"} tell the operator.
func (e *Executor) notStarted(ctx context.Context, node *corev1.Node, rec nodeview.Record, obs nodestate.Observation) error {
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:      string(nodeview.Failed),
		nodeview.AnnotationFinishedAt: nodeview.FormatTime(time.Now()),
		nodeview.AnnotationCordonedBy: nil,
	}}
	var reason string
	if rec.Action == nodeview.ReportFaultyHost {
		reason = fmt.Sprintf("%s: GKE showed no %s within reportFaultyHost.startDeadline (%s) of the report; GKE older than %s, or a VM it cannot report, ignores %s",
			reasonNotStarted, gke.LabelReportAndReplaceStatus, time.Duration(e.config().ReportFaultyHost.StartDeadline), gke.FaultReportVersion, gke.LabelFaultBehavior)
		if obs.FaultBehavior != "" {
			p.labels = map[string]any{gke.LabelFaultBehavior: nil}
			reason += "; label removed"
		}
	} else {
		reason = fmt.Sprintf("%s: GKE did not start maintenance %s within performMaintenance.startDeadline (%s) of the request; request withdrawn",
			reasonNotStarted, rec.Maintenance, time.Duration(e.config().PerformMaintenance.StartDeadline))
		if obs.PerformRequested {
			p.labels = map[string]any{gke.LabelPerformMaintenance: nil}
		}
	}
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		reason += "; uncordoned (our cordon)"
	}
	p.annotations[nodeview.AnnotationReason] = reason
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("ending a request GKE did not take up: %w", err)
	}
	e.metrics.actions.WithLabelValues(string(rec.Action), resultFailed).Inc()
	e.observeDuration(rec)
	e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonActionFailed, "%s failed: %s", rec.Action, reason)
	e.logger.Error("action failed", "node", node.Name, "action", rec.Action, "reason", reason)
	return nil
}

// readNode reads the node from the API, except in two cases the cache serves: an alert that already waits, on a node
// without work (it was decided on the node as the API gave it, and is decided again on every change the watch
// brings; a claim made from the cache is still conditional on the node's resourceVersion), and work another live
// instance owns (looked at only for its owner's Lease). Hundreds of waiting alerts thus cost no API requests.
func (e *Executor) readNode(ctx context.Context, name string) (*corev1.Node, error) {
	if w, ok := e.cached(name); ok {
		r := w.view.Record
		a, alerted := e.book.alert(name)
		waiting := alerted && a.waitCode != "" && !r.Active() && !r.HoldsCordon()
		foreign := (r.Active() || r.HoldsCordon()) && r.Owner != "" && r.Owner != e.opts.Owner && e.ownerLive(ctx, r.Owner)
		if waiting || foreign {
			return w.Node.DeepCopy(), nil
		}
	}
	return e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// apply carries out one lifecycle step.
func (e *Executor) apply(ctx context.Context, node *corev1.Node, rec nodeview.Record, obs nodestate.Observation, step nodestate.Step, why string) error {
	switch step {
	case nodestate.StepStartDrain:
		if err := e.completeGroup(ctx, node, rec); err != nil {
			return err
		}
		return e.startDrain(ctx, node)
	case nodestate.StepRequest:
		if err := e.completeGroup(ctx, node, rec); err != nil {
			return err
		}
		return e.requestMaintenance(ctx, node, rec)
	case nodestate.StepContinueDrain:
		e.drainAsync(ctx, node)
		return nil
	case nodestate.StepNoteSeen:
		if _, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion,
			annotations: map[string]any{nodeview.AnnotationMaintenanceSeen: "true"}}); err != nil {
			return fmt.Errorf("recording maintenance seen: %w", err)
		}
		e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonMaintenanceStarted, "%s", why)
		e.logger.Info("GKE maintenance under way", "node", node.Name)
		return nil
	case nodestate.StepYield, nodestate.StepAbandon:
		return e.abandon(ctx, node, rec, obs, why)
	case nodestate.StepFinish:
		if rec.Action == nodeview.ReportFaultyHost {
			return e.endReport(ctx, node, rec, nodeview.Done, why)
		}
		return e.finish(ctx, node, rec, why)
	case nodestate.StepReport:
		return e.reportHost(ctx, node, rec)
	case nodestate.StepNoteReportStatus:
		return e.noteReportStatus(ctx, node, why)
	case nodestate.StepFail:
		return e.endReport(ctx, node, rec, nodeview.Failed, why)
	case nodestate.StepHandOver:
		return e.handOver(ctx, node, rec, why)
	case nodestate.StepAwaitUpgrade:
		return e.awaitUpgrade(ctx, node, why)
	case nodestate.StepRequestUpgrade:
		return e.requestUpgrade(ctx, nodeview.Of(node))
	case nodestate.StepNoteUpgradeRequested:
		return e.noteUpgradeRequested(ctx, node, why)
	case nodestate.StepUpgradeDone:
		if err := e.endUpgrade(ctx, nodeview.Of(node), upgrades.Done, why); err != nil {
			return err
		}
		return e.finish(ctx, node, rec, why)
	case nodestate.StepUpgradeFailed:
		if err := e.endUpgrade(ctx, nodeview.Of(node), upgrades.Failed, why); err != nil {
			return err
		}
		return e.upgradeFailed(ctx, node, rec, why)
	}
	return fmt.Errorf("unknown lifecycle step %q", step)
}

// decide asks the policy about the node's live alert and claims the node, with the nodes that must go with it.
func (e *Executor) decide(ctx context.Context, node *nodeview.View) (time.Duration, error) {
	a, ok := e.book.alert(node.Name)
	if !ok {
		var recheck time.Duration
		if a, recheck, ok = e.adoptRequest(ctx, node); !ok {
			return recheck, nil
		}
	}
	t := a.trigger
	rec, m := node.Record, node.Maintenance
	log := e.logger.With("node", node.Name, "action", t.Action, "maintenance", m.Key())
	if time.Since(a.lastSeen) > pendingTTL {
		e.book.withdraw(node.Name, t)
		e.endRequest(ctx, node.Name, t)
		if a.waitCode != "" {
			e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
		}
		log.Info("dropping alert: it was not received again", "ttl", pendingTTL)
		return 0, nil
	}
	// key identifies what the work serves: the maintenance, or for a faulty-host report or a GPU fault's drain the
	// incident.
	key, report := m.Key(), t.Action == nodeview.ReportFaultyHost
	faultDrain := t.Action == nodeview.Drain && t.Xid != ""
	incident := report || faultDrain
	if report && a.uid != "" && a.uid != node.UID {
		// The node was deleted and re-created under its name (a new VM) since the report was asked for; the request
		// kept on the old node went with it.
		e.book.withdraw(node.Name, t)
		e.metrics.actions.WithLabelValues(string(t.Action), resultSkipped).Inc()
		log.Info("skipping faulty-host report: the node was re-created since it was asked for", "uid", node.UID, "asked_for", a.uid)
		return 0, nil
	}
	if incident {
		key = incidentOf(t, node)
		if done, why := e.reported(rec, node.Name, key, t); done {
			if why != "" {
				e.book.withdraw(node.Name, t)
				e.endRequest(ctx, node.Name, t)
				e.refuse(node, key, t.Action, why)
			}
			return 0, nil
		}
	} else {
		if nodestate.Serves(rec, m) || (e.dryRun() && e.book.simulatedServes(node)) {
			// A repeat: work for this maintenance exists, in progress or finished, whatever the alert's startsAt.
			e.book.bind(node.Name, t, m.Key())
			return 0, nil
		}
		if rec.Active() {
			return 0, nil // work for another maintenance ends first (nodestate.Next)
		}
		if start, ok := nodeview.KeyStart(a.maintenance); ok && m.Pending() && !m.Serves(a.maintenance) && m.Start().After(start) {
			// Not a refusal of the new maintenance: the alert has not spoken about it yet.
			e.book.stopsWaiting(node.Name, t)
			if e.book.noteOnce(noticeWait, node.Name, m.Key()+"|moved") {
				e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonWaiting, "%s not started: the alert was decided for maintenance %s, which has moved later to %s; it acts when the alert is received again",
					t.Action, a.maintenance, m.Key())
				log.Info("alert is for a maintenance that moved later; waiting for it to be received again", "alert_maintenance", a.maintenance)
			}
			return 0, nil
		}
	}

	cfg := e.config()
	calendar := e.calendar(ctx, readsCalendar(cfg, node, t.Action))
	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	if !report && e.dryRun() && e.book.simulatedServes(node) {
		// A group decided while this decision waited took the node in: a repeat, as a real claim's conflict makes it.
		e.book.bind(node.Name, t, m.Key())
		return 0, nil
	}
	all := e.cachedViews()
	disrupted := e.disruptedWithReserved(all)
	pool, cluster := policy.Survey(cfg, node, all, disrupted)
	// A GPU fault is failed hardware, whatever the alert's reasons.
	req := policy.RequestFor(t.Action, t.CanReschedule, t.HardwareFailure || t.Xid != "", m)
	members := []*nodeview.View{node} // an incident is about one host
	if !incident {
		members = e.members(node, req, policy.Scope(cfg, node, pool, all))
	}
	var fault *policy.GPUFault
	var ledger repairs.Ledger
	if incident && t.Xid != "" {
		fault = &policy.GPUFault{Xid: t.Xid, Incident: key}
		var err error
		if ledger, err = e.repairs.read(ctx, e.dryRun()); err != nil {
			return 0, err
		}
	}
	d := policy.Decide(cfg, policy.Input{Request: req, Node: node, Members: members, Pool: pool, Cluster: cluster,
		Disrupted: disrupted, Reclaimable: e.reclaimable(all), Fault: fault, Ledger: ledger, Calendar: calendar, Now: time.Now()})
	log = log.With("pool", d.Pool, "verdict", d.Verdict, "reason", d.Reason, "members", len(members))
	e.book.bind(node.Name, t, key)
	switch d.Verdict {
	case policy.Refuse:
		e.book.withdraw(node.Name, t)
		e.endRequest(ctx, node.Name, t)
		if d.Hold != "" {
			return 0, e.hold(ctx, node, t.Action, fault, d)
		}
		e.refuse(node, key, t.Action, d.Reason)
		return 0, nil
	case policy.Wait:
		e.book.waits(node.Name, t, d.Pool, d.Code)
		if e.book.noteOnce(noticeWait, node.Name, key+"|"+d.Code) {
			e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonWaiting, "%s waits: %s", t.Action, d.Reason)
			log.Info("action waits")
		}
		if d.Code == policy.WaitWindow || d.Code == policy.WaitGKEAPI {
			return e.opts.RequeueInterval, nil // windows open with time, not with node changes
		}
		if len(d.GiveBack) > 0 {
			if err := e.giveBack(ctx, d.GiveBack, t.Action, node.Name, m.Key()); err != nil {
				return 0, err
			}
			return giveBackRecheck, nil // decided again with the room, once the cache has the nodes given back
		}
		// Budgets and pauses change with nodes and the policy, which decide the alert again; the TTL still ends it.
		return e.opts.PendingTTL, nil
	}
	if fault != nil {
		// Written ahead of the claim: the repair counts against the guard rails even if the claim is interrupted.
		if err := e.recordRepair(ctx, node, fault, d); err != nil {
			return 0, err
		}
	}
	if e.dryRun() {
		if incident {
			e.book.simulateReport(node.Name, key)
		} else {
			e.book.simulate(t.Action, members)
		}
		for _, n := range members {
			e.metrics.actions.WithLabelValues(string(t.Action), resultDryRun).Inc()
			e.event(n.Name, n.UID, corev1.EventTypeNormal, reasonDryRun, "dry run: would %s: %s", t.Action, d.Reason)
		}
		log.Info("dry run: would act")
		return 0, nil
	}
	if incident {
		if err := e.claimIncident(ctx, node, t.Action, t.FaultBehavior, key, d.Reason); err != nil {
			return 0, err
		}
	} else if err := e.claimGroup(ctx, t.Action, members, d.Reason, false); err != nil {
		return 0, err
	}
	log.Info("action accepted")
	return 0, nil
}

// incidentOf is the incident a faulty-host report or a GPU fault's drain serves: for a GPU fault (the alert's Xid) the node's boot and the
// Xid, so the alert's repeats, later episodes and a gauge that stays at the Xid are one incident per boot; else the
// alert's episode.
func incidentOf(t webhook.Trigger, node *nodeview.View) string {
	if t.Xid != "" {
		return nodeview.GPUIncidentKey(node.BootID, t.Xid)
	}
	return nodeview.IncidentKey(t.StartsAt)
}

// disruptedWithReserved is e.disrupted, plus the room that groups claimed half-way reserved (nodeview.Reserved).
func (e *Executor) disruptedWithReserved(all []*nodeview.View) func(*nodeview.View) bool {
	reserved := nodeview.Reserved(all)
	return func(n *nodeview.View) bool { return reserved(n) || e.disrupted(n) }
}

// members are the nodes of scope that go with node: node first, then those with the same action pending, by name.
// A node has the same action pending when its maintenance is announced and not yet served by any work, and its own
// live alert asks for the action; without an alert, perform-maintenance needs GKE's word that the maintenance can be
// rescheduled, and a drain a maintenance due no later than node's (later ones are drained in their own turn).
func (e *Executor) members(node *nodeview.View, req policy.Request, scope []*nodeview.View) []*nodeview.View {
	out := []*nodeview.View{node}
	if len(scope) <= 1 {
		return out
	}
	due := node.Maintenance.Start()
	for _, n := range scope {
		if n.Name == node.Name || !e.claimable(n) {
			continue
		}
		m := n.Maintenance
		if a, ok := e.book.alert(n.Name); ok && time.Since(a.lastSeen) <= pendingTTL {
			if a.trigger.Action != req.Action || (req.Action.Requests() && !a.trigger.CanReschedule && !m.Reschedulable()) {
				continue
			}
		} else if req.Action.Requests() {
			if !m.Reschedulable() {
				continue
			}
		} else if m.Reschedulable() || m.Start().After(due) {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out[1:], func(a, b *nodeview.View) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// claimable: maintenance announced on the node, no GKE maintenance or request under way, and no work of ours on it
// (in progress, holding a cordon, or already done for this maintenance).
func (e *Executor) claimable(n *nodeview.View) bool {
	m, r := n.Maintenance, n.Record
	if !m.Pending() || n.Deleting || n.InMaintenance || n.PerformMaintenanceRequested ||
		r.Active() || r.HoldsCordon() || nodestate.Serves(r, m) {
		return false
	}
	return !(e.dryRun() && e.book.simulatedServes(n))
}

// claimGroup claims the nodes for one operation. Every claim records the whole group, so if this replica stops
// half-way the next leader claims the rest before any member proceeds (completeGroup). Caller holds decideMu.
func (e *Executor) claimGroup(ctx context.Context, action nodeview.Action, members []*nodeview.View, why string, opportunistic bool) error {
	group := ""
	if len(members) > 1 {
		names := make([]string, len(members))
		for i, n := range members {
			names[i] = n.Name
		}
		slices.Sort(names)
		group = strings.Join(names, ",")
	}
	var last *corev1.Node
	for i, n := range members {
		claimed, err := e.claim(ctx, n, action, group, opportunistic)
		if err != nil {
			if i == 0 {
				return fmt.Errorf("claiming node: %w", err)
			}
			e.logger.Warn("claiming a group member failed; the group completes it before any member proceeds", "node", n.Name, "err", err)
			continue
		}
		last = claimed
		e.book.served(n.Name)
		e.event(n.Name, n.UID, corev1.EventTypeNormal, reasonAccepted, "accepted %s: %s", action, why)
	}
	if last != nil {
		if err := e.waitForCache(ctx, last.Name, last.ResourceVersion); err != nil {
			e.logger.Warn("the next decision may not count this claim", "err", err)
		}
	}
	for _, n := range members {
		e.enqueue(n.Name)
	}
	return nil
}

// errNotClaimable: a node that changed since it was read may no longer be claimed (it left the group).
var errNotClaimable = errors.New("it may no longer be claimed")

// claim records the claim on a node with a conditional patch. A node that changed since it was read (a cached group
// member) is read again and claimed only if it still may be.
func (e *Executor) claim(ctx context.Context, node *nodeview.View, action nodeview.Action, group string, opportunistic bool) (*corev1.Node, error) {
	annotations := e.claimAnnotations(action, node.Maintenance.Key())
	if group != "" {
		annotations[nodeview.AnnotationGroup] = group
	}
	if opportunistic {
		annotations[nodeview.AnnotationOpportunistic] = "true"
	}
	claimed, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: annotations})
	if !apierrors.IsConflict(err) {
		return claimed, err
	}
	if opportunistic {
		// Picked from what the node was; the next pass picks again from what it is now.
		return nil, fmt.Errorf("node %s changed: %w", node.Name, errNotClaimable)
	}
	fresh, err := e.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	freshView := nodeview.Of(fresh)
	if !e.claimable(freshView) {
		return nil, fmt.Errorf("node %s changed: %w", node.Name, errNotClaimable)
	}
	annotations[nodeview.AnnotationMaintenance] = freshView.Maintenance.Key()
	return e.patchNode(ctx, node.Name, nodePatch{resourceVersion: fresh.ResourceVersion, annotations: annotations})
}

// claimAnnotations are the annotations of a fresh claim for action on work keyed on maintenance: the record of any
// earlier work is cleared, except the incident last reported (AnnotationIncident), which outlives other work.
func (e *Executor) claimAnnotations(action nodeview.Action, maintenance string) map[string]any {
	return map[string]any{
		nodeview.AnnotationAction:          string(action),
		nodeview.AnnotationState:           string(nodeview.Accepted),
		nodeview.AnnotationClaimedBy:       e.opts.Identity,
		nodeview.AnnotationOwner:           e.opts.Owner,
		nodeview.AnnotationAcceptedAt:      nodeview.FormatTime(time.Now()),
		nodeview.AnnotationMaintenance:     maintenance,
		nodeview.AnnotationGroup:           nil,
		nodeview.AnnotationReason:          nil,
		nodeview.AnnotationDrainStartedAt:  nil,
		nodeview.AnnotationMaintenanceSeen: nil,
		nodeview.AnnotationFinishedAt:      nil,
		nodeview.AnnotationRequestedAt:     nil,
		nodeview.AnnotationOpportunistic:   nil,
		nodeview.AnnotationFaultBehavior:   nil,
		nodeview.AnnotationReportStatus:    nil,
		nodeview.AnnotationUpgradeSince:    nil,
	}
}

// completeGroup claims the members of node's group that are not claimed yet (the replica that claimed the group
// stopped half-way), so the group proceeds as a whole. Members that may no longer be claimed are left out.
func (e *Executor) completeGroup(ctx context.Context, node *corev1.Node, rec nodeview.Record) error {
	if len(rec.Group) < 2 {
		return nil
	}
	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	group := strings.Join(rec.Group, ",")
	var missing []*nodeview.View
	for _, name := range rec.Group {
		if name == node.Name {
			continue
		}
		cached, ok := e.cached(name)
		if !ok {
			continue
		}
		n := cached.view
		if r := n.Record; strings.Join(r.Group, ",") == group && (r.Active() || r.Phase == nodeview.Done || r.Phase == nodeview.Failed) {
			continue
		}
		if e.claimable(n) {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e.logger.Info("completing a group claimed half-way", "node", node.Name, "missing", len(missing))
	for _, n := range missing {
		claimed, err := e.claim(ctx, n, rec.Action, group, rec.Opportunistic)
		if errors.Is(err, errNotClaimable) {
			e.logger.Info("group member left the group", "node", n.Name, "err", err)
			continue
		}
		if err != nil {
			// No member proceeds while the group is claimed half-way; the step is tried again.
			return fmt.Errorf("completing the group: claiming %s: %w", n.Name, err)
		}
		e.book.served(n.Name)
		e.event(n.Name, n.UID, corev1.EventTypeNormal, reasonAccepted, "accepted %s: completing the group of %d nodes", rec.Action, len(rec.Group))
		if err := e.waitForCache(ctx, claimed.Name, claimed.ResourceVersion); err != nil {
			e.logger.Warn("the next decision may not count this claim", "err", err)
		}
		e.enqueue(n.Name)
	}
	return nil
}

// startDrain cordons the node, recording the cordon as ours only if the node was schedulable, and starts draining.
func (e *Executor) startDrain(ctx context.Context, node *corev1.Node) error {
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:          string(nodeview.Draining),
		nodeview.AnnotationDrainStartedAt: nodeview.FormatTime(time.Now()),
	}}
	how := "node was already cordoned (not by us; that cordon stays)"
	if !node.Spec.Unschedulable {
		p.unschedulable = ptr(true)
		p.annotations[nodeview.AnnotationCordonedBy] = e.opts.Identity
		how = "cordoned"
	}
	drained, err := e.patchNode(ctx, node.Name, p)
	if err != nil {
		return fmt.Errorf("cordoning: %w", err)
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonDrainStarted, "%s; draining (timeout %s)%s", how, time.Duration(e.config().Drain.Timeout),
		e.optOutsIgnored(ctx, node.Name))
	e.logger.Info("drain started", "node", node.Name, "cordon", how)
	e.drainAsync(ctx, drained)
	return nil
}

// optOutsIgnored says which pods on the node asked not to be disrupted: a drain is mandatory work and goes anyway.
func (e *Executor) optOutsIgnored(ctx context.Context, node string) string {
	pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return ""
	}
	var names []string
	for i := range pods.Items {
		if policy.OptsOut(&pods.Items[i]) {
			names = append(names, pods.Items[i].Namespace+"/"+pods.Items[i].Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("; pods %s asked not to be disrupted, but this drain serves maintenance that will stop them anyway",
		strings.Join(names, ", "))
}

// requestMaintenance sets perform-maintenance=true: GKE starts the scheduled maintenance. The lifecycle only gets
// here while the maintenance the node was claimed for is still the one announced.
func (e *Executor) requestMaintenance(ctx context.Context, node *corev1.Node, rec nodeview.Record) error {
	// A drain before may have taken a while: ask again right before the request.
	if why, err := e.preflight(ctx, node, rec); err != nil || why != "" {
		if err != nil {
			return err
		}
		return e.abandon(ctx, node, rec, nodestate.Observe(nodeview.Of(node)), why+"; maintenance not requested")
	}
	_, err := e.patchNode(ctx, node.Name, nodePatch{
		resourceVersion: node.ResourceVersion,
		labels:          map[string]any{gke.LabelPerformMaintenance: "true"},
		annotations: map[string]any{nodeview.AnnotationState: string(nodeview.MaintenanceRequested),
			nodeview.AnnotationRequestedAt: nodeview.FormatTime(time.Now())},
	})
	if err != nil {
		return fmt.Errorf("requesting maintenance: %w", err)
	}
	e.succeeded(rec)
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonMaintenanceRequested, "set %s=true: GKE starts maintenance %s", gke.LabelPerformMaintenance, rec.Maintenance)
	e.logger.Info("maintenance requested", "node", node.Name, "maintenance", rec.Maintenance)
	return nil
}

// fail records a failed drain. Our cordon stays while maintenance that cannot be moved is still pending (pods placed
// there would be killed by it anyway); otherwise it is lifted.
func (e *Executor) fail(ctx context.Context, node *corev1.Node, rec nodeview.Record, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024] + "…"
	}
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:      string(nodeview.Failed),
		nodeview.AnnotationFinishedAt: nodeview.FormatTime(time.Now()),
	}}
	cordon := ""
	switch {
	case rec.CordonedBy == "":
	case nodestate.KeepCordonOnFailure(rec, nodestate.Observe(nodeview.Of(node))):
		cordon = "; the node stays cordoned: maintenance " + rec.Maintenance + " cannot be moved and is still pending, so pods placed there would be stopped by it"
	default:
		p.annotations[nodeview.AnnotationCordonedBy] = nil
		if node.Spec.Unschedulable {
			p.unschedulable = ptr(false)
			cordon = "; uncordoned"
		}
	}
	p.annotations[nodeview.AnnotationReason] = reason + cordon
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("recording failure: %w", err)
	}
	e.metrics.actions.WithLabelValues(string(rec.Action), resultFailed).Inc()
	e.observeDuration(rec)
	eventReason := reasonActionFailed
	if rec.Phase == nodeview.Draining {
		eventReason = reasonDrainFailed
	}
	e.event(node.Name, node.UID, corev1.EventTypeWarning, eventReason, "%s failed: %s%s", rec.Action, reason, cordon)
	e.logger.Error("action failed", "node", node.Name, "action", rec.Action, "reason", reason, "cordon", cordon)
	return nil
}

// abandon ends work whose maintenance moved or vanished before GKE started it, or that GKE started first: it lifts
// our cordon and our perform-maintenance request, so a new maintenance is new work.
func (e *Executor) abandon(ctx context.Context, node *corev1.Node, rec nodeview.Record, obs nodestate.Observation, why string) error {
	p := endWork(node, rec, why)
	forgetUnseen(p, rec, obs)
	msg := why
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		msg += "; uncordoned (our cordon)"
	}
	if rec.Phase == nodeview.MaintenanceRequested && obs.PerformRequested {
		p.labels = map[string]any{gke.LabelPerformMaintenance: nil}
		msg += "; perform-maintenance request withdrawn"
	}
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("ending work: %w", err)
	}
	e.stopDrain(node.Name, "") // after the patch: abandon may run inside the drain it stops
	if rec.Phase == nodeview.Accepted || rec.Phase == nodeview.Draining || rec.Phase == nodeview.HostReported {
		e.metrics.actions.WithLabelValues(string(rec.Action), resultSkipped).Inc()
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonAbandoned, "%s: %s", rec.Action, msg)
	e.logger.Info("work ended", "node", node.Name, "action", rec.Action, "why", msg)
	return nil
}

// endWork is the patch that ends the work on node for why: done unless it ended already, our cordon no longer
// marked ours (lifting it, or not, is the caller's).
func endWork(node *corev1.Node, rec nodeview.Record, why string) nodePatch {
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationReason:     why,
		nodeview.AnnotationCordonedBy: nil,
	}}
	if rec.Active() {
		p.annotations[nodeview.AnnotationState] = string(nodeview.Done)
		p.annotations[nodeview.AnnotationFinishedAt] = nodeview.FormatTime(time.Now())
	}
	return p
}

// handOver ends work on a node GKE's own operation drains and replaces: done, our drain stopped, the cordon left in
// place and no longer marked ours, so that nothing of ours lifts it under GKE's drain; our perform-maintenance
// request, if any, goes with the node.
func (e *Executor) handOver(ctx context.Context, node *corev1.Node, rec nodeview.Record, why string) error {
	p := endWork(node, rec, why)
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("handing the node over to GKE: %w", err)
	}
	e.stopDrain(node.Name, "")
	if rec.Phase == nodeview.Accepted || rec.Phase == nodeview.Draining {
		e.metrics.actions.WithLabelValues(string(rec.Action), resultSkipped).Inc()
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonHandedOver, "%s: %s", rec.Action, why)
	e.logger.Info("work handed over to GKE", "node", node.Name, "action", rec.Action, "why", why)
	return nil
}

// finish ends work once GKE has finished: perform-maintenance becomes done, and our cordon (never anyone else's) is
// lifted.
func (e *Executor) finish(ctx context.Context, node *corev1.Node, rec nodeview.Record, why string) error {
	p := nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{nodeview.AnnotationCordonedBy: nil}}
	if rec.Active() {
		p.annotations[nodeview.AnnotationState] = string(nodeview.Done)
		p.annotations[nodeview.AnnotationFinishedAt] = nodeview.FormatTime(time.Now())
	}
	obs := nodestate.Observe(nodeview.Of(node))
	forgetUnseen(p, rec, obs)
	msg := why
	if rec.Phase == nodeview.MaintenanceRequested && obs.PerformRequested {
		// GKE did the maintenance but left our request: it would start the next one at once.
		p.labels = map[string]any{gke.LabelPerformMaintenance: nil}
		msg += "; perform-maintenance request removed"
	}
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		msg += "; uncordoned (our cordon)"
	}
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("finishing: %w", err)
	}
	e.stopDrain(node.Name, "")
	if rec.Phase == nodeview.Draining {
		e.metrics.actions.WithLabelValues(string(rec.Action), resultSkipped).Inc()
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonMaintenanceFinished, "%s", msg)
	e.logger.Info(msg, "node", node.Name, "action", rec.Action)
	return nil
}

// forgetUnseen drops the maintenance key from work that ends without GKE maintenance ever seen: the work did not
// serve it, so if the same maintenance is announced again (a label that flapped) it is new work, not a repeat.
func forgetUnseen(p nodePatch, rec nodeview.Record, obs nodestate.Observation) {
	if !rec.MaintenanceSeen && !obs.InMaintenance {
		p.annotations[nodeview.AnnotationMaintenance] = nil
	}
}

// succeeded counts an action whose own part is complete (pods evicted, or maintenance requested).
func (e *Executor) succeeded(rec nodeview.Record) {
	e.metrics.actions.WithLabelValues(string(rec.Action), resultSucceeded).Inc()
	e.observeDuration(rec)
}

func (e *Executor) observeDuration(rec nodeview.Record) {
	if !rec.AcceptedAt.IsZero() {
		e.metrics.duration.WithLabelValues(string(rec.Action)).Observe(time.Since(rec.AcceptedAt).Seconds())
	}
}

// refuse counts and events a refusal once per (node, maintenance, reason): Alertmanager's repeats are not news.
func (e *Executor) refuse(node *nodeview.View, maintenance string, action nodeview.Action, reason string) {
	if !e.book.noteOnce(noticeRefusal, node.Name, maintenance+"|"+reason) {
		return
	}
	e.metrics.actions.WithLabelValues(string(action), resultSkipped).Inc()
	e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonRefused, "refused %s: %s", action, reason)
	e.logger.Info("action refused", "node", node.Name, "action", action, "maintenance", maintenance, "reason", reason)
}

// event records a Kubernetes Event on the node.
func (e *Executor) event(node string, uid types.UID, eventType, reason, format string, args ...any) {
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: uid}
	e.recorder.Eventf(ref, eventType, reason, format, args...)
}
