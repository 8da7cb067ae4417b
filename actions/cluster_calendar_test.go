package actions

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/gkeapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// dailyWindow is a maintenance policy whose daily window runs from `from` to `to` after now.
func dailyWindow(now time.Time, from, to time.Duration, exclusions map[string]*containerpb.TimeWindow) *containerpb.MaintenancePolicy {
	return &containerpb.MaintenancePolicy{Window: &containerpb.MaintenanceWindow{
		Policy: &containerpb.MaintenanceWindow_RecurringWindow{RecurringWindow: &containerpb.RecurringTimeWindow{
			Window:     &containerpb.TimeWindow{StartTime: timestamppb.New(now.Add(from)), EndTime: timestamppb.New(now.Add(to))},
			Recurrence: "FREQ=DAILY",
		}},
		MaintenanceExclusions: exclusions,
	}}
}

// TestClusterWindows: a policy whose windows come from the cluster, on the real API server with the GKE API
// simulator. An alert outside the cluster's maintenance window waits (window), inside it is acted on unless an
// exclusion is in force; while GKE answers PermissionDenied the alert waits (gke_api) with the role to grant in its
// Event, and is acted on once the cluster can be read again.
func TestClusterWindows(t *testing.T) {
	api := testenv.StartAPIServer(t)
	now := time.Now()
	cs := startCalendarSim(t, dailyWindow(now, 6*time.Hour, 10*time.Hour, nil))
	sim, name, client, setPolicy := cs.sim, cs.name, cs.client, cs.setPolicy
	const ttl = 300 * time.Millisecond

	c := newCluster(t, api)
	pool := unique("calendar")
	policy := fmt.Sprintf(`
windows: {fromCluster: true}
pools:
  - name: %[1]s
    nodeSelector: {pool: %[1]s}
    maxUnavailable: 2
drain: {timeout: 20s, evictionRetryDelay: 200ms}
`, pool)
	r := startReplica(t, api, policy, replicaOpts{gke: client, calendar: gkeapi.NewCalendar(client, ttl)})
	r.waitLeading()
	waiting := func(reason string) map[string]string {
		return map[string]string{"action": "drain", "pool": pool, "reason": reason}
	}

	first := unique("gpu")
	before := c.node(first, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, r, alert(first, nodeview.Drain, false, startsAt))
	c.waitEvent(first, "drain waits: windows from the cluster: outside the cluster's maintenance window, next open from")
	r.waitMetric("the alert waits for the cluster's window", "gke_disruption_actions_waiting", waiting("window"), 1)
	c.untouched(before, "outside the cluster's maintenance window")

	// The window opens, but a maintenance exclusion is in force: one calendar, so it still waits.
	setPolicy(dailyWindow(time.Now(), -time.Hour, 3*time.Hour, map[string]*containerpb.TimeWindow{
		"freeze": {StartTime: timestamppb.New(now.Add(-time.Hour)), EndTime: timestamppb.New(now.Add(24 * time.Hour)),
			Options: &containerpb.TimeWindow_MaintenanceExclusionOptions{MaintenanceExclusionOptions: &containerpb.MaintenanceExclusionOptions{
				Scope: containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES}}},
	}))
	calls := sim.Calls(container.MethodGetCluster)
	testenv.Eventually(t, waitLong, "the cluster read again", func() error {
		if sim.Calls(container.MethodGetCluster) < calls+2 {
			return fmt.Errorf("%d GetCluster calls", sim.Calls(container.MethodGetCluster))
		}
		return nil
	})
	settle()
	c.untouched(before, "inside the window, an exclusion in force")
	if v := r.metric("gke_disruption_actions_waiting", waiting("window")); v != 1 {
		t.Errorf("waiting for the window under an exclusion: %v, want 1", v)
	}

	setPolicy(dailyWindow(time.Now(), -time.Hour, 3*time.Hour, nil))
	c.waitNode(first, "drained once the cluster's window is open", drainedAndCordoned)
	r.waitMetric("nothing waits for the window", "gke_disruption_actions_waiting", waiting("window"), 0)

	// GKE refuses to read the cluster: the next alert waits, never acting on the last good read.
	// The cluster is read only when a decision asks, so the next alert's decision is the first read refused.
	sim.FailWith(container.MethodGetCluster, container.PermissionDenied(name), -1)
	time.Sleep(2 * ttl) // past any read made before the fault
	second := unique("gpu")
	before = c.node(second, map[string]string{"pool": pool}, withScheduledMaintenance)
	mustAccept(t, r, alert(second, nodeview.Drain, false, startsAt))
	c.waitEvent(second, "drain waits: windows from the cluster: its maintenance policy could not be read from the GKE API")
	c.waitEvent(second, "roles/container.clusterViewer")
	r.waitMetric("the alert waits for the GKE API", "gke_disruption_actions_waiting", waiting("gke_api"), 1)
	settle()
	c.untouched(before, "the cluster not readable")
	if n := c.countEvents(second, "DisruptionActionWaiting"); n != 1 {
		t.Errorf("%d waiting events while the API refuses, want 1 (%q)", n, c.events(second))
	}

	sim.Fail(container.MethodGetCluster, codes.OK, 0)
	c.waitNode(second, "drained once the cluster can be read", drainedAndCordoned)
	r.waitMetric("nothing waits for the GKE API", "gke_disruption_actions_waiting", waiting("gke_api"), 0)
}
