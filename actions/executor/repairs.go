package executor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Event reasons of the repair guard rails.
const (
	reasonRepairHeld     = "DisruptionRepairHeld"
	reasonBreakerTripped = "DisruptionRepairBreakerTripped"
)

// repairLedger is this instance's ledger of GPU-fault repairs (package repairs): the store next to its Lease, the
// ledger as last read or written (for the series), the stored ledger as this term last read or wrote it (what a
// ledger deleted under the leader is restored to; never a dry run's), and in a dry run the ledger as the run would
// have written it, which is never written.
type repairLedger struct {
	store     repairs.Store
	logger    *slog.Logger
	mu        sync.Mutex
	last      repairs.Ledger
	known     repairs.Ledger
	simulated *repairs.Ledger
}

func newRepairLedger(e *Executor) *repairLedger {
	ns, lease, _ := strings.Cut(e.opts.Owner, "/")
	return &repairLedger{store: repairs.Store{Client: e.client, Namespace: ns, Name: repairs.ConfigMapName(lease),
		BeforeWrite: e.checkFence}, logger: e.logger}
}

// read returns the ledger: as stored, or in a dry run as the run has changed it.
func (l *repairLedger) read(ctx context.Context, dryRun bool) (repairs.Ledger, error) {
	l.mu.Lock()
	if dryRun && l.simulated != nil {
		defer l.mu.Unlock()
		return clone(*l.simulated), nil
	}
	known := clone(l.known)
	l.mu.Unlock()
	read, err := l.store.Read(ctx)
	if err != nil {
		return repairs.Ledger{}, err
	}
	if read.Empty() && !known.Empty() && !dryRun {
		if read, err = l.restore(ctx, known); err != nil {
			return repairs.Ledger{}, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = read
	if dryRun {
		l.simulated = &read
		return clone(read), nil
	}
	l.known = clone(read)
	return read, nil
}

// update changes the ledger: stored, or in a dry run in memory only.
func (l *repairLedger) update(ctx context.Context, dryRun bool, change func(*repairs.Ledger)) error {
	if dryRun {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.simulated == nil {
			l.simulated = &repairs.Ledger{}
		}
		change(l.simulated)
		l.last = clone(*l.simulated)
		return nil
	}
	written, err := l.store.Update(ctx, func(led *repairs.Ledger) bool { change(led); return true })
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.last = written
	l.known = clone(written)
	l.mu.Unlock()
	return nil
}

// restore writes back the ledger as this term last read or wrote it, found deleted or emptied under it (a kubectl
// delete, a manifest re-applied): the service never empties its ledger itself, and forgetting it would reset every
// breaker and count, which only an operator's reset may. One found written meanwhile is kept as it is.
func (l *repairLedger) restore(ctx context.Context, known repairs.Ledger) (repairs.Ledger, error) {
	restored, err := l.store.Update(ctx, func(stored *repairs.Ledger) bool {
		if !stored.Empty() {
			return false
		}
		*stored = clone(known)
		return true
	})
	if err != nil {
		return repairs.Ledger{}, fmt.Errorf("restoring the repair ledger %s/%s, found deleted or emptied: %w", l.store.Namespace, l.store.Name, err)
	}
	l.logger.Warn("the repair ledger was deleted or emptied: restored as this instance last knew it",
		"configmap", l.store.Namespace+"/"+l.store.Name, "entries", len(restored.Entries), "tripped", restored.Tripped())
	return restored, nil
}

// refresh reads the stored ledger for the series (an operator's reset shows without a decision); a dry run keeps
// its own.
func (l *repairLedger) refresh(ctx context.Context, dryRun bool) error {
	if dryRun {
		return nil
	}
	_, err := l.read(ctx, false)
	return err
}

// reset forgets a dry run's ledger and what this term knew of the stored one (a new term reads it again: a reset
// meanwhile must not be undone from an earlier term's memory).
func (l *repairLedger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.simulated = nil
	l.known = repairs.Ledger{}
}

func (l *repairLedger) snapshot() repairs.Ledger {
	l.mu.Lock()
	defer l.mu.Unlock()
	return clone(l.last)
}

func clone(l repairs.Ledger) repairs.Ledger {
	out := repairs.Ledger{Entries: append([]repairs.Entry(nil), l.Entries...)}
	if l.Breakers != nil {
		out.Breakers = make(map[string]repairs.Breaker, len(l.Breakers))
		for k, v := range l.Breakers {
			out.Breakers[k] = v
		}
	}
	return out
}

// watchRepairLedger reads the stored ledger while leading, at once and then every RequeueInterval, so the series
// show a breaker tripped before a restart, or reset by an operator, without waiting for a GPU fault.
func (e *Executor) watchRepairLedger(ctx context.Context) {
	for {
		if err := e.repairs.refresh(ctx, e.dryRun()); err != nil && ctx.Err() == nil {
			e.logger.Warn("reading the repair ledger", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.opts.RequeueInterval):
		}
	}
}

// recordRepair writes a GPU fault's decision in the ledger before anything else is done about it: a repair started
// (a claim follows; one interrupted is the same repair when decided again) or held, and a breaker it tripped.
func (e *Executor) recordRepair(ctx context.Context, node *nodeview.View, fault *policy.GPUFault, d policy.Decision) error {
	now := time.Now()
	err := e.repairs.update(ctx, e.dryRun(), func(l *repairs.Ledger) {
		entry := repairs.Entry{Node: node.Name, Pool: d.Pool, Block: node.Block, Incident: fault.Incident, At: now}
		if d.Verdict == policy.Refuse {
			entry.Held, entry.Reason = d.Hold, d.Reason
		}
		if old, ok := l.Find(node.Name, fault.Incident); ok && old.Held == entry.Held {
			entry.At = old.At // the same decision again (a repeat, an interrupted claim): as old as it was
		}
		l.Record(entry)
		if d.Trip != "" {
			l.Trip(d.Trip, now, d.Reason)
		}
	})
	if err != nil {
		return fmt.Errorf("recording the GPU fault in the repair ledger: %w", err)
	}
	return nil
}

// hold refuses a GPU-fault repair a guard rail holds: recorded in the ledger, a Warning Event (once per incident
// and reason), counted as skipped; a person takes it from here (or the breaker's reset).
func (e *Executor) hold(ctx context.Context, node *nodeview.View, action nodeview.Action, fault *policy.GPUFault, d policy.Decision) error {
	if err := e.recordRepair(ctx, node, fault, d); err != nil {
		return err
	}
	if d.Trip != "" {
		e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonBreakerTripped, "%s", d.Reason)
		e.logger.Error("repair circuit breaker tripped", "node", node.Name, "scope", d.Trip, "reason", d.Reason)
	}
	if !e.book.noteOnce(noticeRefusal, node.Name, fault.Incident+"|"+d.Reason) {
		return nil
	}
	e.metrics.actions.WithLabelValues(string(action), resultSkipped).Inc()
	e.event(node.Name, node.UID, corev1.EventTypeWarning, reasonRepairHeld, "%s", d.Reason)
	e.logger.Warn("GPU-fault repair held", "node", node.Name, "incident", fault.Incident, "hold", d.Hold, "reason", d.Reason)
	return nil
}

// repairSeries exposes the ledger on the leader: gke_disruption_repair_breaker_tripped per scope, and
// gke_disruption_repairs_held per node whose GPU fault of its current boot is held.
type repairSeries struct {
	e       *Executor
	tripped *prometheus.Desc
	held    *prometheus.Desc
}

func newRepairSeries(e *Executor) *repairSeries {
	return &repairSeries{e: e,
		tripped: prometheus.NewDesc(nodeview.Namespace+"_repair_breaker_tripped",
			"1 while the circuit breaker of GPU-fault repairs of a scope (cluster, or pool/NAME) is tripped: it holds every such repair there until reset with gke-disruption-exporter repairs reset; only the leader reports.",
			[]string{"scope"}, nil),
		held: prometheus.NewDesc(nodeview.Namespace+"_repairs_held",
			"1 for each node whose GPU fault of its current boot a guard rail holds from automatic repair, by reason: correlated, breaker, max_per_node, unconfirmed; only the leader reports.",
			[]string{"node", "pool", "reason"}, nil),
	}
}

func (s *repairSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.tripped
	ch <- s.held
}

func (s *repairSeries) Collect(ch chan<- prometheus.Metric) {
	if !s.e.Leading() {
		return
	}
	l := s.e.repairs.snapshot()
	for _, scope := range l.Tripped() {
		ch <- prometheus.MustNewConstMetric(s.tripped, prometheus.GaugeValue, 1, scope)
	}
	seen := map[string]bool{}
	for i := len(l.Entries) - 1; i >= 0; i-- { // the latest decision of each node
		en := l.Entries[i]
		if seen[en.Node] {
			continue
		}
		seen[en.Node] = true
		boot, _, _ := nodeview.ParseGPUIncident(en.Incident)
		if w, ok := s.e.cached(en.Node); !en.Repaired() && ok && w.view.BootID == boot {
			ch <- prometheus.MustNewConstMetric(s.held, prometheus.GaugeValue, 1, en.Node, en.Pool, en.Held)
		}
	}
}
