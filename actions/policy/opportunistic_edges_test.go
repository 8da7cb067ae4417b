package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func pickAll(pool *config.Pool, nodes []*corev1.Node) ([]string, string) {
	got, why := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes),
		Idle:      func(*nodeview.View) time.Duration { return time.Hour },
		Disrupted: (*nodeview.View).Disrupted,
		Claimable: func(n *nodeview.View) bool { return n.Maintenance.Pending() },
		Now:       saturday3am})
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
	}
	return names, why
}

// Guards against this: a maintenance whose announced window has already opened (GKE has not started it yet) is picked, and the
// Event reads "maintenance in -5m0s". An operator reads a negative duration in kubectl describe node.
func TestPickOpportunisticWindowAlreadyOpen(t *testing.T) {
	pool := &config.Pool{Name: "serving", Opportunistic: &config.Opportunistic{NodeIdleTime: config.Duration(time.Minute),
		Window: config.Duration(336 * time.Hour)}}
	got, why := pickAll(pool, fleet("n", "l4-serve", 1, reschedulable(-5*time.Minute)))
	if fmt.Sprint(got) != "[n-0]" {
		t.Fatalf("picked %v, want n-0: a maintenance already due is within any window", got)
	}
	if strings.Contains(why, "in -") {
		t.Errorf("Event reason %q shows a negative duration", why)
	}
}

// Holds: nodes that are NotReady, in GKE's own maintenance, with perform-maintenance requested by anyone, or with
// our work in progress are not available for minNodes.
func TestPickOpportunisticMinNodesCountsEveryUnavailableKind(t *testing.T) {
	pool := &config.Pool{Name: "serving", Opportunistic: &config.Opportunistic{NodeIdleTime: config.Duration(time.Minute),
		MinNodes: 3, Window: config.Duration(336 * time.Hour)}}
	in5d := reschedulable(5 * 24 * time.Hour)
	for _, tc := range []struct {
		name string
		down nodeOpt
	}{
		{"NotReady", notReady},
		{"no Ready condition", noConditions},
		{"GKE maintenance under way", maintenance},
		{"impending-termination taint", terminationTn},
		{"perform-maintenance requested by someone else", pmRequested},
		{"our drain in progress", func(n *corev1.Node) {
			in5d(n)
			n.Annotations[nodeview.AnnotationState] = string(nodeview.Draining)
		}},
	} {
		nodes := fleet("m", "l4-serve", 4, in5d, in5d, in5d, tc.down)
		if got, _ := pickAll(pool, nodes); got != nil {
			t.Errorf("%s: 4 nodes, one unavailable, minNodes 3: picked %v", tc.name, got)
		}
		nodes = fleet("m", "l4-serve", 5, in5d, in5d, in5d, in5d, tc.down)
		if got, why := pickAll(pool, nodes); len(got) != 1 || !strings.Contains(why, "pool keeps 3 of 5") {
			t.Errorf("%s: 5 nodes, one unavailable, minNodes 3: picked %v (%q), want one", tc.name, got, why)
		}
	}
}

// Holds: window is inclusive at its edge and excludes a second beyond.
func TestPickOpportunisticWindowEdge(t *testing.T) {
	pool := &config.Pool{Name: "serving", Opportunistic: &config.Opportunistic{NodeIdleTime: config.Duration(time.Minute),
		Window: config.Duration(48 * time.Hour)}}
	if got, _ := pickAll(pool, fleet("e", "l4-serve", 1, reschedulable(48*time.Hour))); got == nil {
		t.Error("maintenance exactly window ahead not picked")
	}
	if got, _ := pickAll(pool, fleet("e", "l4-serve", 1, reschedulable(48*time.Hour+time.Second))); got != nil {
		t.Errorf("maintenance a second beyond window picked: %v", got)
	}
}

// Holds: a node with too little idle time does not go, whatever its maintenance; the exact nodeIdleTime does.
func TestPickOpportunisticIdleEdge(t *testing.T) {
	pool := &config.Pool{Name: "serving", Opportunistic: &config.Opportunistic{NodeIdleTime: config.Duration(10 * time.Minute),
		Window: config.Duration(336 * time.Hour)}}
	nodes := fleet("i", "l4-serve", 2, reschedulable(time.Hour), reschedulable(2*time.Hour))
	idle := map[string]time.Duration{"i-0": 10*time.Minute - time.Second, "i-1": 10 * time.Minute}
	got, _ := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes),
		Idle:      func(n *nodeview.View) time.Duration { return idle[n.Name] },
		Disrupted: (*nodeview.View).Disrupted, Claimable: func(*nodeview.View) bool { return true }, Now: saturday3am})
	if len(got) != 1 || got[0].Name != "i-1" {
		t.Errorf("picked %v, want i-1 (idle exactly nodeIdleTime; i-0 a second short)", got)
	}
}
