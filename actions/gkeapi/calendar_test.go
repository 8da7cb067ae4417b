package gkeapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
)

// startSim serves a cluster on the GKE API simulator and returns a client of it, as the actions service has one.
func startSim(t *testing.T, c *containerpb.Cluster) (*container.Server, string, *Client) {
	t.Helper()
	sim := container.New()
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	name := sim.SetCluster("p", "europe-west4", c)
	cm, err := gkecollector.NewClient(context.Background(), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Close() })
	cluster, err := gkecollector.ParseCluster(name)
	if err != nil {
		t.Fatal(err)
	}
	return sim, name, New(cm, cluster)
}

// TestCalendar: one GetCluster per TTL whatever the number of callers; what was read is read as of each caller's
// moment; a failed read waits for the TTL too, its error naming the fix, and the next read after it recovers.
func TestCalendar(t *testing.T) {
	t0 := time.Date(2026, 6, 6, 3, 0, 0, 0, time.UTC) // a Saturday, inside the weekend night window
	sim, name, client := startSim(t, &containerpb.Cluster{Name: "c", MaintenancePolicy: &containerpb.MaintenancePolicy{
		Window: &containerpb.MaintenanceWindow{Policy: &containerpb.MaintenanceWindow_RecurringWindow{RecurringWindow: &containerpb.RecurringTimeWindow{
			Window:     &containerpb.TimeWindow{StartTime: timestamppb.New(time.Date(2026, 1, 3, 2, 0, 0, 0, time.UTC)), EndTime: timestamppb.New(time.Date(2026, 1, 3, 6, 0, 0, 0, time.UTC))},
			Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU",
		}}}}})
	cal := NewCalendar(client, time.Minute)
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m, err := cal.At(ctx, t0); err != nil || !m.WindowOpen(t0) {
				t.Errorf("at %s: %+v, %v; want the window open", t0, m, err)
			}
		}()
	}
	wg.Wait()
	if n := sim.Calls(container.MethodGetCluster); n != 1 {
		t.Errorf("%d GetCluster calls for 50 decisions, want 1", n)
	}
	// A later moment within the TTL: nothing is read again, a change in the API is seen only after it.
	if m, err := cal.At(ctx, t0.Add(59*time.Second)); err != nil || !m.WindowOpen(t0.Add(59*time.Second)) {
		t.Errorf("within the TTL: %+v, %v", m, err)
	}
	if err := sim.UpdateCluster(name, func(c *containerpb.Cluster) {
		c.MaintenancePolicy.Window.MaintenanceExclusions = map[string]*containerpb.TimeWindow{
			"freeze": {StartTime: timestamppb.New(t0), EndTime: timestamppb.New(t0.Add(24 * time.Hour))}}
	}); err != nil {
		t.Fatal(err)
	}
	m, err := cal.At(ctx, t0.Add(30*time.Second))
	if err != nil || len(m.ExclusionsAt(t0.Add(30*time.Second))) != 0 || sim.Calls(container.MethodGetCluster) != 1 {
		t.Errorf("the exclusion was read within the TTL: %+v, %v", m, err)
	}
	t1 := t0.Add(time.Minute)
	if m, err := cal.At(ctx, t1); err != nil || len(m.ExclusionsAt(t1)) != 1 || sim.Calls(container.MethodGetCluster) != 2 {
		t.Errorf("after the TTL: %+v, %v; want the exclusion read", m, err)
	}

	sim.FailWith(container.MethodGetCluster, container.PermissionDenied(name), -1)
	t2 := t1.Add(time.Minute)
	if _, err := cal.At(ctx, t2); err == nil || !strings.Contains(err.Error(), "roles/container.clusterViewer") {
		t.Errorf("permission denied: %v, want an error naming the role", err)
	}
	sim.Fail(container.MethodGetCluster, codes.OK, 0)
	if _, err := cal.At(ctx, t2.Add(30*time.Second)); err == nil || sim.Calls(container.MethodGetCluster) != 3 {
		t.Errorf("a failed read is kept for the TTL: %v, %d calls", err, sim.Calls(container.MethodGetCluster))
	}
	if m, err := cal.At(ctx, t2.Add(time.Minute)); err != nil || !m.Window {
		t.Errorf("recovered: %+v, %v", m, err)
	}
}

// TestCalendarAutoUpgrades: the node pools' announced auto-upgrades come with the calendar, by pool; a start
// GKE wrote in a form not understood is left out and the rest still read.
func TestCalendarAutoUpgrades(t *testing.T) {
	start := time.Date(2026, 6, 8, 2, 0, 0, 0, time.UTC)
	announced := func(at string) *containerpb.NodeManagement {
		return &containerpb.NodeManagement{AutoUpgrade: true, UpgradeOptions: &containerpb.AutoUpgradeOptions{AutoUpgradeStartTime: at}}
	}
	_, _, client := startSim(t, &containerpb.Cluster{Name: "c", NodePools: []*containerpb.NodePool{
		{Name: "l4", Management: announced(start.Format(time.RFC3339))},
		{Name: "a3", Management: announced("next Tuesday")},
		{Name: "v5e"},
	}})
	m, err := NewCalendar(client, time.Minute).At(context.Background(), start.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.AutoUpgrades) != 1 || !m.AutoUpgrades["l4"].Equal(start) {
		t.Errorf("auto-upgrades %v, want l4's at %s only", m.AutoUpgrades, start)
	}
}

// TestCalendarFaults: an unavailable API costs one call per read (no retries that hold decisions), and an API not
// enabled is told with its own fix, not a role.
func TestCalendarFaults(t *testing.T) {
	sim, _, client := startSim(t, &containerpb.Cluster{Name: "c"})
	ctx := context.Background()
	t0 := time.Date(2026, 6, 6, 3, 0, 0, 0, time.UTC)
	cal := NewCalendar(client, time.Minute)

	sim.Fail(container.MethodGetCluster, codes.Unavailable, -1)
	if _, err := cal.At(ctx, t0); err == nil {
		t.Error("an unavailable API read as a cluster")
	}
	if n := sim.Calls(container.MethodGetCluster); n != 1 {
		t.Errorf("%d GetCluster calls for one read of an unavailable API, want 1", n)
	}

	sim.FailWith(container.MethodGetCluster, container.ServiceDisabled("p"), -1)
	_, err := cal.At(ctx, t0.Add(time.Minute))
	if err == nil || !strings.Contains(err.Error(), "enable container.googleapis.com") || strings.Contains(err.Error(), "clusterViewer") {
		t.Errorf("API not enabled: %v, want the fix to enable it, not a role", err)
	}
}
