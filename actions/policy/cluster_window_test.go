package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// clusterWindowPolicy takes the windows from the cluster at the top level; pools replace them with their own.
const clusterWindowPolicy = `
windows: {fromCluster: true}
pools:
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel
  - name: weekly
    nodeSelector: {cloud.google.com/gke-nodepool: weekly}
    windows: [{days: [Sat], start: "02:00", end: "04:00", timezone: America/Los_Angeles}]
  - name: anytime
    nodeSelector: {cloud.google.com/gke-nodepool: anytime}
    windows: []
  - name: repairs
    nodeSelector: {cloud.google.com/gke-nodepool: a4}
    windows: []
    repair: {windows: {fromCluster: true}}
`

// TestDecideClusterWindows: windows from the cluster let new work start only inside the cluster's maintenance window
// (any time without one) with no exclusion of any scope in force, and hold all of it while the cluster is not read;
// a pool's own windows replace them.
func TestDecideClusterWindows(t *testing.T) {
	cfg := mustParse(t, clusterWindowPolicy)
	now := saturday3am
	window := func(from, to time.Duration, exclusions ...gke.MaintenanceExclusion) ClusterCalendar {
		return ClusterCalendar{Maintenance: &gke.ClusterMaintenance{Window: true, Start: now.Add(from), End: now.Add(to), Exclusions: exclusions}}
	}
	exclusion := func(name, scope string, from, to time.Duration) gke.MaintenanceExclusion {
		return gke.MaintenanceExclusion{Name: name, Scope: scope, Start: now.Add(from), End: now.Add(to)}
	}
	open := window(-time.Hour, 3*time.Hour)
	closed := window(20*time.Hour, 24*time.Hour)
	noWindow := ClusterCalendar{Maintenance: &gke.ClusterMaintenance{}}
	denied := ClusterCalendar{Err: errors.New(`GKE API GetCluster projects/p/locations/l/clusters/c: Required "container.clusters.get" permission(s) (grant roles/container.clusterViewer)`)}
	drain := Request{Action: nodeview.Drain}
	pm := Request{Action: nodeview.PerformMaintenance, CanReschedule: true}
	repair := Request{Action: nodeview.Drain, HardwareFailure: true}
	for _, tc := range []struct {
		name     string
		req      Request
		node     string
		cluster  []*corev1.Node
		calendar ClusterCalendar
		want     Verdict
		code     string
		reason   string
	}{
		{name: "inside the cluster's window", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2), calendar: open,
			want: Act},
		{name: "outside the cluster's window", req: pm, node: "s-0", cluster: fleet("s", "l4-serve", 2, pending), calendar: closed,
			want: Wait, code: WaitWindow, reason: "outside the cluster's maintenance window, next open from 2025-06-08T06:00:00Z to 2025-06-08T10:00:00Z"},
		{name: "an exclusion of no upgrades closes an open window", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			calendar: window(-time.Hour, 3*time.Hour, exclusion("freeze", gke.ExclusionNoUpgrades, -time.Hour, 48*time.Hour)),
			want:     Wait, code: WaitWindow, reason: `maintenance exclusion "freeze" (no_upgrades) is in force until 2025-06-09T10:00:00Z`},
		{name: "so does one of no minor upgrades: one calendar", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			calendar: window(-time.Hour, 3*time.Hour, exclusion("minor", gke.ExclusionNoMinorUpgrades, -time.Hour, time.Hour),
				exclusion("nodes", gke.ExclusionNoMinorOrNodeUpgrades, -time.Hour, 2*time.Hour)),
			want: Wait, code: WaitWindow, reason: `"nodes" (no_minor_or_node_upgrades) is in force until 2025-06-07T12:00:00Z`},
		{name: "an exclusion not yet begun or already over holds nothing", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			calendar: window(-time.Hour, 3*time.Hour, exclusion("later", gke.ExclusionNoUpgrades, time.Hour, 2*time.Hour),
				exclusion("over", gke.ExclusionNoUpgrades, -2*time.Hour, 0)),
			want: Act},
		{name: "an exclusion without a window", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			calendar: ClusterCalendar{Maintenance: &gke.ClusterMaintenance{Exclusions: []gke.MaintenanceExclusion{exclusion("freeze", gke.ExclusionNoUpgrades, -time.Hour, time.Hour)}}},
			want:     Wait, code: WaitWindow, reason: `"freeze"`},
		{name: "no window: any time, as GKE", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2), calendar: noWindow,
			want: Act},
		{name: "a window that recurs no more", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			calendar: ClusterCalendar{Maintenance: &gke.ClusterMaintenance{Window: true}},
			want:     Wait, code: WaitWindow, reason: "recurs no more"},
		{name: "the cluster not readable: waits, with the error's fix", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2), calendar: denied,
			want: Wait, code: WaitGKEAPI, reason: "could not be read from the GKE API (GKE API GetCluster projects/p/locations/l/clusters/c: Required \"container.clusters.get\" permission(s) (grant roles/container.clusterViewer)); nothing starts until it is"},
		{name: "the cluster not read at all", req: drain, node: "s-0", cluster: fleet("s", "l4-serve", 2),
			want: Wait, code: WaitGKEAPI, reason: "not read"},
		{name: "a parallel pool waits as a whole", req: drain, node: "t-0", cluster: fleet("t", "a3-train", 4), calendar: closed,
			want: Wait, code: WaitWindow, reason: "windows from the cluster"},
		{name: "a parallel pool goes inside", req: drain, node: "t-0", cluster: fleet("t", "a3-train", 4), calendar: open,
			want: Act, reason: "in parallel (4 nodes together)"},
		{name: "a pool's weekly windows replace the cluster's: inside them, the cluster's closed", req: drain, node: "w-0",
			cluster: fleet("w", "weekly", 2), calendar: closed, want: Act},
		{name: "a pool's weekly windows replace the cluster's: an unread cluster does not hold it", req: drain, node: "w-0",
			cluster: fleet("w", "weekly", 2), calendar: denied, want: Act},
		{name: "a pool's windows []: any time", req: drain, node: "a-0", cluster: fleet("a", "anytime", 2), calendar: denied,
			want: Act},
		{name: "repair windows from the cluster hold repairs", req: repair, node: "r-0", cluster: fleet("r", "a4", 2), calendar: closed,
			want: Wait, code: WaitWindow, reason: "repair of failed hardware: windows from the cluster: outside"},
		{name: "repair windows from the cluster: unread", req: repair, node: "r-0", cluster: fleet("r", "a4", 2), calendar: denied,
			want: Wait, code: WaitGKEAPI, reason: "repair of failed hardware: windows from the cluster"},
		{name: "planned work of that pool keeps its own windows", req: drain, node: "r-0", cluster: fleet("r", "a4", 2), calendar: denied,
			want: Act},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var node *corev1.Node
			for _, n := range tc.cluster {
				if _, ok := n.Labels[gke.LabelScheduledMaintenanceTime]; !ok {
					scheduled(n)
				}
				if n.Name == tc.node {
					node = n
				}
			}
			view, all := nodeview.Of(node), views(tc.cluster)
			pool, counts := Survey(cfg, view, all, (*nodeview.View).Disrupted)
			d := Decide(cfg, Input{Request: tc.req, Node: view, Members: Scope(cfg, view, pool, all), Pool: pool, Cluster: counts,
				Calendar: tc.calendar, Now: now})
			if d.Verdict != tc.want || d.Code != tc.code || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("got %s %q (code %q), want %s containing %q (code %q)", d.Verdict, d.Reason, d.Code, tc.want, tc.reason, tc.code)
			}
		})
	}
}

// TestDecidePoolWeeklyWindows: a pool's own weekly windows replace the top-level ones, and say whose they are.
func TestDecidePoolWeeklyWindows(t *testing.T) {
	cfg := mustParse(t, `
windows: [{days: [Sat], start: "02:00", end: "04:00", timezone: America/Los_Angeles}]
pools:
  - name: sunday
    nodeSelector: {cloud.google.com/gke-nodepool: sunday}
    windows: [{days: [Sun], start: "02:00", end: "04:00", timezone: America/Los_Angeles}]
  - name: rest
`)
	for _, tc := range []struct {
		gkePool string
		want    Verdict
		reason  string
	}{
		{"sunday", Wait, "outside every maintenance window of pool sunday"},
		{"other", Act, ""},
	} {
		nodes := fleet("n", tc.gkePool, 2, scheduled, scheduled)
		view, all := nodeview.Of(nodes[0]), views(nodes)
		pool, counts := Survey(cfg, view, all, (*nodeview.View).Disrupted)
		d := Decide(cfg, Input{Request: Request{Action: nodeview.Drain}, Node: view, Pool: pool, Cluster: counts, Now: saturday3am})
		if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("pool %s: got %s %q, want %s containing %q", tc.gkePool, d.Verdict, d.Reason, tc.want, tc.reason)
		}
	}
}

// TestDecideAutoUpgradeFirst: in a rolling pool, perform-maintenance waits for an auto-upgrade GKE announced for the
// node's pool before the maintenance is due (the upgrade replaces the node); maintenance due first, maintenance
// that cannot move, failed hardware, a parallel pool and an upgrade already past or unknown go ahead.
func TestDecideAutoUpgradeFirst(t *testing.T) {
	cfg := mustParse(t, basePolicy)
	now := saturday3am
	upgrades := func(pool string, in time.Duration) ClusterCalendar {
		return ClusterCalendar{Maintenance: &gke.ClusterMaintenance{AutoUpgrades: map[string]time.Time{pool: now.Add(in)}}}
	}
	day := 24 * time.Hour
	perform := Request{Action: nodeview.PerformMaintenance, CanReschedule: true}
	for _, tc := range []struct {
		name     string
		req      Request
		node     string
		cluster  []*corev1.Node
		calendar ClusterCalendar
		want     Verdict
		reason   string
	}{
		{name: "the upgrade starts before the maintenance is due", req: perform, node: "s-0", cluster: fleet("s", "l4-serve", 4, pending),
			calendar: upgrades("l4-serve", day), want: Wait,
			reason: "GKE's auto-upgrade of node pool l4-serve starts at 2025-06-08T10:00:00Z, before maintenance window/2025-06-12T10:00:00Z is due: the upgrade replaces node s-0"},
		{name: "the maintenance is due first", req: perform, node: "s-0", cluster: fleet("s", "l4-serve", 4, pending),
			calendar: upgrades("l4-serve", 6*day), want: Act},
		{name: "the announced start has passed", req: perform, node: "s-0", cluster: fleet("s", "l4-serve", 4, pending),
			calendar: upgrades("l4-serve", -time.Hour), want: Act},
		{name: "another pool's upgrade", req: perform, node: "s-0", cluster: fleet("s", "l4-serve", 4, pending),
			calendar: upgrades("a3-train", day), want: Act},
		{name: "the cluster not read", req: perform, node: "s-0", cluster: fleet("s", "l4-serve", 4, pending),
			calendar: ClusterCalendar{Err: errors.New("unavailable")}, want: Act},
		{name: "maintenance that cannot move drains", req: Request{Action: nodeview.Drain}, node: "s-0", cluster: fleet("s", "l4-serve", 4, reschedulable(36*time.Hour)),
			calendar: upgrades("l4-serve", day), want: Act},
		{name: "failed hardware is repaired now", req: Request{Action: nodeview.PerformMaintenance, CanReschedule: true, HardwareFailure: true},
			node: "s-0", cluster: fleet("s", "l4-serve", 4, pending), calendar: upgrades("l4-serve", day), want: Act},
		{name: "a parallel pool does both in one downtime", req: perform, node: "t-0",
			cluster: fleet("t", "a3-train", 2, pending, pending), calendar: upgrades("a3-train", day), want: Act},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var node *corev1.Node
			for _, n := range tc.cluster {
				if n.Name == tc.node {
					node = n
				}
			}
			view, all := nodeview.Of(node), views(tc.cluster)
			pool, counts := Survey(cfg, view, all, (*nodeview.View).Disrupted)
			d := Decide(cfg, Input{Request: tc.req, Node: view, Members: Scope(cfg, view, pool, all), Pool: pool, Cluster: counts,
				Calendar: tc.calendar, Now: now})
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("got %s %q, want %s containing %q", d.Verdict, d.Reason, tc.want, tc.reason)
			}
			if tc.want == Wait && d.Code != WaitUpgradeReplacesNode {
				t.Errorf("wait code %q, want %q", d.Code, WaitUpgradeReplacesNode)
			}
		})
	}
}
