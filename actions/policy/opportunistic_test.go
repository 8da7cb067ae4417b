package policy

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// reschedulable announces maintenance GKE can reschedule, starting in d.
func reschedulable(d time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[gke.AnnotationUpcomingMaintenance] = fmt.Sprintf(
			`{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true","window_start_time":%q}`,
			saturday3am.Add(d).Format(time.RFC3339))
	}
}

func TestPickOpportunistic(t *testing.T) {
	o := &config.Opportunistic{NodeIdleTime: config.Duration(600 * time.Second), MinNodes: 3, Window: config.Duration(336 * time.Hour)}
	pool := &config.Pool{Name: "serving", Opportunistic: o}
	idleFor := map[string]time.Duration{}
	idle := func(n *nodeview.View) time.Duration { return idleFor[n.Name] }
	claimable := func(n *nodeview.View) bool {
		return n.Maintenance.Pending() && !n.Record.Active()
	}
	pick := func(nodes []*corev1.Node) []string {
		got, _ := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes), Idle: idle, Disrupted: (*nodeview.View).Disrupted,
			Claimable: claimable, Now: saturday3am})
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		return names
	}
	in5d := reschedulable(5 * 24 * time.Hour)
	in6d := reschedulable(6 * 24 * time.Hour)

	// GKE's documented example: node1 busy, node2 idle 60 s, node3 and node4 idle 600 s, minNodes 3.
	nodes := fleet("node", "l4-serve", 4, in5d, in5d, in6d, in5d)
	idleFor = map[string]time.Duration{"node-0": 0, "node-1": 60 * time.Second, "node-2": 600 * time.Second, "node-3": 600 * time.Second}
	if got := fmt.Sprint(pick(nodes)); got != "[node-3]" {
		t.Errorf("GKE's example: picked %s, want node-3 (idle long enough, maintenance first)", got)
	}
	idleFor["node-2"], idleFor["node-3"] = 14*time.Minute, 14*time.Minute
	_, why := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes), Idle: idle, Disrupted: (*nodeview.View).Disrupted,
		Claimable: claimable, Now: saturday3am})
	if want := "idle 14m, maintenance in 5d, pool keeps 3 of 4 nodes"; why != want {
		t.Errorf("Event reason %q, want %q", why, want)
	}
	cordoned(nodes[3]) // taken: the pool keeps 3 of 4, no more may go
	if got := pick(nodes); got != nil {
		t.Errorf("with one node out, minNodes 3 of 4 leaves none to take: picked %v", got)
	}
	nodes[3].Spec.Unschedulable = false
	delete(nodes[3].Annotations, gke.AnnotationUpcomingMaintenance) // maintained; its announcement gone
	if got := fmt.Sprint(pick(nodes)); got != "[node-2]" {
		t.Errorf("after the first returned: picked %s, want node-2", got)
	}

	for _, tc := range []struct {
		name string
		opt  nodeOpt
	}{
		{"opted out", both(in5d, func(n *corev1.Node) { n.Labels[gke.LabelOpportunisticDisable] = "true" })},
		{"left to GKE's own opportunistic maintenance", both(in5d, func(n *corev1.Node) { n.Annotations[gke.AnnotationOpportunisticConfig] = "{}" })},
		{"maintenance beyond the window", reschedulable(20 * 24 * time.Hour)},
		{"cannot be rescheduled", func(n *corev1.Node) {
			n.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: `{"can_reschedule":"false","window_start_time":"2025-06-08T10:00:00Z"}`}
		}},
		{"no maintenance", func(*corev1.Node) {}},
		{"already acted on", both(in5d, ours(nodeview.Accepted))},
	} {
		nodes := fleet("x", "l4-serve", 5, tc.opt)
		for _, n := range nodes {
			idleFor[n.Name] = time.Hour
		}
		for _, n := range nodes[1:] {
			n.Annotations = nil // only the first could qualify
		}
		if got := pick(nodes); got != nil {
			t.Errorf("%s: picked %v", tc.name, got)
		}
	}

	// A pool GKE is upgrading: no maintenance of ours on any of its nodes, however idle, until GKE is done.
	nodes = fleet("u", "l4-serve", 6, in5d)
	for _, n := range nodes {
		idleFor[n.Name] = time.Hour
	}
	if got := fmt.Sprint(pick(nodes)); got != "[u-0]" {
		t.Fatalf("before the upgrade: picked %s, want u-0", got)
	}
	nodes[5].Labels[gke.LabelOperationType] = "drain"
	if got := pick(nodes); got != nil {
		t.Errorf("GKE drains u-5 for its upgrade: picked %v in the pool being upgraded", got)
	}

	// minNodes counts a node cordoned by someone else as unavailable.
	nodes = fleet("y", "l4-serve", 4, in5d, cordoned)
	for _, n := range nodes {
		idleFor[n.Name] = time.Hour
	}
	if got := pick(nodes); got != nil {
		t.Errorf("4 nodes, one cordoned by someone else, minNodes 3: picked %v", got)
	}

	// A multi-host slice goes only whole, with every host idle; minNodes counts slices.
	o.MinNodes = 1
	slices := append(fleet("s1", "", 2, both(slice("s1"), in5d), both(slice("s1"), in5d)), fleet("s2", "", 2, both(slice("s2"), in6d), both(slice("s2"), in6d))...)
	for _, n := range slices {
		idleFor[n.Name] = time.Hour
	}
	idleFor["s1-1"] = 0
	if got := fmt.Sprint(pick(slices)); got != "[s2-0 s2-1]" {
		t.Errorf("slices: picked %s, want the whole idle slice s2", got)
	}
}

// TestPickOpportunisticAlertSaysReschedulable: where GKE's annotation is silent (only the scheduled-maintenance-time
// label), a live alert's can_reschedule counts; where the annotation says false, it does not.
func TestPickOpportunisticAlertSaysReschedulable(t *testing.T) {
	pool := &config.Pool{Name: "serving", Opportunistic: &config.Opportunistic{NodeIdleTime: config.Duration(time.Minute),
		Window: config.Duration(336 * time.Hour)}}
	labelOnly := func(n *corev1.Node) {
		n.Labels[gke.LabelScheduledMaintenanceTime] = fmt.Sprint(saturday3am.Add(72 * time.Hour).Unix())
	}
	saysFalse := func(n *corev1.Node) {
		labelOnly(n)
		n.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: `{"can_reschedule":"false","window_start_time":"2025-06-10T10:00:00Z"}`}
	}
	for _, tc := range []struct {
		name      string
		opt       nodeOpt
		alertSays bool
		want      bool
	}{
		{"label only, no alert", labelOnly, false, false},
		{"label only, alert says reschedulable", labelOnly, true, true},
		{"annotation says false, alert says reschedulable", saysFalse, true, false},
	} {
		nodes := fleet("n", "l4-serve", 2, tc.opt)
		got, _ := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes[:1]),
			Idle:      func(*nodeview.View) time.Duration { return time.Hour },
			Disrupted: (*nodeview.View).Disrupted, Claimable: func(*nodeview.View) bool { return true },
			AlertSaysReschedulable: func(*nodeview.View) bool { return tc.alertSays }, Now: saturday3am})
		if (got != nil) != tc.want {
			t.Errorf("%s: picked %v, want picked %v", tc.name, got, tc.want)
		}
	}
}

func TestRoughly(t *testing.T) {
	for d, want := range map[time.Duration]string{
		42 * time.Second:                 "42s",
		14*time.Minute + 20*time.Second:  "14m",
		3*time.Hour + 12*time.Minute:     "3h12m",
		47*time.Hour + 59*time.Minute:    "47h59m",
		5 * 24 * time.Hour:               "5d",
		5*24*time.Hour + 6*time.Hour + 1: "5d6h",
		5*24*time.Hour - 10*time.Minute:  "5d",
	} {
		if got := roughly(d); got != want {
			t.Errorf("roughly(%v) = %q, want %q", d, got, want)
		}
	}
}
