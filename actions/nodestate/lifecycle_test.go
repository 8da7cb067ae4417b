package nodestate

import (
	"fmt"
	"strings"
	"testing"
)

var (
	scheduledA = Maintenance{Label: "1750000000"}
	scheduledB = Maintenance{Label: "1760000000"}
)

func TestNext(t *testing.T) {
	quiet := Observation{Maintenance: scheduledA, Ready: true}
	moved := Observation{Maintenance: scheduledB, Ready: true}
	gone := Observation{Ready: true}
	inMaint := Observation{Maintenance: scheduledA, InMaintenance: true, Ready: true}
	requested := Observation{Maintenance: scheduledA, PerformRequested: true, Ready: true}
	rec := func(a Action, p Phase, mods ...func(*Record)) Record {
		r := Record{Action: a, Phase: p, Maintenance: scheduledA.Key()}
		for _, m := range mods {
			m(&r)
		}
		return r
	}
	cordoned := func(r *Record) { r.CordonedBy = "us" }
	seen := func(r *Record) { r.MaintenanceSeen = true }
	for _, tc := range []struct {
		name       string
		r          Record
		o          Observation
		drainFirst bool
		want       Step
	}{
		{"no work", Record{}, quiet, false, StepNone},
		{"done without a cordon is final", rec(Drain, Done), gone, false, StepNone},
		{"failed without a cordon is final", rec(Drain, Failed), quiet, false, StepNone},
		{"accepted drain starts draining", rec(Drain, Accepted), quiet, false, StepStartDrain},
		{"accepted perform-maintenance requests", rec(PerformMaintenance, Accepted), quiet, false, StepRequest},
		{"accepted perform-maintenance drains first", rec(PerformMaintenance, Accepted), quiet, true, StepStartDrain},
		{"accepted, maintenance moved", rec(Drain, Accepted), moved, false, StepAbandon},
		{"accepted, maintenance vanished", rec(Drain, Accepted), gone, false, StepAbandon},
		{"accepted, GKE started first", rec(Drain, Accepted), inMaint, false, StepYield},
		{"draining continues", rec(Drain, Draining, cordoned), quiet, false, StepContinueDrain},
		{"draining, maintenance moved", rec(Drain, Draining, cordoned), moved, false, StepAbandon},
		{"draining, maintenance vanished", rec(Drain, Draining, cordoned), gone, false, StepAbandon},
		{"draining, GKE started", rec(Drain, Draining, cordoned), inMaint, false, StepNoteSeen},
		{"draining, GKE started and noted", rec(Drain, Draining, cordoned, seen), inMaint, false, StepContinueDrain},
		{"draining, GKE finished before the drain", rec(Drain, Draining, cordoned, seen), gone, false, StepFinish},
		{"drained, cordon held, maintenance still pending", rec(Drain, Done, cordoned), quiet, false, StepNone},
		{"drained, cordon held, GKE started", rec(Drain, Done, cordoned), inMaint, false, StepNoteSeen},
		{"drained, cordon held, GKE under way", rec(Drain, Done, cordoned, seen), inMaint, false, StepNone},
		{"drained, cordon held, GKE finished", rec(Drain, Done, cordoned, seen), gone, false, StepFinish},
		{"drained, cordon held, GKE finished but label left", rec(Drain, Done, cordoned, seen), quiet, false, StepFinish},
		{"drained, cordon held, GKE finished, not Ready yet", rec(Drain, Done, cordoned, seen), Observation{}, false, StepNone},
		{"drained, cordon held, maintenance moved", rec(Drain, Done, cordoned), moved, false, StepAbandon},
		{"drained, cordon held, maintenance vanished unseen", rec(Drain, Done, cordoned), gone, false, StepFinish},
		{"drained, cordon held, no maintenance recorded", Record{Action: Drain, Phase: Done, CordonedBy: "us"}, gone, false, StepFinish},
		{"failed, cordon held, maintenance pending", rec(Drain, Failed, cordoned), quiet, false, StepNone},
		{"failed, cordon held, maintenance moved", rec(Drain, Failed, cordoned), moved, false, StepAbandon},
		{"failed, cordon held, GKE finished", rec(Drain, Failed, cordoned, seen), gone, false, StepFinish},
		{"requested, waiting for GKE", rec(PerformMaintenance, MaintenanceRequested), requested, false, StepNone},
		{"requested, GKE started", rec(PerformMaintenance, MaintenanceRequested), inMaint, false, StepNoteSeen},
		{"requested, GKE finished", rec(PerformMaintenance, MaintenanceRequested, seen), gone, false, StepFinish},
		{"requested, GKE finished but left the request", rec(PerformMaintenance, MaintenanceRequested, seen), Observation{PerformRequested: true, Ready: true}, false, StepFinish},
		{"requested, finished while unobserved", rec(PerformMaintenance, MaintenanceRequested), gone, false, StepFinish},
		{"requested, maintenance moved instead", rec(PerformMaintenance, MaintenanceRequested), Observation{Maintenance: scheduledB, PerformRequested: true, Ready: true}, false, StepAbandon},
		{"requested, maintenance vanished, request still set", rec(PerformMaintenance, MaintenanceRequested), Observation{PerformRequested: true, Ready: true}, false, StepAbandon},
	} {
		if got, _ := Next(tc.r, tc.o, tc.drainFirst); got != tc.want {
			t.Errorf("%s: Next = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestKeepCordonOnFailure(t *testing.T) {
	r := Record{Action: Drain, Maintenance: scheduledA.Key()}
	if !KeepCordonOnFailure(r, Observation{Maintenance: scheduledA}) {
		t.Error("unmovable maintenance still pending: the cordon stays")
	}
	if KeepCordonOnFailure(r, Observation{Maintenance: scheduledB}) || KeepCordonOnFailure(r, Observation{}) {
		t.Error("maintenance moved or gone: the cordon goes")
	}
	if KeepCordonOnFailure(Record{Action: PerformMaintenance, Maintenance: scheduledA.Key()}, Observation{Maintenance: scheduledA}) {
		t.Error("reschedulable maintenance: the cordon goes")
	}
}

// world is one node as the lifecycle sees it, with this service's decisions modelled: an alert is acted on when
// maintenance is pending, no GKE maintenance or request is under way, and no work serves the maintenance yet.
type world struct {
	action     Action
	drainFirst bool
	obs        Observation
	cordoned   bool
	rec        Record
	alert      bool
	claims     map[string]int
}

func (w *world) settle(t *testing.T, trace []string) {
	for range 20 {
		step, _ := Next(w.rec, w.obs, w.drainFirst)
		switch step {
		case StepNone:
			m := w.obs.Maintenance
			if !w.alert || Serves(w.rec, m) || w.rec.Active() {
				return
			}
			if !m.Pending() || w.obs.InMaintenance || w.obs.PerformRequested {
				w.alert = false // refused
				return
			}
			w.rec = Record{Action: w.action, Phase: Accepted, Maintenance: m.Key()}
			w.claims[m.Key()]++
		case StepStartDrain:
			if !w.cordoned {
				w.cordoned, w.rec.CordonedBy = true, "us"
			}
			w.rec.Phase = Draining
		case StepContinueDrain:
			return // the drain runs until an event ends it
		case StepRequest:
			w.obs.PerformRequested, w.rec.Phase = true, MaintenanceRequested
		case StepNoteSeen:
			w.rec.MaintenanceSeen = true
		case StepYield, StepAbandon, StepFinish:
			if w.rec.Phase == MaintenanceRequested && step == StepAbandon {
				w.obs.PerformRequested = false
			}
			if w.rec.CordonedBy != "" {
				w.cordoned, w.rec.CordonedBy = false, ""
			}
			if w.rec.Active() {
				w.rec.Phase = Done
			}
		}
	}
	t.Fatalf("%s: the lifecycle does not settle: %+v", strings.Join(trace, " → "), w.rec)
}

// events can arrive in any order.
var events = map[string]func(w *world){
	"alert":   func(w *world) { w.alert = true },
	"resolve": func(w *world) { w.alert = false },
	"moved":   func(w *world) { w.obs.Maintenance = scheduledB },
	"vanished": func(w *world) {
		w.obs.Maintenance = Maintenance{}
	},
	"gke-start": func(w *world) {
		if w.obs.Maintenance.Pending() {
			w.obs.InMaintenance, w.obs.PerformRequested = true, false
		}
	},
	"gke-finish": func(w *world) {
		if w.obs.InMaintenance {
			w.obs = Observation{Ready: true}
		}
	},
	"drain-done": func(w *world) {
		if w.rec.Phase == Draining {
			if w.rec.Action.Requests() {
				w.rec.Phase = Accepted // the executor requests next; modelled as the request step
				w.obs.PerformRequested, w.rec.Phase = true, MaintenanceRequested
				if !w.obs.Maintenance.Serves(w.rec.Maintenance) {
					w.obs.PerformRequested, w.rec.Phase = false, Done
					w.cordoned, w.rec.CordonedBy = false, ""
				}
				return
			}
			w.rec.Phase = Done
		}
	},
	"drain-fail": func(w *world) {
		if w.rec.Phase == Draining {
			w.rec.Phase = Failed
			if w.rec.CordonedBy != "" && !KeepCordonOnFailure(w.rec, w.obs) {
				w.cordoned, w.rec.CordonedBy = false, ""
			}
		}
	},
	// A restart or a change of leader loses the alerts held in memory; the node's record stays.
	"restart": func(w *world) { w.alert = false },
	// Deleted and re-created under the same name: a new node with nothing of ours on it.
	"recreated": func(w *world) {
		w.obs, w.cordoned, w.rec = Observation{Maintenance: scheduledA, Ready: true}, false, Record{}
	},
}

// TestInterleavings plays every sequence of up to four events on a node with maintenance A scheduled, for both
// actions, and checks after each event that the work is done at most once per maintenance and that the node is never
// left cordoned by this service without maintenance pending or under way.
func TestInterleavings(t *testing.T) {
	names := make([]string, 0, len(events))
	for n := range events {
		names = append(names, n)
	}
	played := 0
	var play func(w world, trace []string, depth int)
	play = func(w world, trace []string, depth int) {
		if depth == 0 {
			return
		}
		for _, ev := range names {
			next := w
			next.claims = map[string]int{}
			for k, v := range w.claims {
				next.claims[k] = v
			}
			events[ev](&next)
			tr := append(append([]string(nil), trace...), ev)
			next.settle(t, tr)
			played++
			for key, n := range next.claims {
				if n > 1 && ev != "recreated" && !contains(tr, "recreated") {
					t.Fatalf("%s: maintenance %s acted on %d times", strings.Join(tr, " → "), key, n)
				}
			}
			if next.cordoned && next.rec.CordonedBy != "" && !next.obs.InMaintenance && !next.obs.Maintenance.Serves(next.rec.Maintenance) {
				t.Fatalf("%s: left cordoned by us with no maintenance pending for the work (%+v, %+v)", strings.Join(tr, " → "), next.rec, next.obs)
			}
			if next.rec.Active() && !next.obs.InMaintenance && !next.rec.MaintenanceSeen && !next.obs.Maintenance.Serves(next.rec.Maintenance) {
				t.Fatalf("%s: work in progress for a maintenance no longer announced (%+v)", strings.Join(tr, " → "), next.rec)
			}
			play(next, tr, depth-1)
		}
	}
	for _, action := range []Action{Drain, PerformMaintenance} {
		for _, drainFirst := range []bool{false, true} {
			w := world{action: action, drainFirst: drainFirst, obs: Observation{Maintenance: scheduledA, Ready: true}, claims: map[string]int{}}
			play(w, []string{fmt.Sprintf("%s(drainFirst=%v)", action, drainFirst)}, 4)
		}
	}
	t.Logf("%d interleavings played", played)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
