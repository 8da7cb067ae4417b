package repairs

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
)

// DataKey is the ConfigMap key that holds the ledger.
const DataKey = "ledger.json"

// ConfigMapName is the ledger's ConfigMap for the actions instance whose Lease is lease: one ledger per instance,
// in the Lease's namespace.
func ConfigMapName(lease string) string { return lease + "-repairs" }

// Store reads and writes one ledger ConfigMap.
type Store struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// BeforeWrite is called right before every write; an error stops it (the fence, a dry run).
	BeforeWrite func() error
}

func (s Store) store() kube.ConfigMapStore[Ledger] {
	return kube.ConfigMapStore[Ledger]{Client: s.Client, Namespace: s.Namespace, Name: s.Name, Key: DataKey,
		What: "the repair ledger", Codec: kube.Codec[Ledger]{Decode: Decode, Encode: Ledger.Encode}, BeforeWrite: s.BeforeWrite}
}

// Read returns the ledger; a ledger never written is empty.
func (s Store) Read(ctx context.Context) (Ledger, error) { return s.store().Read(ctx) }

// Update applies change to the ledger as stored and writes it, conditional on the ConfigMap's resourceVersion
// (read again and changed again on a conflict); change returns false to write nothing. It returns the ledger as
// written (or as read, when nothing was).
func (s Store) Update(ctx context.Context, change func(*Ledger) bool) (Ledger, error) {
	return s.store().Update(ctx, change)
}
