// Package upgrades is the ledger of node pool upgrades done with host maintenance (upgrade: {withMaintenance: true}):
// per GKE node pool, the upgrade asked for the group whose maintenance it follows, its operation and its end. The
// claim is written before UpdateNodePool is called, so a restart, a new leader or an alert repeated never asks
// twice, and it outlives the nodes the upgrade replaces. It lives beside the repair ledger, in the ConfigMap next
// to the actions service's Lease (Store).
package upgrades

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
)

// State is how far an upgrade got.
type State string

const (
	// Requested: claimed, and UpdateNodePool called (Operation set once GKE answered).
	Requested State = "requested"
	// Done: GKE's operation finished, or the pool was already at the control plane's version (Current).
	Done State = "done"
	// Failed: GKE's operation failed, it stalled past upgrade.deadline, or the group's maintenance did not finish
	// within it.
	Failed State = "failed"
)

// Keep is how long an ended entry is kept: it answers the members still to be handed back.
const Keep = 7 * 24 * time.Hour

// Ledger is the ledger's content.
type Ledger struct {
	// Pools are by GKE node pool name: the pool's latest upgrade with maintenance (GKE runs one operation on a pool
	// at a time).
	Pools map[string]Entry `json:"pools,omitempty"`
}

// Entry is one node pool's upgrade with one group's maintenance.
type Entry struct {
	// Members are the group's nodes of the pool, each with the maintenance its work served (nodeview.Record): the
	// (pool, maintenance) the upgrade is for.
	Members map[string]string `json:"members"`
	State   State             `json:"state"`
	// Version is the version asked for (the control plane's), Operation GKE's operation name ("" until answered).
	Version     string    `json:"version,omitempty"`
	Operation   string    `json:"operation,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	// Attempts counts UpdateNodePool calls: more than one only when an answer was lost and GKE had no operation.
	Attempts   int       `json:"attempts,omitempty"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Deadline is the pool's upgrade.deadline at the claim: past it a requested entry no member follows any more ends.
	Deadline time.Duration `json:"deadline,omitempty"`
	// Current: the pool was at the control plane's version already; nothing was asked of GKE.
	Current bool   `json:"current,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// For reports whether the entry is the upgrade of the work on node that served maintenance.
func (e Entry) For(node, maintenance string) bool {
	m, ok := e.Members[node]
	return ok && m == maintenance
}

// Find is the upgrade of pool that node's work for maintenance waits for.
func (l Ledger) Find(pool, node, maintenance string) (Entry, bool) {
	e, ok := l.Pools[pool]
	if !ok || !e.For(node, maintenance) {
		return Entry{}, false
	}
	return e, true
}

// Put records pool's entry, and forgets ended entries older than Keep.
func (l *Ledger) Put(pool string, e Entry, now time.Time) {
	if l.Pools == nil {
		l.Pools = map[string]Entry{}
	}
	maps.DeleteFunc(l.Pools, func(_ string, old Entry) bool {
		return old.State != Requested && !old.FinishedAt.IsZero() && now.Sub(old.FinishedAt) > Keep
	})
	l.Pools[pool] = e
}

// End ends pool's entry for node's work in state (Done or Failed) with reason; false when it is not that entry or
// has ended already (another member ended it: the end is counted once).
func (l *Ledger) End(pool, node, maintenance string, state State, reason string, now time.Time) bool {
	e, ok := l.Find(pool, node, maintenance)
	if !ok || e.State != Requested {
		return false
	}
	e.State, e.Reason, e.FinishedAt = state, reason, now
	l.Pools[pool] = e
	return true
}

// DataKey is the ConfigMap key of the ledger, in the repair ledger's ConfigMap (repairs.ConfigMapName).
const DataKey = "upgrades.json"

// Decode reads a stored ledger; an empty one is empty.
func Decode(data string) (Ledger, error) {
	var l Ledger
	if data == "" {
		return l, nil
	}
	if err := json.Unmarshal([]byte(data), &l); err != nil {
		return Ledger{}, fmt.Errorf("the upgrade ledger (%s) does not parse: %w", DataKey, err)
	}
	return l, nil
}

// Encode is the stored form.
func (l Ledger) Encode() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// Store reads and writes the ledger of the actions instance whose Lease is lease, in namespace.
func Store(client kubernetes.Interface, namespace, lease string, beforeWrite func() error) kube.ConfigMapStore[Ledger] {
	return kube.ConfigMapStore[Ledger]{Client: client, Namespace: namespace, Name: repairs.ConfigMapName(lease), Key: DataKey,
		What: "the upgrade ledger", Codec: kube.Codec[Ledger]{Decode: Decode, Encode: Ledger.Encode}, BeforeWrite: beforeWrite}
}

// Read is the ledger of the instance whose Lease is namespace/lease, as stored.
func Read(ctx context.Context, client kubernetes.Interface, namespace, lease string) (Ledger, error) {
	return Store(client, namespace, lease, nil).Read(ctx)
}
