package executor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// bookkeeping is what the leader remembers between decisions and keeps nowhere else: the live alerts, what it has
// already told the operator once, the claims a dry run would have made, the opportunistic waits, and the maintenance
// given back to GKE. It does no I/O; the executor holds one.
type bookkeeping struct {
	mu     sync.Mutex
	alerts map[string]*liveAlert
	// notes are, per kind, node -> key of the last notice evented (and counted).
	notes     map[notice]map[string]string
	simulated map[string]simulatedClaim
	// opportunisticWaits holds, per policy pool, the idle unit that could go now but waits, and why
	// (gke_disruption_actions_waiting).
	opportunisticWaits map[string]opportunisticWait
	// givenBack is node -> maintenance key of opportunistic work given back to make room for due work: the idle
	// picker leaves that maintenance to GKE.
	givenBack map[string]string
}

// liveAlert is the latest firing alert for a node.
type liveAlert struct {
	trigger  webhook.Trigger
	lastSeen time.Time
	// maintenance is the key of the maintenance the alert was decided for first after it was (last) received:
	// empty until then. An alert bound to a maintenance that has since moved later does not act for the new one
	// until it is received again; a maintenance that moved earlier is still covered (the alert's lead time holds).
	maintenance string
	// pool and waitCode describe a wait decision (gke_disruption_actions_waiting); empty when not waiting.
	pool, waitCode string
	// uid is the node a faulty-host report was asked for, as the watch knew it when received (empty when it did
	// not): a report is about that VM's host, not about a VM re-created under the same name.
	uid types.UID
}

// notice is a kind of Event sent once per node and key: Alertmanager's repeats, and decisions taken again, are not
// news.
type notice int

const (
	// noticeWait: an alert waits (key maintenance|code).
	noticeWait notice = iota
	// noticeRefusal: an alert was refused (key maintenance|reason), also counted as skipped.
	noticeRefusal
	// noticeOverlap: another live instance owns work on the node (key owner|maintenance).
	noticeOverlap
	// noticeOpportunisticWait: an idle unit waits for opportunistic maintenance (key maintenance|code).
	noticeOpportunisticWait
)

// opportunisticWait is an idle unit of a pool that could start its maintenance but waits: the wait's code and the
// unit's size.
type opportunisticWait struct {
	code  string
	nodes int
}

func newBookkeeping() *bookkeeping {
	b := &bookkeeping{alerts: map[string]*liveAlert{}, notes: map[notice]map[string]string{}, simulated: map[string]simulatedClaim{},
		opportunisticWaits: map[string]opportunisticWait{}, givenBack: map[string]string{}}
	for _, kind := range []notice{noticeWait, noticeRefusal, noticeOverlap, noticeOpportunisticWait} {
		b.notes[kind] = map[string]string{}
	}
	return b
}

// take makes a firing alert the node's live alert, received at now for the node incarnation uid: a new one, or a
// repeat of the same action, which is decided afresh (its binding to a maintenance starts over).
func (b *bookkeeping) take(t webhook.Trigger, now time.Time, uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.alerts[t.Node]
	if a == nil || a.trigger.Action != t.Action {
		a = &liveAlert{}
		b.alerts[t.Node] = a
	}
	a.trigger, a.lastSeen, a.maintenance, a.uid = t, now, "", uid
}

// resolve withdraws the node's live alert for a resolved one of the same action that started no earlier (a resolve
// of an older firing leaves a newer one). It reports whether the alert withdrawn was waiting.
func (b *bookkeeping) resolve(t webhook.Trigger) (waited bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.alerts[t.Node]
	if a == nil || a.trigger.Action != t.Action || t.StartsAt.Before(a.trigger.StartsAt) {
		return false
	}
	delete(b.alerts, t.Node)
	return a.waitCode != ""
}

// adopt makes a the node's live alert, unless the node has one (received meanwhile), which it returns instead.
func (b *bookkeeping) adopt(name string, a liveAlert) (live liveAlert, adopted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.alerts[name]; ok {
		return *l, false
	}
	b.alerts[name] = &a
	return a, true
}

// alert returns a copy of the node's live alert.
func (b *bookkeeping) alert(name string) (liveAlert, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.alerts[name]
	if !ok {
		return liveAlert{}, false
	}
	return *a, true
}

// withdraw removes the node's live alert if it is still t; a newer alert that arrived meanwhile stays.
func (b *bookkeeping) withdraw(name string, t webhook.Trigger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.alerts[name]; ok && a.trigger == t {
		delete(b.alerts, name)
	}
}

// changeIfStill changes the node's live alert if it is still the one received as t.
func (b *bookkeeping) changeIfStill(name string, t webhook.Trigger, change func(*liveAlert)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.alerts[name]; ok && a.trigger == t {
		change(a)
	}
}

// bind records the work key (a maintenance, or a faulty-host report's incident) alert t was decided for; it is no
// longer waiting.
func (b *bookkeeping) bind(name string, t webhook.Trigger, key string) {
	b.changeIfStill(name, t, func(a *liveAlert) { a.maintenance, a.pool, a.waitCode = key, "", "" })
}

// waits records that alert t waits, in pool, for code (gke_disruption_actions_waiting).
func (b *bookkeeping) waits(name string, t webhook.Trigger, pool, code string) {
	b.changeIfStill(name, t, func(a *liveAlert) { a.pool, a.waitCode = pool, code })
}

// stopsWaiting records that alert t no longer waits.
func (b *bookkeeping) stopsWaiting(name string, t webhook.Trigger) { b.waits(name, t, "", "") }

// served marks the node's live alert, whichever it is, as served by work: no longer waiting, and its resolve
// withdraws nothing.
func (b *bookkeeping) served(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.alerts[name]; ok {
		a.pool, a.waitCode = "", ""
	}
}

// alerted lists the nodes with a live alert.
func (b *bookkeeping) alerted() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Collect(maps.Keys(b.alerts))
}

// saysReschedulable reports a live alert for the node labelled can_reschedule="true".
func (b *bookkeeping) saysReschedulable(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.alerts[name]
	return ok && a.trigger.CanReschedule
}

// dueWorkWaits reports a live alert, received within ttl of now, waiting for room that optional work in pool would
// take: any alert waiting for the cluster cap, or one of the pool waiting for its budget. The room is kept for it:
// the wait's code and why.
func (b *bookkeeping) dueWorkWaits(pool string, now time.Time, ttl time.Duration) (code, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, a := range b.alerts {
		if now.Sub(a.lastSeen) > ttl {
			continue
		}
		if a.waitCode == policy.WaitClusterCap || (a.waitCode == policy.WaitPoolBudget && a.pool == pool) {
			return a.waitCode, fmt.Sprintf("due work goes first: %s of %s waits for room (%s)", a.trigger.Action, name, a.waitCode)
		}
	}
	return "", ""
}

// noteOnce records key as the node's latest notice of kind and reports whether it is new.
func (b *bookkeeping) noteOnce(kind notice, name, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notes[kind][name] == key {
		return false
	}
	b.notes[kind][name] = key
	return true
}

// refusedFor reports whether the node's latest refusal was of the work keyed key (a maintenance or an incident).
func (b *bookkeeping) refusedFor(name, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.HasPrefix(b.notes[noticeRefusal][name], key+"|")
}

// simulate records the claims a dry run would have made for the nodes' current maintenance.
func (b *bookkeeping) simulate(action nodeview.Action, nodes []*nodeview.View) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		b.simulated[n.Name] = simulatedClaim{action: action, maintenance: n.Maintenance.Key()}
	}
}

// simulateReport records the faulty-host report of incident a dry run would have made.
func (b *bookkeeping) simulateReport(node, incident string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.simulated[node] = simulatedClaim{action: nodeview.ReportFaultyHost, incident: incident}
}

// simulatedServes reports a dry-run claim for the node's current maintenance, dropping one whose maintenance has
// moved or vanished.
func (b *bookkeeping) simulatedServes(node *nodeview.View) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.simulated[node.Name]
	if !ok || c.action == nodeview.ReportFaultyHost {
		return false
	}
	if node.InMaintenance || node.Maintenance.Serves(c.maintenance) {
		return true
	}
	delete(b.simulated, node.Name)
	return false
}

// simulatedIncident is the incident of the node's dry-run faulty-host report, or "".
func (b *bookkeeping) simulatedIncident(node string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.simulated[node].incident
}

// setOpportunisticWaits replaces the opportunistic waits of every pool.
func (b *bookkeeping) setOpportunisticWaits(waits map[string]opportunisticWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opportunisticWaits = waits
}

// giveBack records that the node's opportunistic work for maintenance was given back to make room.
func (b *bookkeeping) giveBack(name, maintenance string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.givenBack[name] = maintenance
}

// givenBackFor reports whether the node's maintenance was given back: the idle picker leaves it to GKE.
func (b *bookkeeping) givenBackFor(name, maintenance string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	given, ok := b.givenBack[name]
	return ok && given == maintenance
}

// waitKey is a series of gke_disruption_actions_waiting.
type waitKey struct{ action, pool, reason string }

// waiting counts what waits: live alerts by action, pool and reason, and the idle units of opportunistic
// maintenance by their size.
func (b *bookkeeping) waiting() map[waitKey]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[waitKey]int{}
	for _, a := range b.alerts {
		if a.waitCode != "" {
			out[waitKey{string(a.trigger.Action), a.pool, a.waitCode}]++
		}
	}
	for pool, o := range b.opportunisticWaits {
		out[waitKey{string(nodeview.OpportunisticMaintenance), pool, o.code}] += o.nodes
	}
	return out
}

// forget drops everything about a node that was deleted.
func (b *bookkeeping) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.alerts, name)
	for _, seen := range b.notes {
		delete(seen, name)
	}
	delete(b.simulated, name)
	delete(b.givenBack, name)
}

// reset forgets what only the leader keeps, once it stops leading: alerts reach the next leader, which tells the
// operator afresh. Maintenance given back stays given back.
func (b *bookkeeping) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.alerts)
	for _, seen := range b.notes {
		clear(seen)
	}
	clear(b.simulated)
	clear(b.opportunisticWaits)
}
