package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// actionUpgradeNodePool counts node pool upgrades done with maintenance in gke_disruption_actions_total: once per
// (pool, maintenance) at its end, succeeded or failed (the page).
const actionUpgradeNodePool nodeview.Action = "upgrade-node-pool"

// Event reasons of upgrades with maintenance.
const (
	reasonUpgradePending   = "DisruptionUpgradePending"
	reasonUpgradeRequested = "DisruptionUpgradeRequested"
	reasonUpgradeFailed    = "DisruptionUpgradeFailed"
)

// upgradeLedger is the ledger of node pool upgrades (package upgrades) beside this instance's Lease; mu serialises
// the claims of one replica, the store's conditional writes those of replicas that overlap in a leader change.
type upgradeLedger struct {
	mu    sync.Mutex
	store interface {
		Read(ctx context.Context) (upgrades.Ledger, error)
		Update(ctx context.Context, change func(*upgrades.Ledger) bool) (upgrades.Ledger, error)
	}
}

func newUpgradeLedger(e *Executor) *upgradeLedger {
	ns, lease, _ := strings.Cut(e.opts.Owner, "/")
	return &upgradeLedger{store: upgrades.Store(e.client, ns, lease, e.checkFence)}
}

// poolUpgrade is what the lifecycle needs of the pool's upgrade after the node's maintenance: nil when its policy
// pool does not upgrade with maintenance; for work waiting for the upgrade, the ledger's entry, GKE's operation
// and whether the group's maintenance is finished.
func (e *Executor) poolUpgrade(ctx context.Context, node *nodeview.View) (*nodestate.PoolUpgrade, error) {
	p := e.config().MatchPool(node.Labels)
	if p == nil || !p.UpgradesWithMaintenance() {
		return nil, nil
	}
	u := &nodestate.PoolUpgrade{Deadline: time.Duration(p.Upgrade.Deadline), Now: time.Now()}
	rec := node.Record
	if !rec.Phase.WaitsForUpgrade() {
		return u, nil
	}
	l, err := e.upgrades.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	if entry, ok := l.Find(node.Pool, node.Name, rec.Maintenance); ok {
		u.Entry = &entry
		if entry.State == upgrades.Requested && entry.Operation != "" {
			if op, err := e.opts.GKE.GetOperation(ctx, entry.Operation); err != nil {
				e.logger.Warn("reading the pool's upgrade operation; read again on the next pass", "node", node.Name, "err", err)
			} else {
				u.Operation = &nodestate.Operation{Done: op.GetStatus() == containerpb.Operation_DONE, Error: op.GetError().GetMessage()}
			}
		}
	}
	u.GroupFinished = e.groupFinished(node)
	return u, nil
}

// groupFinished reports whether GKE finished the maintenance of every other member of the node's group: each waits
// for the upgrade, or its work ended (a member deleted or re-claimed for other work has left the group).
func (e *Executor) groupFinished(node *nodeview.View) bool {
	group := strings.Join(node.Record.Group, ",")
	for _, name := range node.Record.Group {
		cached, ok := e.cached(name)
		if name == node.Name || !ok {
			continue
		}
		r := cached.view.Record
		if strings.Join(r.Group, ",") != group {
			continue
		}
		if (r.Active() || r.HoldsCordon()) && !r.Phase.WaitsForUpgrade() {
			return false
		}
	}
	return true
}

// awaitUpgrade keeps the node cordoned after GKE's maintenance for the pool's upgrade (upgrade-pending).
func (e *Executor) awaitUpgrade(ctx context.Context, node *corev1.Node, why string) error {
	if _, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState:        string(nodeview.UpgradePending),
		nodeview.AnnotationUpgradeSince: nodeview.FormatTime(time.Now()),
	}}); err != nil {
		return fmt.Errorf("recording the wait for the pool's upgrade: %w", err)
	}
	e.event(node.Name, node.UID, corev1.EventTypeNormal, reasonUpgradePending, "%s", why)
	e.logger.Info("waiting for the pool's upgrade", "node", node.Name)
	return nil
}

// requestUpgrade claims the upgrade of the node's GKE node pool for its group's maintenance in the ledger, then
// asks GKE for it. The claim is written first, so the upgrade is asked for once per (pool, maintenance) whatever
// restarts, leader changes or repeats come; a claim whose answer was lost is asked again only when GKE shows no
// operation started since it.
func (e *Executor) requestUpgrade(ctx context.Context, node *nodeview.View) error {
	e.upgrades.mu.Lock()
	defer e.upgrades.mu.Unlock()
	pool, rec := node.Pool, node.Record
	l, err := e.upgrades.store.Read(ctx)
	if err != nil {
		return err
	}
	entry, claimed := l.Find(pool, node.Name, rec.Maintenance)
	switch {
	case claimed && (entry.State != upgrades.Requested || entry.Operation != ""):
		return nil // another member, or another replica, got there first
	case claimed && time.Since(entry.RequestedAt) <= nodestate.LostAnswer:
		return nil
	case claimed:
		op, err := e.opts.GKE.FindUpgrade(ctx, pool, entry.RequestedAt.Add(-nodestate.LostAnswer))
		if err != nil {
			return err
		}
		if op != nil {
			e.logger.Info("the upgrade request's answer was lost; its operation found", "pool", pool, "operation", op.GetName())
			return e.recordOperation(ctx, pool, node, op.GetName())
		}
		e.logger.Info("the upgrade request's answer was lost and GKE has no operation of it; asking again", "pool", pool)
	}
	cluster, err := e.opts.GKE.GetCluster(ctx)
	if err != nil {
		return err
	}
	np := findNodePool(cluster, pool)
	if np == nil {
		return e.endUpgrade(ctx, node, upgrades.Failed, fmt.Sprintf("node pool %q is not in the cluster the GKE API shows", pool))
	}
	members := e.poolMembers(node)
	if !claimed {
		if prev, ok := l.Pools[pool]; ok && prev.State == upgrades.Requested {
			return fmt.Errorf("node pool %s: an upgrade for another group's maintenance is still under way", pool)
		}
		entry = upgrades.Entry{Members: members, State: upgrades.Requested, Version: cluster.GetCurrentMasterVersion(),
			Deadline: e.upgradeDeadline(node)}
		if np.GetVersion() == cluster.GetCurrentMasterVersion() {
			entry.State, entry.Current, entry.FinishedAt = upgrades.Done, true, time.Now()
		}
	}
	entry.RequestedAt = time.Now()
	if !entry.Current {
		entry.Attempts++
	}
	won := false
	if _, err := e.upgrades.store.Update(ctx, func(l *upgrades.Ledger) bool {
		if cur, ok := l.Find(pool, node.Name, rec.Maintenance); ok && cur.Attempts >= entry.Attempts {
			return false // claimed meanwhile by another replica
		}
		l.Put(pool, entry, time.Now())
		won = true
		return true
	}); err != nil {
		return fmt.Errorf("claiming the upgrade of node pool %s: %w", pool, err)
	}
	if !won {
		return nil
	}
	if entry.Current {
		e.logger.Info("the pool is at the control plane's version already; no upgrade", "pool", pool, "version", entry.Version)
		return nil
	}
	if err := e.checkFence(); err != nil {
		return err
	}
	op, err := e.opts.GKE.UpdateNodePool(ctx, pool, np.GetConfig().GetImageType())
	if status.Code(err) == codes.FailedPrecondition {
		// GKE runs an operation on the pool already: its own upgrade serves as well, the nodes still cordoned.
		if running, findErr := e.opts.GKE.FindUpgrade(ctx, pool, time.Time{}); findErr == nil && running != nil &&
			running.GetStatus() != containerpb.Operation_DONE {
			e.logger.Info("GKE upgrades the node pool already; following its operation", "pool", pool, "operation", running.GetName())
			return e.recordOperation(ctx, pool, node, running.GetName())
		}
	}
	if err != nil {
		if c := status.Code(err); c == codes.PermissionDenied || c == codes.InvalidArgument || c == codes.NotFound {
			return e.endUpgrade(ctx, node, upgrades.Failed, "GKE refused the upgrade: "+err.Error())
		}
		// The answer may be lost with the call: the operation is looked for before it is asked again.
		return fmt.Errorf("asking GKE to upgrade node pool %s: %w", pool, err)
	}
	e.logger.Info("asked GKE to upgrade the node pool", "pool", pool, "version", entry.Version, "operation", op.GetName())
	for name := range members {
		if cached, ok := e.cached(name); ok {
			e.event(name, cached.UID, corev1.EventTypeNormal, reasonUpgradeRequested, "asked GKE to upgrade node pool %s to %s (operation %s) in the downtime of its maintenance",
				pool, entry.Version, op.GetName())
		}
	}
	return e.recordOperation(ctx, pool, node, op.GetName())
}

// recordOperation records GKE's operation of the pool's upgrade in the ledger.
func (e *Executor) recordOperation(ctx context.Context, pool string, node *nodeview.View, operation string) error {
	_, err := e.upgrades.store.Update(ctx, func(l *upgrades.Ledger) bool {
		cur, ok := l.Find(pool, node.Name, node.Record.Maintenance)
		if !ok || cur.Operation != "" {
			return false
		}
		cur.Operation = operation
		l.Pools[pool] = cur
		return true
	})
	if err != nil {
		return fmt.Errorf("recording the upgrade operation %s of node pool %s: %w", operation, pool, err)
	}
	for _, name := range node.Record.Group {
		e.enqueue(name) // the members note the upgrade asked for
	}
	return nil
}

// poolMembers are the members of node's group in its GKE node pool, each with the maintenance its work served.
func (e *Executor) poolMembers(node *nodeview.View) map[string]string {
	members := map[string]string{node.Name: node.Record.Maintenance}
	group := strings.Join(node.Record.Group, ",")
	for _, name := range node.Record.Group {
		if cached, ok := e.cached(name); ok && cached.view.Pool == node.Pool && strings.Join(cached.view.Record.Group, ",") == group {
			members[name] = cached.view.Record.Maintenance
		}
	}
	return members
}

func findNodePool(c *containerpb.Cluster, name string) *containerpb.NodePool {
	for _, np := range c.GetNodePools() {
		if np.GetName() == name {
			return np
		}
	}
	return nil
}

// endUpgrade ends the ledger's entry of the node's pool upgrade in state, counted once whichever member (or
// followUpgrades) ends it; with no entry yet (the group's maintenance never finished) it records one, ended.
func (e *Executor) endUpgrade(ctx context.Context, node *nodeview.View, state upgrades.State, reason string) error {
	ended, err := e.endEntry(ctx, node.Pool, node.Name, node.Record.Maintenance, func() map[string]string { return e.poolMembers(node) }, state, reason)
	if err != nil || !ended {
		return err
	}
	if state == upgrades.Failed {
		e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonUpgradeFailed, "upgrade of node pool %s failed: %s", node.Pool, reason)
	}
	return nil
}

// endEntry ends pool's entry for member's work in state and counts it, once: false when another hand ended it.
// members, when the entry does not exist yet, are the group's for a new entry.
func (e *Executor) endEntry(ctx context.Context, pool, member, maintenance string, members func() map[string]string, state upgrades.State, reason string) (bool, error) {
	ended := false
	if _, err := e.upgrades.store.Update(ctx, func(l *upgrades.Ledger) bool {
		if _, ok := l.Find(pool, member, maintenance); !ok {
			if members == nil {
				return false // the entry ended and was replaced meanwhile
			}
			l.Put(pool, upgrades.Entry{Members: members(), State: upgrades.Requested, RequestedAt: time.Now()}, time.Now())
		}
		ended = l.End(pool, member, maintenance, state, reason, time.Now())
		return ended
	}); err != nil {
		return false, fmt.Errorf("ending the upgrade of node pool %s: %w", pool, err)
	}
	if !ended {
		return false, nil
	}
	result := resultSucceeded
	if state == upgrades.Failed {
		result = resultFailed
		e.logger.Error("node pool upgrade failed", "pool", pool, "reason", reason)
	} else {
		e.logger.Info("node pool upgraded with its maintenance", "pool", pool)
	}
	e.metrics.actions.WithLabelValues(string(actionUpgradeNodePool), result).Inc()
	return true, nil
}

// followUpgrades ends, while leading, the upgrades whose operation GKE finished: a surge upgrade replaces every
// member, so no member may be left to see the end.
func (e *Executor) followUpgrades(ctx context.Context) {
	if e.opts.GKE == nil {
		return
	}
	tick := time.NewTicker(e.opts.RequeueInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if e.config().UpgradeKey() == "" || e.dryRun() {
			continue
		}
		l, err := e.upgrades.store.Read(ctx)
		if err != nil {
			e.logger.Warn("reading the upgrade ledger", "err", err)
			continue
		}
		for pool, entry := range l.Pools {
			if entry.State != upgrades.Requested {
				continue
			}
			if entry.Operation == "" || (entry.Deadline > 0 && time.Since(entry.RequestedAt) > entry.Deadline+nodestate.LostAnswer) {
				e.followUnanswered(ctx, pool, entry)
				continue
			}
			op, err := e.opts.GKE.GetOperation(ctx, entry.Operation)
			if err != nil || op.GetStatus() != containerpb.Operation_DONE {
				continue
			}
			state, reason := upgrades.Done, "GKE's operation "+entry.Operation+" is done"
			if msg := op.GetError().GetMessage(); msg != "" {
				state, reason = upgrades.Failed, fmt.Sprintf("GKE's upgrade of the pool failed (operation %s): %s", entry.Operation, msg)
			}
			member, maintenance := anyMember(entry)
			if _, err := e.endEntry(ctx, pool, member, maintenance, nil, state, reason); err != nil {
				e.logger.Warn("ending a finished upgrade", "pool", pool, "err", err)
			}
			for member := range entry.Members {
				e.enqueue(member)
			}
		}
	}
}

// followUnanswered ends, or finds the operation of, a requested upgrade no member follows any more (GKE replaced
// them all): one whose answer was lost (its operation looked for), or one past its deadline (failed), so the pool's
// next maintenance may be upgraded.
func (e *Executor) followUnanswered(ctx context.Context, pool string, entry upgrades.Entry) {
	for member := range entry.Members {
		if cached, ok := e.cached(member); ok && cached.view.Record.Phase.WaitsForUpgrade() {
			return // the member's lifecycle follows it
		}
	}
	member, maintenance := anyMember(entry)
	if entry.Operation != "" || (entry.Deadline > 0 && time.Since(entry.RequestedAt) > entry.Deadline+nodestate.LostAnswer) {
		_, err := e.endEntry(ctx, pool, member, maintenance, nil, upgrades.Failed,
			fmt.Sprintf("GKE's upgrade of the pool (operation %s) did not finish within upgrade.deadline (%s)", entry.Operation, entry.Deadline))
		if err != nil {
			e.logger.Warn("ending a stalled upgrade", "pool", pool, "err", err)
		}
		return
	}
	if time.Since(entry.RequestedAt) <= nodestate.LostAnswer {
		return
	}
	op, err := e.opts.GKE.FindUpgrade(ctx, pool, entry.RequestedAt.Add(-nodestate.LostAnswer))
	switch {
	case err != nil:
		e.logger.Warn("looking for the operation of an upgrade whose answer was lost", "pool", pool, "err", err)
	case op != nil:
		e.logger.Info("the upgrade request's answer was lost; its operation found", "pool", pool, "operation", op.GetName())
		if err := e.recordOperation(ctx, pool, &nodeview.View{Name: member, Record: nodeview.Record{Maintenance: maintenance}}, op.GetName()); err != nil {
			e.logger.Warn("recording a found upgrade operation", "pool", pool, "err", err)
		}
	default:
		if _, err := e.endEntry(ctx, pool, member, maintenance, nil, upgrades.Failed,
			"GKE has no operation of the upgrade asked for, and no node of the group is left waiting for it"); err != nil {
			e.logger.Warn("ending an unanswered upgrade", "pool", pool, "err", err)
		}
	}
}

// anyMember is one member of the entry with the maintenance it served: what names the entry in the ledger.
func anyMember(entry upgrades.Entry) (string, string) {
	for member, maintenance := range entry.Members {
		return member, maintenance
	}
	return "", ""
}

// upgradeDeadline is upgrade.deadline of the node's policy pool.
func (e *Executor) upgradeDeadline(node *nodeview.View) time.Duration {
	if p := e.config().MatchPool(node.Labels); p != nil && p.Upgrade != nil {
		return time.Duration(p.Upgrade.Deadline)
	}
	return 0
}

// noteUpgradeRequested records on a member that the pool's upgrade was asked for (upgrade-requested).
func (e *Executor) noteUpgradeRequested(ctx context.Context, node *corev1.Node, why string) error {
	if _, err := e.patchNode(ctx, node.Name, nodePatch{resourceVersion: node.ResourceVersion, annotations: map[string]any{
		nodeview.AnnotationState: string(nodeview.UpgradeRequested),
	}}); err != nil {
		return fmt.Errorf("recording the pool's upgrade requested: %w", err)
	}
	e.logger.Info(why, "node", node.Name)
	return nil
}

// upgradeFailed ends work whose pool upgrade failed or stalled: failed, the node handed back (our cordon lifted). The
// node's own action succeeded before; the failure is the upgrade's, counted once per pool (endUpgrade).
func (e *Executor) upgradeFailed(ctx context.Context, node *corev1.Node, rec nodeview.Record, why string) error {
	p := endWork(node, rec, why)
	p.annotations[nodeview.AnnotationState] = string(nodeview.Failed)
	msg := why
	if rec.CordonedBy != "" && node.Spec.Unschedulable {
		p.unschedulable = ptr(false)
		msg += "; uncordoned (our cordon): the node is handed back"
	}
	p.annotations[nodeview.AnnotationReason] = msg
	if _, err := e.patchNode(ctx, node.Name, p); err != nil {
		return fmt.Errorf("handing the node back after its pool's upgrade failed: %w", err)
	}
	e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonActionFailed, "%s failed: %s", rec.Action, msg)
	e.logger.Error("work ended: the pool's upgrade failed", "node", node.Name, "action", rec.Action, "reason", msg)
	return nil
}
