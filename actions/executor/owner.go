package executor

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Ownership of work between instances: every claim records the instance that owns the work (its Lease,
// namespace/name); another instance in the cluster (a second team's Deployment, a dry-run shadow) leaves that work
// alone while the owner's Lease is held, and adopts it once the Lease has expired (the owner was removed).
const (
	// foreignRecheck is how often work owned by another live instance is looked at again, for its Lease expiring.
	foreignRecheck = 30 * time.Second
	// ownerCacheTTL bounds how long an owner's Lease, once read, is trusted.
	ownerCacheTTL = 5 * time.Second
	// ownerExpiryMargin is added to an owner's lease duration before its Lease counts as expired: its renew time is
	// on its clock, not ours.
	ownerExpiryMargin = 5 * time.Second
)

type ownerLease struct {
	live bool
	read time.Time
}

// mayAct reports whether this instance may act on the record's work: its own, a record from before owners were
// recorded, or one whose owner's Lease has expired.
func (e *Executor) mayAct(ctx context.Context, rec nodeview.Record) bool {
	return rec.Owner == "" || rec.Owner == e.opts.Owner || !e.ownerLive(ctx, rec.Owner)
}

// ownerLive reports whether the instance owning work still holds its Lease; when unsure (the Lease cannot be
// read), it is taken as live. An owner that names no Lease (not namespace/name: edited by hand) holds none, or its
// work would be left alone for ever.
func (e *Executor) ownerLive(ctx context.Context, owner string) bool {
	e.mu.Lock()
	cached, ok := e.owners[owner]
	e.mu.Unlock()
	if ok && time.Since(cached.read) < ownerCacheTTL {
		return cached.live
	}
	live := false
	if ns, name, found := strings.Cut(owner, "/"); found && ns != "" && name != "" && !strings.Contains(name, "/") {
		live = true
		lease, err := e.client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			live = false
		case err != nil:
			e.logger.Warn("reading the Lease of another instance; its work is left alone", "owner", owner, "err", err)
		default:
			s := lease.Spec
			live = s.HolderIdentity != nil && *s.HolderIdentity != "" && s.RenewTime != nil && s.LeaseDurationSeconds != nil &&
				time.Since(s.RenewTime.Time) < time.Duration(*s.LeaseDurationSeconds)*time.Second+ownerExpiryMargin
		}
	}
	e.mu.Lock()
	e.owners[owner] = ownerLease{live: live, read: time.Now()}
	e.mu.Unlock()
	return live
}

// noteForeign reports, once per (node, owner, maintenance), work of another live instance on a node this instance's
// policy also selects: two instances acting on the same pool would each spend its budget without seeing the other's
// plan. A dry-run instance only watches and reports nothing.
func (e *Executor) noteForeign(node *corev1.Node, rec nodeview.Record) {
	if e.dryRun() || e.config().MatchPool(node.Labels) == nil {
		return
	}
	if !e.book.noteOnce(noticeOverlap, node.Name, rec.Owner+"|"+rec.Maintenance) {
		return
	}
	e.metrics.overlaps.WithLabelValues(rec.Owner).Inc()
	e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonOverlap,
		"%s work on this node is owned by the actions instance %s, whose Lease is held; this instance (%s) selects the node too and leaves it alone: give the instances pools that do not overlap",
		rec.Action, rec.Owner, e.opts.Owner)
	e.logger.Warn("another live instance owns work on a node of this instance's pools", "node", node.Name, "owner", rec.Owner)
}
