// Package repairs is the ledger of GPU-fault repairs: the faults decided (repaired or held, and why) and the state of
// the circuit breakers. The node annotations remember one node's work; the ledger remembers across nodes and time,
// what the guard rails count (repairs per hour and per node, faults close together in a topology block), and it
// survives a restart, a new leader and a node re-created under its name. It lives in a ConfigMap next to the
// actions service's Lease (Store); the policy reads it, as a value, in its decisions.
package repairs

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Why a GPU-fault repair is held: the hold codes of Entry.Held, gke_disruption_repairs_held and Events.
const (
	// HoldUnconfirmed: the node shows no GPU fault in its current boot and the same Xid was repaired in an earlier
	// boot: a gauge that stays at the Xid after the repair, not a new fault.
	HoldUnconfirmed = "unconfirmed"
	// HoldMaxPerNode: the node had repair.maxPerNode automatic repairs in 7 days; a person looks at it.
	HoldMaxPerNode = "max_per_node"
	// HoldCorrelated: repair.correlation.nodes nodes of its topology block (or pool) failed within the window.
	HoldCorrelated = "correlated"
	// HoldBreaker: the circuit breaker of the pool or the cluster is tripped.
	HoldBreaker = "breaker"
)

// HoldCodes are every hold code.
var HoldCodes = []string{HoldUnconfirmed, HoldMaxPerNode, HoldCorrelated, HoldBreaker}

// Keep is how long an entry is kept: the longest span a guard rail counts over (repair.maxPerNode's 7 days).
const Keep = 7 * 24 * time.Hour

// ScopeCluster is the cluster-wide breaker's scope; a pool's is PoolScope(name).
const ScopeCluster = "cluster"

// PoolScope is the scope of a policy pool's breaker.
func PoolScope(pool string) string { return "pool/" + pool }

// Ledger is the ledger's content.
type Ledger struct {
	// Entries are the GPU faults decided, oldest first, one per (node, incident).
	Entries []Entry `json:"entries,omitempty"`
	// Breakers are by scope (ScopeCluster, PoolScope); a scope never tripped nor reset has none.
	Breakers map[string]Breaker `json:"breakers,omitempty"`
}

// Entry is one GPU fault as decided.
type Entry struct {
	Node string `json:"node"`
	// Pool is the policy pool that governed the node; Block its gce-topology-block ("" when GKE does not say).
	Pool  string `json:"pool"`
	Block string `json:"block,omitempty"`
	// Incident is the fault's nodeview.GPUIncidentKey.
	Incident string    `json:"incident"`
	At       time.Time `json:"at"`
	// Held is the hold code, "" for a repair that was started.
	Held   string `json:"held,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Repaired reports an entry of a repair that was started.
func (e Entry) Repaired() bool { return e.Held == "" }

// Breaker is one scope's circuit breaker.
type Breaker struct {
	// TrippedAt is when it tripped; zero while it is not tripped.
	TrippedAt time.Time `json:"trippedAt,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	// ResetAt is the operator's last reset: repairs before it no longer count toward a trip.
	ResetAt time.Time `json:"resetAt,omitzero"`
	// ResetBy names who reset it.
	ResetBy string `json:"resetBy,omitempty"`
}

// Tripped reports a breaker that holds repairs.
func (b Breaker) Tripped() bool { return !b.TrippedAt.IsZero() }

// Decode reads a ledger; empty data is an empty ledger.
func Decode(data string) (Ledger, error) {
	var l Ledger
	if data == "" {
		return l, nil
	}
	if err := json.Unmarshal([]byte(data), &l); err != nil {
		return Ledger{}, fmt.Errorf("repair ledger is not readable: %w", err)
	}
	return l, nil
}

// Empty reports a ledger with no entry and no breaker: one never written, or deleted or emptied since.
func (l Ledger) Empty() bool { return len(l.Entries) == 0 && len(l.Breakers) == 0 }

// Encode writes a ledger.
func (l Ledger) Encode() string {
	b, _ := json.Marshal(l) // plain data: cannot fail
	return string(b)
}

// Find returns the entry of a node's incident.
func (l Ledger) Find(node, incident string) (Entry, bool) {
	for _, e := range l.Entries {
		if e.Node == node && e.Incident == incident {
			return e, true
		}
	}
	return Entry{}, false
}

// Record adds an entry, replacing the node's earlier entry for the same incident; entries older than Keep go.
func (l *Ledger) Record(e Entry) {
	l.Entries = slices.DeleteFunc(l.Entries, func(old Entry) bool {
		return (old.Node == e.Node && old.Incident == e.Incident) || e.At.Sub(old.At) > Keep
	})
	l.Entries = append(l.Entries, e)
}

// Trip trips a scope's breaker (a tripped one keeps its first trip).
func (l *Ledger) Trip(scope string, at time.Time, reason string) {
	b := l.Breakers[scope]
	if b.Tripped() {
		return
	}
	b.TrippedAt, b.Reason = at, reason
	if l.Breakers == nil {
		l.Breakers = map[string]Breaker{}
	}
	l.Breakers[scope] = b
}

// Reset resets the breakers of scopes (none: every tripped one) and reports the scopes it reset. Repairs before
// at no longer count toward a trip, so a reset breaker does not trip again on the hour that tripped it.
func (l *Ledger) Reset(scopes []string, at time.Time, by string) []string {
	if len(scopes) == 0 {
		for scope, b := range l.Breakers {
			if b.Tripped() {
				scopes = append(scopes, scope)
			}
		}
		slices.Sort(scopes)
	}
	var reset []string
	for _, scope := range scopes {
		b, ok := l.Breakers[scope]
		if !ok || !b.Tripped() {
			continue
		}
		l.Breakers[scope] = Breaker{ResetAt: at, ResetBy: by}
		reset = append(reset, scope)
	}
	return reset
}

// Tripped lists the tripped scopes, sorted.
func (l Ledger) Tripped() []string {
	var out []string
	for scope, b := range l.Breakers {
		if b.Tripped() {
			out = append(out, scope)
		}
	}
	slices.Sort(out)
	return out
}
