package executor

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// giveBackRecheck is when due work that had optional work given back is decided again if no node change woke it.
const giveBackRecheck = time.Second

// reclaimable is the opportunistic work of this instance that GKE has not started (policy.Reclaimable): what due
// work may have given back. A dry-run instance gives nothing back.
func (e *Executor) reclaimable(all []*nodeview.View) []*nodeview.View {
	if e.dryRun() {
		return nil
	}
	var out []*nodeview.View
	for _, n := range all {
		if policy.Reclaimable(n) && (n.Record.Owner == "" || n.Record.Owner == e.opts.Owner) {
			out = append(out, n)
		}
	}
	return out
}

// giveBack ends the opportunistic work on the named nodes so due work fits: our cordon and perform-maintenance
// request are lifted, and the idle picker leaves the node's maintenance to GKE from then on. Each node is re-read
// from the API first; one whose maintenance GKE has started since, or that another live instance owns, is left as
// it is. Caller holds decideMu.
func (e *Executor) giveBack(ctx context.Context, names []string, due nodeview.Action, dueNode, maintenance string) error {
	for _, name := range names {
		node, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s to give its opportunistic maintenance back: %w", name, err)
		}
		v := nodeview.Of(node)
		if !policy.Reclaimable(v) || !e.mayAct(ctx, v.Record) {
			continue
		}
		why := fmt.Sprintf("given back: %s of %s for maintenance %s is due and needs the room; maintenance %s is left to GKE's schedule",
			due, dueNode, maintenance, v.Maintenance.Key())
		if err := e.abandon(ctx, node, v.Record, nodestate.Observe(v), why); err != nil {
			return err
		}
		e.book.giveBack(name, v.Maintenance.Key())
	}
	return nil
}

// pickable is claimable for the idle picker: not a node whose maintenance was given back to make room.
func (e *Executor) pickable(n *nodeview.View) bool {
	return e.claimable(n) && !e.book.givenBackFor(n.Name, n.Maintenance.Key())
}
