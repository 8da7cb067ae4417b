package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestRepairBreakers: a breaker the actions service tripped shows in status (table and JSON) until repairs reset
// resets it; a breaker named but not tripped, and a bad --actions.lease, are exit 2.
func TestRepairBreakers(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx := context.Background()
	lease := "default/actions-breakers"
	store := repairs.Store{Client: api.Client, Namespace: "default", Name: repairs.ConfigMapName("actions-breakers")}
	if _, err := store.Update(ctx, func(l *repairs.Ledger) bool {
		l.Trip(repairs.PoolScope("training"), clock().Add(-2*time.Hour), "2 GPU-fault repairs in pool training within the hour")
		return true
	}); err != nil {
		t.Fatal(err)
	}
	out, err := runStatus(t, api, StatusOptions{Output: OutputTable, ActionsLease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Repair circuit breaker TRIPPED: pool/training since 2026-12-01T06:00:00Z (2h00m ago): GPU-fault repairs held; reset with `repairs reset`"; !strings.Contains(out, want) {
		t.Errorf("status does not say %q:\n%s", want, out)
	}
	out, err = runStatus(t, api, StatusOptions{Output: OutputJSON, ActionsLease: lease})
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.RepairBreakers) != 1 || r.RepairBreakers[0].Scope != "pool/training" || !strings.Contains(r.RepairBreakers[0].Reason, "within the hour") {
		t.Errorf("JSON repairBreakers %+v", r.RepairBreakers)
	}

	var reply strings.Builder
	err = ResetBreakers(ctx, api.Client, &reply, ResetOptions{Lease: lease, Pools: []string{"trainig"}, Now: clock()})
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitAPI || !strings.Contains(err.Error(), "not tripped: pool/trainig") {
		t.Errorf("a misspelt pool: %v", err)
	}
	if err := ResetBreakers(ctx, api.Client, &reply, ResetOptions{Lease: lease, Pools: []string{"training"}, By: "oncall", Now: clock()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reply.String(), "circuit breaker pool/training reset") {
		t.Errorf("reset said %q", reply.String())
	}
	if out, err = runStatus(t, api, StatusOptions{Output: OutputTable, ActionsLease: lease}); err != nil || strings.Contains(out, "TRIPPED") {
		t.Errorf("status after the reset (%v):\n%s", err, out)
	}
	reply.Reset()
	if err := ResetBreakers(ctx, api.Client, &reply, ResetOptions{Lease: lease, Now: clock()}); err != nil || !strings.Contains(reply.String(), "no circuit breaker is tripped") {
		t.Errorf("reset with none tripped: %v, %q", err, reply.String())
	}
	if err := ResetBreakers(ctx, api.Client, &reply, ResetOptions{Lease: "actions", Now: clock()}); !errors.As(err, &exit) || !strings.Contains(err.Error(), "want NAMESPACE/NAME") {
		t.Errorf("a bad --actions.lease: %v", err)
	}
	if _, err := runStatus(t, api, StatusOptions{Output: OutputTable, ActionsLease: "a/b/c"}); !errors.As(err, &exit) {
		t.Errorf("status with a bad --actions.lease: %v", err)
	}
}
