package policy

import (
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	corev1 "k8s.io/api/core/v1"
)

const usagePolicy = `
maxDisruptedNodes: 50%
pools:
  - name: tpu
    nodeSelector: {policy-pool: tpu}
    maxUnavailable: 1
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
    maxUnavailable: 2
    minAvailable: 70%
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel
`

// TestUsagesAgreeWithDecide fills the serving pool one disrupted node at a time: at each step Usages' numbers
// say whether one more node may go, and Decide must agree.
func TestUsagesAgreeWithDecide(t *testing.T) {
	cfg := mustParse(t, usagePolicy)
	for down := 0; down <= 5; down++ {
		var opts []nodeOpt
		for range down {
			opts = append(opts, cordoned)
		}
		serving := fleet("l4", "l4-serve", 5, opts...)
		candidate := mkNode("l4-new", "l4-serve", scheduled)
		all := append(append([]*corev1.Node{}, serving...), candidate)
		all = append(all, fleet("a3", "a3-train", 2, cordoned)...)
		all = append(all, mkNode("cpu-0", "default"))

		pools, unmatched, cluster := Usages(cfg, views(all), (*nodeview.View).Disrupted)
		if unmatched != 1 || cluster.Nodes != len(all) || cluster.Disrupted != down+1 {
			t.Fatalf("down %d: unmatched %d, cluster %+v", down, unmatched, cluster)
		}
		u := pools[1]
		if u.Pool.Name != "serving" || u.Nodes != 6 || u.Units != 6 || u.Disrupted != down || u.MaxUnavailable != 2 || u.MinAvailable != 5 {
			t.Fatalf("down %d: serving usage %+v", down, u)
		}
		if tr := pools[2]; tr.Nodes != 2 || tr.Disrupted != 1 || tr.MaxUnavailable != 0 || tr.MinAvailable != -1 {
			t.Errorf("training usage %+v", tr)
		}
		roomInPool := u.Disrupted+1 <= u.MaxUnavailable && u.Units-(u.Disrupted+1) >= u.MinAvailable
		roomInCluster := cluster.Disrupted+1 <= cfg.MaxDisruptedNodes.Of(cluster.Nodes, false)

		candidateView := nodeview.Of(candidate)
		pool, surveyed := Survey(cfg, candidateView, views(all), (*nodeview.View).Disrupted)
		if surveyed != cluster || len(pool) != u.Nodes {
			t.Errorf("down %d: Survey says %d pool nodes, cluster %+v", down, len(pool), surveyed)
		}
		d := Decide(cfg, Input{Request: Request{Action: nodeview.Drain}, Node: candidateView, Members: []*nodeview.View{candidateView},
			Pool: pool, Cluster: surveyed, Now: saturday3am})
		if act := d.Verdict == Act; act != (roomInPool && roomInCluster) {
			t.Errorf("down %d: Decide %s (%s), usage says room in pool %v, in cluster %v", down, d.Verdict, d.Reason, roomInPool, roomInCluster)
		}
	}
}

// TestUsagesCountSlices: a multi-host TPU slice is one unit of its pool, disrupted when any of its hosts is.
func TestUsagesCountSlices(t *testing.T) {
	cfg := mustParse(t, usagePolicy)
	all := []*corev1.Node{
		mkNode("a-0", "", slice("slice-a"), cordoned), mkNode("a-1", "", slice("slice-a")),
		mkNode("b-0", "", slice("slice-b")), mkNode("b-1", "", slice("slice-b")),
	}
	pools, _, _ := Usages(cfg, views(all), (*nodeview.View).Disrupted)
	if u := pools[0]; u.Nodes != 4 || u.Units != 2 || u.Disrupted != 1 || u.MaxUnavailable != 1 {
		t.Errorf("tpu usage %+v, want 4 nodes in 2 units, 1 disrupted", u)
	}
}

// TestNextWindowStart checks NextWindowStart against InWindow minute by minute over a week: the window it names
// is closed until then and open from then on.
func TestNextWindowStart(t *testing.T) {
	cfg := mustParse(t, `
windows:
  - days: [Sat]
    start: "22:00"
    end: "04:00"
    timezone: America/Los_Angeles
  - days: [Wed, Thu]
    start: "09:30"
    end: "10:00"
pools:
  - name: all
`)
	if _, ok := NextWindowStart(nil, saturday3am); ok {
		t.Error("no windows has a next start")
	}
	for now := saturday3am; now.Before(saturday3am.Add(8 * 24 * time.Hour)); now = now.Add(7 * time.Minute) {
		if InWindows(cfg.Windows.Weekly, now) {
			continue
		}
		next, ok := NextWindowStart(cfg.Windows.Weekly, now)
		if !ok || !InWindows(cfg.Windows.Weekly, next) || InWindows(cfg.Windows.Weekly, next.Add(-time.Minute)) {
			t.Fatalf("at %s: next start %s (ok %v) is no window's opening", now, next, ok)
		}
		for m := now; m.Before(next); m = m.Add(time.Minute) {
			if InWindows(cfg.Windows.Weekly, m) {
				t.Fatalf("at %s: next start %s, but a window is open at %s", now, next, m)
			}
		}
	}
	want := time.Date(2025, 6, 11, 9, 30, 0, 0, time.UTC) // Wednesday, after Saturday night's window
	if got, _ := NextWindowStart(cfg.Windows.Weekly, time.Date(2025, 6, 8, 12, 0, 0, 0, time.UTC)); !got.Equal(want) {
		t.Errorf("Sunday noon: next start %s, want %s", got, want)
	}
}
