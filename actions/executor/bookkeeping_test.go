package executor

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/policy"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

var bookStart = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

func firing(node string, action nodeview.Action, startsAt time.Time) webhook.Trigger {
	return webhook.Trigger{Node: node, Action: action, Firing: true, StartsAt: startsAt}
}

func resolved(t webhook.Trigger, startsAt time.Time) webhook.Trigger {
	t.Firing, t.StartsAt = false, startsAt
	return t
}

// A repeat of the same action replaces the alert and starts its binding over; another action replaces it whole.
func TestBookkeepingRepeat(t *testing.T) {
	b := newBookkeeping()
	first := firing("n", nodeview.Drain, bookStart)
	b.take(first, bookStart, "")
	b.bind("n", first, "scheduled/1")
	b.waits("n", first, "serving", policy.WaitPoolBudget)

	repeat := firing("n", nodeview.Drain, bookStart.Add(time.Minute))
	b.take(repeat, bookStart.Add(5*time.Minute), "")
	a, ok := b.alert("n")
	if !ok || a.trigger != repeat || !a.lastSeen.Equal(bookStart.Add(5*time.Minute)) || a.maintenance != "" {
		t.Fatalf("after a repeat: %+v", a)
	}
	if a.waitCode != policy.WaitPoolBudget || a.pool != "serving" {
		t.Errorf("a repeat forgot the wait until decided again: %+v", a)
	}
	// Changes meant for the alert before the repeat are not made to the new one.
	b.bind("n", first, "scheduled/2")
	b.withdraw("n", first)
	if a, ok := b.alert("n"); !ok || a.maintenance != "" {
		t.Errorf("a stale decision changed the repeated alert: %+v, live %v", a, ok)
	}

	other := firing("n", nodeview.PerformMaintenance, bookStart)
	b.take(other, bookStart, "")
	if a, _ := b.alert("n"); a.trigger != other || a.waitCode != "" {
		t.Errorf("another action did not replace the alert whole: %+v", a)
	}
}

// A resolve withdraws the alert only when it is of the same action and started no earlier than the live one.
func TestBookkeepingResolve(t *testing.T) {
	for _, tc := range []struct {
		name            string
		resolve         webhook.Trigger
		waiting         bool
		withdrawn, wait bool
	}{
		{"same startsAt", resolved(firing("n", nodeview.Drain, bookStart), bookStart), false, true, false},
		{"newer startsAt", resolved(firing("n", nodeview.Drain, bookStart), bookStart.Add(time.Hour)), false, true, false},
		{"older startsAt: a resolve of an earlier firing", resolved(firing("n", nodeview.Drain, bookStart), bookStart.Add(-time.Hour)), false, false, false},
		{"another action", resolved(firing("n", nodeview.PerformMaintenance, bookStart), bookStart), false, false, false},
		{"another node", resolved(firing("m", nodeview.Drain, bookStart), bookStart), false, false, false},
		{"waiting alert", resolved(firing("n", nodeview.Drain, bookStart), bookStart), true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBookkeeping()
			live := firing("n", nodeview.Drain, bookStart)
			b.take(live, bookStart, "")
			if tc.waiting {
				b.waits("n", live, "serving", policy.WaitWindow)
			}
			if waited := b.resolve(tc.resolve); waited != tc.wait {
				t.Errorf("waited %v, want %v", waited, tc.wait)
			}
			if _, ok := b.alert("n"); ok == tc.withdrawn {
				t.Errorf("alert live %v after the resolve", ok)
			}
		})
	}
}

// Each kind of notice is sent once per node and key, and again once the key changes or the node is forgotten.
func TestBookkeepingNoteOnce(t *testing.T) {
	b := newBookkeeping()
	if !b.noteOnce(noticeRefusal, "n", "scheduled/1|paused") {
		t.Fatal("first refusal not new")
	}
	if b.noteOnce(noticeRefusal, "n", "scheduled/1|paused") {
		t.Error("the same refusal noted twice")
	}
	if !b.noteOnce(noticeWait, "n", "scheduled/1|paused") {
		t.Error("a wait with a refusal's key is not new: the kinds are apart")
	}
	if !b.noteOnce(noticeRefusal, "m", "scheduled/1|paused") {
		t.Error("another node's refusal is not new")
	}
	if !b.noteOnce(noticeRefusal, "n", "scheduled/1|window") {
		t.Error("a new reason is not new")
	}
	if !b.noteOnce(noticeRefusal, "n", "scheduled/1|paused") {
		t.Error("a reason seen before the last one is not new again")
	}
	b.forget("n")
	for _, kind := range []notice{noticeRefusal, noticeWait} {
		if !b.noteOnce(kind, "n", "scheduled/1|paused") {
			t.Errorf("notice %d not new after the node was forgotten", kind)
		}
	}
	if b.noteOnce(noticeRefusal, "m", "scheduled/1|paused") {
		t.Error("forgetting n forgot m")
	}
}

func bookView(name, scheduled string, mutate ...func(*corev1.Node)) *nodeview.View {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if scheduled != "" {
		n.Labels[gke.LabelScheduledMaintenanceTime] = scheduled
	}
	for _, m := range mutate {
		m(n)
	}
	return nodeview.Of(n)
}

// A deleted node is forgotten whole; others are kept.
func TestBookkeepingForget(t *testing.T) {
	b := newBookkeeping()
	for _, name := range []string{"n", "m"} {
		b.take(firing(name, nodeview.PerformMaintenance, bookStart), bookStart, "")
		b.noteOnce(noticeOverlap, name, "ns/other|scheduled/1")
		b.noteOnce(noticeOpportunisticWait, name, "scheduled/1|window")
		b.simulate(nodeview.PerformMaintenance, []*nodeview.View{bookView(name, "1767607200")})
		b.giveBack(name, "scheduled/1767607200")
	}
	b.forget("n")
	if _, ok := b.alert("n"); ok {
		t.Error("alert kept")
	}
	if b.simulatedServes(bookView("n", "1767607200")) || b.givenBackFor("n", "scheduled/1767607200") {
		t.Error("dry-run claim or give-back kept")
	}
	if !b.noteOnce(noticeOverlap, "n", "ns/other|scheduled/1") || !b.noteOnce(noticeOpportunisticWait, "n", "scheduled/1|window") {
		t.Error("notices kept")
	}
	if got := b.alerted(); !slices.Equal(got, []string{"m"}) {
		t.Errorf("alerted %v, want [m]", got)
	}
	if !b.simulatedServes(bookView("m", "1767607200")) || !b.givenBackFor("m", "scheduled/1767607200") {
		t.Error("forgetting n forgot m")
	}
}

// Losing leadership forgets alerts, notices, dry-run claims and opportunistic waits; maintenance given back stays
// given back.
func TestBookkeepingReset(t *testing.T) {
	b := newBookkeeping()
	live := firing("n", nodeview.Drain, bookStart)
	b.take(live, bookStart, "")
	b.waits("n", live, "serving", policy.WaitClusterCap)
	b.noteOnce(noticeWait, "n", "k")
	b.noteOnce(noticeRefusal, "n", "k")
	b.simulateReport("n", "incident/1")
	b.setOpportunisticWaits(map[string]opportunisticWait{"serving": {code: policy.WaitWindow, nodes: 2}})
	b.giveBack("n", "scheduled/1767607200")
	if got := len(b.waiting()); got != 2 {
		t.Fatalf("%d waiting series before the reset, want 2", got)
	}

	b.reset()
	if _, ok := b.alert("n"); ok || len(b.alerted()) != 0 {
		t.Error("alert kept")
	}
	if len(b.waiting()) != 0 {
		t.Errorf("still waiting: %v", b.waiting())
	}
	if !b.noteOnce(noticeWait, "n", "k") || !b.noteOnce(noticeRefusal, "n", "k") {
		t.Error("notices kept")
	}
	if b.simulatedIncident("n") != "" {
		t.Error("dry-run report kept")
	}
	if !b.givenBackFor("n", "scheduled/1767607200") {
		t.Error("give-back forgotten")
	}
	// A reset after opportunistic maintenance was switched off (its waits set to nil) works too.
	b.setOpportunisticWaits(nil)
	b.reset()
}

// A dry-run claim serves its maintenance while announced or under way, and ends when the maintenance moves.
func TestBookkeepingSimulated(t *testing.T) {
	b := newBookkeeping()
	b.simulate(nodeview.Drain, []*nodeview.View{bookView("n", "1767607200")})
	if !b.simulatedServes(bookView("n", "1767607200")) {
		t.Error("the claimed maintenance not served")
	}
	ongoing := bookView("n", "", func(n *corev1.Node) { n.Labels[gke.LabelActiveNodeMaintenance] = "ONGOING" })
	if !b.simulatedServes(ongoing) {
		t.Error("maintenance under way not served")
	}
	if b.simulatedServes(bookView("n", "1767610800")) {
		t.Error("a maintenance that moved served")
	}
	if b.simulatedServes(bookView("n", "1767607200")) {
		t.Error("the claim did not end when its maintenance moved")
	}
	b.simulateReport("n", "incident/1")
	if b.simulatedServes(bookView("n", "1767607200")) || b.simulatedIncident("n") != "incident/1" {
		t.Error("a dry-run report serves a maintenance, or lost its incident")
	}
}

// Due work waiting for room keeps it from optional work: any alert waiting for the cluster cap, an alert of the
// pool waiting for its budget; not alerts past their TTL.
func TestBookkeepingDueWorkWaits(t *testing.T) {
	b := newBookkeeping()
	budget := firing("n", nodeview.Drain, bookStart)
	b.take(budget, bookStart, "")
	b.waits("n", budget, "serving", policy.WaitPoolBudget)
	if code, _ := b.dueWorkWaits("serving", bookStart.Add(time.Hour), pendingTTL); code != policy.WaitPoolBudget {
		t.Errorf("the pool's budget wait: code %q", code)
	}
	if code, _ := b.dueWorkWaits("training", bookStart.Add(time.Hour), pendingTTL); code != "" {
		t.Errorf("another pool's budget wait holds this pool: code %q", code)
	}
	if code, _ := b.dueWorkWaits("serving", bookStart.Add(pendingTTL+time.Second), pendingTTL); code != "" {
		t.Errorf("an alert past its TTL holds the room: code %q", code)
	}
	b.waits("n", budget, "serving", policy.WaitClusterCap)
	if code, why := b.dueWorkWaits("training", bookStart, pendingTTL); code != policy.WaitClusterCap || why == "" {
		t.Errorf("the cluster cap wait: code %q why %q", code, why)
	}
	b.served("n")
	if code, _ := b.dueWorkWaits("training", bookStart, pendingTTL); code != "" {
		t.Errorf("served work still waits: code %q", code)
	}
}

// A request kept on the node is adopted as its live alert only when no alert was received meanwhile.
func TestBookkeepingAdopt(t *testing.T) {
	b := newBookkeeping()
	kept := liveAlert{trigger: firing("n", nodeview.ReportFaultyHost, bookStart), lastSeen: bookStart}
	if a, adopted := b.adopt("n", kept); !adopted || a != kept {
		t.Fatalf("adopted %v: %+v", adopted, a)
	}
	if a, ok := b.alert("n"); !ok || a != kept {
		t.Errorf("live alert %+v after adopting", a)
	}
	received := firing("m", nodeview.ReportFaultyHost, bookStart.Add(time.Minute))
	b.take(received, bookStart.Add(time.Minute), "")
	if a, adopted := b.adopt("m", liveAlert{trigger: firing("m", nodeview.ReportFaultyHost, bookStart)}); adopted || a.trigger != received {
		t.Errorf("adopted %v over an alert received meanwhile: %+v", adopted, a)
	}
}
