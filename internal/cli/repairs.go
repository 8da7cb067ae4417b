package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
)

// DefaultActionsLease is the actions service's Lease as deploy/base installs it (namespace/name); its repair ledger
// is the ConfigMap repairs.ConfigMapName of the Lease's name, in its namespace.
const DefaultActionsLease = "gke-disruption-exporter/gke-disruption-exporter-actions"

// ResetOptions are the repairs reset command's flags.
type ResetOptions struct {
	// Lease is the actions instance's Lease (namespace/name), whose ledger holds the breakers.
	Lease string
	// Pools are the policy pools whose breakers to reset; ClusterWide the cluster's; neither: every tripped one.
	Pools       []string
	ClusterWide bool
	// By names who reset, in the ledger.
	By  string
	Now time.Time
}

// ledgerStore is the repair ledger of the actions instance whose Lease is ref (namespace/name).
func ledgerStore(client kubernetes.Interface, ref string) (repairs.Store, error) {
	ns, lease, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || lease == "" || strings.Contains(lease, "/") {
		return repairs.Store{}, &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --actions.lease %q: want NAMESPACE/NAME", ref)}
	}
	return repairs.Store{Client: client, Namespace: ns, Name: repairs.ConfigMapName(lease)}, nil
}

// ResetBreakers resets tripped circuit breakers of GPU-fault repairs: the actions service repairs again, counting
// repairs from now. A breaker named but not tripped is an error (exit 2), so a typo is not taken for a reset.
func ResetBreakers(ctx context.Context, client kubernetes.Interface, w io.Writer, opts ResetOptions) error {
	store, err := ledgerStore(client, opts.Lease)
	if err != nil {
		return err
	}
	var scopes []string
	for _, p := range opts.Pools {
		scopes = append(scopes, repairs.PoolScope(p))
	}
	if opts.ClusterWide {
		scopes = append(scopes, repairs.ScopeCluster)
	}
	var reset, notTripped []string
	_, err = store.Update(ctx, func(l *repairs.Ledger) bool {
		reset = l.Reset(scopes, opts.Now, opts.By)
		notTripped = nil
		for _, s := range scopes {
			if !slices.Contains(reset, s) {
				notTripped = append(notTripped, s)
			}
		}
		return len(reset) > 0
	})
	if err != nil {
		return &ExitError{Code: ExitAPI, Err: err}
	}
	for _, s := range reset {
		fmt.Fprintf(w, "circuit breaker %s reset: GPU-fault repairs resume, counted from now\n", s)
	}
	switch {
	case len(notTripped) > 0:
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("not tripped: %s", strings.Join(notTripped, ", "))}
	case len(reset) == 0:
		fmt.Fprintln(w, "no circuit breaker is tripped")
	}
	return nil
}

// Breaker is a tripped circuit breaker of GPU-fault repairs as status shows it; its JSON field names are stable.
type Breaker struct {
	Scope     string    `json:"scope"`
	TrippedAt time.Time `json:"trippedAt"`
	Reason    string    `json:"reason"`
}

// trippedBreakers reads the tripped breakers from the actions instance's ledger; a ledger never written has none.
func trippedBreakers(ctx context.Context, client kubernetes.Interface, lease string) ([]Breaker, error) {
	store, err := ledgerStore(client, lease)
	if err != nil {
		return nil, err
	}
	l, err := store.Read(ctx)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	out := []Breaker{}
	for _, scope := range l.Tripped() {
		b := l.Breakers[scope]
		out = append(out, Breaker{Scope: scope, TrippedAt: b.TrippedAt, Reason: b.Reason})
	}
	return out, nil
}

// writeBreakers is the table header's line on the breakers, when one is tripped.
func writeBreakers(w io.Writer, breakers []Breaker, now time.Time) {
	for _, b := range breakers {
		fmt.Fprintf(w, "Repair circuit breaker TRIPPED: %s since %s (%s): GPU-fault repairs held; reset with `repairs reset`\n",
			b.Scope, b.TrippedAt.UTC().Format(time.RFC3339), relative(b.TrippedAt.Sub(now)))
	}
}
