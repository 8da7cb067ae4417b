package nodestate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

var (
	scheduledA = nodeview.Maintenance{Label: "1750000000"}
	scheduledB = nodeview.Maintenance{Label: "1760000000"}
)

func TestNext(t *testing.T) {
	quiet := Observation{Maintenance: scheduledA, Ready: true}
	moved := Observation{Maintenance: scheduledB, Ready: true}
	gone := Observation{Ready: true}
	inMaint := Observation{Maintenance: scheduledA, InMaintenance: true, Ready: true}
	requested := Observation{Maintenance: scheduledA, PerformRequested: true, Ready: true}
	upgrading := Observation{Maintenance: scheduledA, Ready: true, GKEOperations: []string{"drain", "upgrade_nodes"}}
	rec := func(a nodeview.Action, p nodeview.Phase, mods ...func(*nodeview.Record)) nodeview.Record {
		r := nodeview.Record{Action: a, Phase: p, Maintenance: scheduledA.Key()}
		for _, m := range mods {
			m(&r)
		}
		return r
	}
	cordoned := func(r *nodeview.Record) { r.CordonedBy = "us" }
	seen := func(r *nodeview.Record) { r.MaintenanceSeen = true }
	for _, tc := range []struct {
		name       string
		r          nodeview.Record
		o          Observation
		drainFirst bool
		want       Step
	}{
		{"no work", nodeview.Record{}, quiet, false, StepNone},
		{"done without a cordon is final", rec(nodeview.Drain, nodeview.Done), gone, false, StepNone},
		{"failed without a cordon is final", rec(nodeview.Drain, nodeview.Failed), quiet, false, StepNone},
		{"accepted drain starts draining", rec(nodeview.Drain, nodeview.Accepted), quiet, false, StepStartDrain},
		{"accepted perform-maintenance requests", rec(nodeview.PerformMaintenance, nodeview.Accepted), quiet, false, StepRequest},
		{"accepted perform-maintenance drains first", rec(nodeview.PerformMaintenance, nodeview.Accepted), quiet, true, StepStartDrain},
		{"accepted, maintenance moved", rec(nodeview.Drain, nodeview.Accepted), moved, false, StepAbandon},
		{"accepted, maintenance vanished", rec(nodeview.Drain, nodeview.Accepted), gone, false, StepAbandon},
		{"accepted, GKE started first", rec(nodeview.Drain, nodeview.Accepted), inMaint, false, StepYield},
		{"draining continues", rec(nodeview.Drain, nodeview.Draining, cordoned), quiet, false, StepContinueDrain},
		{"draining, maintenance moved", rec(nodeview.Drain, nodeview.Draining, cordoned), moved, false, StepAbandon},
		{"draining, maintenance vanished", rec(nodeview.Drain, nodeview.Draining, cordoned), gone, false, StepAbandon},
		{"draining, GKE started", rec(nodeview.Drain, nodeview.Draining, cordoned), inMaint, false, StepNoteSeen},
		{"draining, GKE started and noted", rec(nodeview.Drain, nodeview.Draining, cordoned, seen), inMaint, false, StepContinueDrain},
		{"draining, GKE finished before the drain", rec(nodeview.Drain, nodeview.Draining, cordoned, seen), gone, false, StepFinish},
		{"drained, cordon held, maintenance still pending", rec(nodeview.Drain, nodeview.Done, cordoned), quiet, false, StepNone},
		{"drained, cordon held, GKE started", rec(nodeview.Drain, nodeview.Done, cordoned), inMaint, false, StepNoteSeen},
		{"drained, cordon held, GKE under way", rec(nodeview.Drain, nodeview.Done, cordoned, seen), inMaint, false, StepNone},
		{"drained, cordon held, GKE finished", rec(nodeview.Drain, nodeview.Done, cordoned, seen), gone, false, StepFinish},
		{"drained, cordon held, GKE finished but label left", rec(nodeview.Drain, nodeview.Done, cordoned, seen), quiet, false, StepFinish},
		{"drained, cordon held, GKE finished, not Ready yet", rec(nodeview.Drain, nodeview.Done, cordoned, seen), Observation{}, false, StepNone},
		{"drained, cordon held, maintenance moved", rec(nodeview.Drain, nodeview.Done, cordoned), moved, false, StepAbandon},
		{"drained, cordon held, maintenance vanished unseen", rec(nodeview.Drain, nodeview.Done, cordoned), gone, false, StepFinish},
		{"drained, cordon held, no maintenance recorded", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Done, CordonedBy: "us"}, gone, false, StepFinish},
		{"failed, cordon held, maintenance pending", rec(nodeview.Drain, nodeview.Failed, cordoned), quiet, false, StepNone},
		{"failed, cordon held, maintenance moved", rec(nodeview.Drain, nodeview.Failed, cordoned), moved, false, StepAbandon},
		{"failed, cordon held, GKE finished", rec(nodeview.Drain, nodeview.Failed, cordoned, seen), gone, false, StepFinish},
		{"requested, waiting for GKE", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), requested, false, StepNone},
		{"requested, GKE started", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), inMaint, false, StepNoteSeen},
		{"requested, GKE finished", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested, seen), gone, false, StepFinish},
		{"requested, GKE finished but left the request", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested, seen), Observation{PerformRequested: true, Ready: true}, false, StepFinish},
		{"requested, finished while unobserved", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), gone, false, StepFinish},
		{"requested, maintenance moved instead", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), Observation{Maintenance: scheduledB, PerformRequested: true, Ready: true}, false, StepAbandon},
		{"requested, maintenance vanished, request still set", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), Observation{PerformRequested: true, Ready: true}, false, StepAbandon},
		{"accepted, GKE's upgrade drains the node", rec(nodeview.Drain, nodeview.Accepted), upgrading, false, StepHandOver},
		{"draining, GKE's upgrade drains the node", rec(nodeview.Drain, nodeview.Draining, cordoned), upgrading, false, StepHandOver},
		{"requested, GKE's upgrade drains the node", rec(nodeview.PerformMaintenance, nodeview.MaintenanceRequested), upgrading, false, StepHandOver},
		{"drained, cordon held, GKE's auto-repair", rec(nodeview.Drain, nodeview.Done, cordoned), Observation{Maintenance: scheduledA, GKEOperations: []string{"auto_repair_nodes"}}, false, StepHandOver},
		{"done without a cordon, GKE's upgrade: nothing left", rec(nodeview.Drain, nodeview.Done), upgrading, false, StepNone},
		{"a report is GKE's already: its own lifecycle", nodeview.Record{Action: nodeview.ReportFaultyHost, Phase: nodeview.HostReported}, Observation{FaultBehavior: "XID", ReportStatus: gke.ReportOperationRunning, GKEOperations: []string{"drain"}}, false, StepNoteReportStatus},
	} {
		if got, _ := Next(tc.r, tc.o, tc.drainFirst); got != tc.want {
			t.Errorf("%s: Next = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestKeepCordonOnFailure(t *testing.T) {
	r := nodeview.Record{Action: nodeview.Drain, Maintenance: scheduledA.Key()}
	if !KeepCordonOnFailure(r, Observation{Maintenance: scheduledA}) {
		t.Error("unmovable maintenance still pending: the cordon stays")
	}
	if KeepCordonOnFailure(r, Observation{Maintenance: scheduledB}) || KeepCordonOnFailure(r, Observation{}) {
		t.Error("maintenance moved or gone: the cordon goes")
	}
	if KeepCordonOnFailure(nodeview.Record{Action: nodeview.PerformMaintenance, Maintenance: scheduledA.Key()}, Observation{Maintenance: scheduledA}) {
		t.Error("reschedulable maintenance: the cordon goes")
	}
}

// world is one node as the lifecycle sees it, with this service's decisions modelled: an alert is acted on when
// maintenance is pending, no GKE maintenance or request is under way, and no work serves the maintenance yet.
type world struct {
	action     nodeview.Action
	drainFirst bool
	obs        Observation
	cordoned   bool
	rec        nodeview.Record
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
			if !m.Pending() || w.obs.InMaintenance || w.obs.PerformRequested || len(w.obs.GKEOperations) > 0 {
				w.alert = false // refused, or waits for the other owner
				return
			}
			w.rec = nodeview.Record{Action: w.action, Phase: nodeview.Accepted, Maintenance: m.Key()}
			w.claims[m.Key()]++
		case StepStartDrain, StepRequest:
			if len(w.obs.GKEOperations) > 0 {
				t.Fatalf("%s: %s on a node GKE's own work holds", strings.Join(trace, " → "), step)
			}
		}
		switch step {
		case StepStartDrain:
			if !w.cordoned {
				w.cordoned, w.rec.CordonedBy = true, "us"
			}
			w.rec.Phase = nodeview.Draining
		case StepContinueDrain:
			if len(w.obs.GKEOperations) > 0 {
				t.Fatalf("%s: this service drains a node GKE's own work holds", strings.Join(trace, " → "))
			}
			return // the drain runs until an event ends it
		case StepRequest:
			w.obs.PerformRequested, w.rec.Phase = true, nodeview.MaintenanceRequested
		case StepNoteSeen:
			w.rec.MaintenanceSeen = true
		case StepHandOver:
			// The cordon stays, GKE's now.
			w.rec.CordonedBy = ""
			if w.rec.Active() {
				w.rec.Phase = nodeview.Done
			}
		case StepYield, StepAbandon, StepFinish:
			if len(w.obs.GKEOperations) > 0 {
				t.Fatalf("%s: %s lifts or withdraws on a node GKE's own work holds", strings.Join(trace, " → "), step)
			}
			if w.rec.Phase == nodeview.MaintenanceRequested && step == StepAbandon {
				w.obs.PerformRequested = false
			}
			if w.rec.CordonedBy != "" {
				w.cordoned, w.rec.CordonedBy = false, ""
			}
			if w.rec.Active() {
				w.rec.Phase = nodeview.Done
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
		w.obs.Maintenance = nodeview.Maintenance{}
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
		if w.rec.Phase == nodeview.Draining {
			if w.rec.Action.Requests() {
				w.rec.Phase = nodeview.Accepted // the executor requests next; modelled as the request step
				w.obs.PerformRequested, w.rec.Phase = true, nodeview.MaintenanceRequested
				if !w.obs.Maintenance.Serves(w.rec.Maintenance) {
					w.obs.PerformRequested, w.rec.Phase = false, nodeview.Done
					w.cordoned, w.rec.CordonedBy = false, ""
				}
				return
			}
			w.rec.Phase = nodeview.Done
		}
	},
	"drain-fail": func(w *world) {
		if w.rec.Phase == nodeview.Draining {
			w.rec.Phase = nodeview.Failed
			if w.rec.CordonedBy != "" && !KeepCordonOnFailure(w.rec, w.obs) {
				w.cordoned, w.rec.CordonedBy = false, ""
			}
		}
	},
	// A restart or a change of leader loses the alerts held in memory; the node's record stays.
	"restart": func(w *world) { w.alert = false },
	// GKE's upgrade drains the node (cordoned by GKE); it then re-creates it (recreated) or the drain is called off.
	"gke-operation": func(w *world) { w.obs.GKEOperations, w.cordoned = []string{"drain", "upgrade_nodes"}, true },
	"gke-operation-off": func(w *world) {
		if len(w.obs.GKEOperations) > 0 {
			w.obs.GKEOperations = nil
		}
	},
	// Deleted and re-created under the same name: a new node with nothing of ours on it.
	"recreated": func(w *world) {
		w.obs, w.cordoned, w.rec = Observation{Maintenance: scheduledA, Ready: true}, false, nodeview.Record{}
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
	for _, action := range []nodeview.Action{nodeview.Drain, nodeview.PerformMaintenance} {
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

func TestNextReport(t *testing.T) {
	rec := func(p nodeview.Phase, status string) nodeview.Record {
		return nodeview.Record{Action: nodeview.ReportFaultyHost, Phase: p, Incident: "incident/x", ReportStatus: status}
	}
	labelled := func(status gke.ReportStatus) Observation {
		return Observation{FaultBehavior: "XID", ReportStatus: status, Ready: true}
	}
	for _, tc := range []struct {
		name string
		r    nodeview.Record
		o    Observation
		want Step
	}{
		{"accepted: report", rec(nodeview.Accepted, ""), Observation{Ready: true}, StepReport},
		{"accepted, a final status left from before: report", rec(nodeview.Accepted, ""), Observation{ReportStatus: gke.ReportOperationDone}, StepReport},
		{"accepted, label set by another hand: yield", rec(nodeview.Accepted, ""), labelled(""), StepYield},
		{"accepted, GKE busy: yield", rec(nodeview.Accepted, ""), Observation{ReportStatus: gke.ReportOperationRunning}, StepYield},
		{"accepted needs no maintenance and ignores GKE maintenance", rec(nodeview.Accepted, ""), Observation{InMaintenance: true}, StepReport},
		{"reported, GKE silent yet", rec(nodeview.HostReported, ""), labelled(""), StepNone},
		{"reported, pods evicted", rec(nodeview.HostReported, ""), labelled(gke.ReportPodsEvicted), StepNoteReportStatus},
		{"reported, pods evicted noted", rec(nodeview.HostReported, "PodsEvicted"), labelled(gke.ReportPodsEvicted), StepNone},
		{"reported, operation running", rec(nodeview.HostReported, "PodsEvicted"), labelled(gke.ReportOperationRunning), StepNoteReportStatus},
		{"reported, operation done", rec(nodeview.HostReported, "OperationRUNNING"), labelled(gke.ReportOperationDone), StepFinish},
		{"reported, done and label removed", rec(nodeview.HostReported, "OperationRUNNING"), Observation{ReportStatus: gke.ReportOperationDone}, StepFinish},
		{"reported, error and label removed", rec(nodeview.HostReported, "PodsEvicted"), Observation{ReportStatus: gke.ReportError}, StepFail},
		{"reported, label removed by hand", rec(nodeview.HostReported, ""), Observation{Ready: true}, StepAbandon},
		{"reported, under GKE maintenance", rec(nodeview.HostReported, "OperationRUNNING"), Observation{FaultBehavior: "XID", ReportStatus: gke.ReportOperationRunning, InMaintenance: true}, StepNone},
		{"done is final", rec(nodeview.Done, "OperationDone"), Observation{ReportStatus: gke.ReportOperationDone}, StepNone},
		{"failed is final", rec(nodeview.Failed, "Error"), Observation{ReportStatus: gke.ReportError}, StepNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := Next(tc.r, tc.o, true); got != tc.want {
				t.Errorf("Next = %s (%q), want %s", got, why, tc.want)
			}
		})
	}
}

func TestNextFaultDrain(t *testing.T) {
	incident := nodeview.GPUIncidentKey("boot-1", "79")
	rec := func(p nodeview.Phase, cordon bool) nodeview.Record {
		r := nodeview.Record{Action: nodeview.Drain, Phase: p, Incident: incident}
		if cordon {
			r.CordonedBy = "us"
		}
		return r
	}
	sameBoot := Observation{BootID: "boot-1", Ready: true}
	newBoot := Observation{BootID: "boot-2", Ready: true}
	gkeWorking := Observation{BootID: "boot-1", InMaintenance: true}
	for _, tc := range []struct {
		name   string
		r      nodeview.Record
		o      Observation
		want   Step
		reason string
	}{
		{"accepted: no maintenance needed, the fault is the reason", rec(nodeview.Accepted, false), sameBoot, StepStartDrain, ""},
		{"draining continues", rec(nodeview.Draining, true), sameBoot, StepContinueDrain, ""},
		{"drained: the cordon holds the faulty node", rec(nodeview.Done, true), sameBoot, StepNone, ""},
		{"failed: the cordon holds it too", rec(nodeview.Failed, true), sameBoot, StepNone, ""},
		{"drained, node booted anew: cordon lifted", rec(nodeview.Done, true), newBoot, StepFinish, "booted anew (boot boot-2; the GPU fault was of boot boot-1)"},
		{"failed, node booted anew: cordon lifted", rec(nodeview.Failed, true), newBoot, StepFinish, "the fault is gone with that boot"},
		{"draining, node booted anew: the drain ends", rec(nodeview.Draining, true), newBoot, StepAbandon, "before the drain finished"},
		{"accepted, GKE started first", rec(nodeview.Accepted, false), gkeWorking, StepYield, "GKE started"},
		{"draining while GKE works: carries on", rec(nodeview.Draining, true), gkeWorking, StepContinueDrain, ""},
		{"done without a cordon is final", rec(nodeview.Done, false), newBoot, StepNone, ""},
		{"drained, GKE's upgrade drains the node: handed over", rec(nodeview.Done, true), Observation{BootID: "boot-1", GKEOperations: []string{"drain"}}, StepHandOver, "replaced: GKE's own work on the node (drain)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, why := Next(tc.r, tc.o, false)
			if step != tc.want || !strings.Contains(why, tc.reason) {
				t.Errorf("Next = %s %q, want %s containing %q", step, why, tc.want, tc.reason)
			}
		})
	}
	if !KeepCordonOnFailure(rec(nodeview.Draining, true), sameBoot) {
		t.Error("a failed GPU-fault drain lifts the cordon off the faulty node")
	}
	if m := (nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Accepted, Incident: incident, Maintenance: "scheduled/1750000000"}); m.FaultDrain() {
		t.Error("a drain for a maintenance read as a GPU fault's")
	}
}
