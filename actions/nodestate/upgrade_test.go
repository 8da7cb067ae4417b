package nodestate

import (
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/upgrades"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestNextUpgrade: the pool's upgrade after its maintenance (upgrade: {withMaintenance: true}), every state with
// what ends it: the group finishing, the claim (this member's or another's), an answer lost, GKE's operation done
// or failed, the deadline, GKE's own drain of the node, and the policy no longer asking.
func TestNextUpgrade(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	const deadline = 6 * time.Hour
	since := now.Add(-time.Hour)
	rec := func(p nodeview.Phase) nodeview.Record {
		return nodeview.Record{Action: nodeview.PerformMaintenance, Phase: p, Maintenance: scheduledA.Key(), MaintenanceSeen: true,
			CordonedBy: "us", Group: []string{"a", "b"}, UpgradeSince: since}
	}
	entry := func(state upgrades.State, operation string, requested time.Time) *upgrades.Entry {
		return &upgrades.Entry{State: state, Operation: operation, Version: "1.34.1-gke.100", RequestedAt: requested}
	}
	obs := func(u *PoolUpgrade) Observation {
		if u != nil {
			u.Deadline, u.Now = deadline, now
		}
		return Observation{Ready: true, Upgrade: u}
	}
	running := &Operation{}
	for _, tc := range []struct {
		name string
		r    nodeview.Record
		o    Observation
		want Step
	}{
		// Into the wait: wherever the maintenance finishes, the node stays cordoned for the upgrade.
		{"requested, GKE finished", nodeview.Record{Action: nodeview.PerformMaintenance, Phase: nodeview.MaintenanceRequested, Maintenance: scheduledA.Key(), MaintenanceSeen: true},
			obs(&PoolUpgrade{}), StepAwaitUpgrade},
		{"drained, cordon held, GKE finished", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Done, Maintenance: scheduledA.Key(), MaintenanceSeen: true, CordonedBy: "us"},
			obs(&PoolUpgrade{}), StepAwaitUpgrade},
		{"draining, GKE finished first", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Draining, Maintenance: scheduledA.Key(), MaintenanceSeen: true, CordonedBy: "us"},
			obs(&PoolUpgrade{}), StepAwaitUpgrade},
		{"vanished unseen: nothing to follow", nodeview.Record{Action: nodeview.Drain, Phase: nodeview.Done, Maintenance: scheduledA.Key(), CordonedBy: "us"},
			obs(&PoolUpgrade{}), StepFinish},
		{"a pool without upgrades finishes", rec(nodeview.MaintenanceRequested), obs(nil), StepFinish},

		// upgrade-pending
		{"pending, group not finished", rec(nodeview.UpgradePending), obs(&PoolUpgrade{}), StepNone},
		{"pending, group finished: claim and ask", rec(nodeview.UpgradePending), obs(&PoolUpgrade{GroupFinished: true}), StepRequestUpgrade},
		{"pending, another member asked", rec(nodeview.UpgradePending), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: running}), StepNoteUpgradeRequested},
		{"pending, claimed, answer awaited", rec(nodeview.UpgradePending), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "", now.Add(-10*time.Second))}), StepNoteUpgradeRequested},
		{"pending, pool at the version already", rec(nodeview.UpgradePending), obs(&PoolUpgrade{Entry: &upgrades.Entry{State: upgrades.Done, Current: true}}), StepFinish},
		{"pending, the group never finished", func() nodeview.Record {
			r := rec(nodeview.UpgradePending)
			r.UpgradeSince = now.Add(-deadline - time.Minute)
			return r
		}(),
			obs(&PoolUpgrade{}), StepUpgradeFailed},
		{"pending, policy no longer upgrades", rec(nodeview.UpgradePending), obs(nil), StepFinish},
		{"pending, GKE drains the node", rec(nodeview.UpgradePending), Observation{Ready: true, GKEOperations: []string{"drain"}, Upgrade: &PoolUpgrade{}}, StepHandOver},

		// upgrade-requested
		{"requested, running", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: running}), StepNone},
		{"requested, operation unread", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now)}), StepNone},
		{"requested, DONE", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: &Operation{Done: true}}), StepUpgradeDone},
		{"requested, DONE with an error", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: &Operation{Done: true, Error: "boom"}}), StepUpgradeFailed},
		{"requested, ended done by another member", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Done, "op-1", now)}), StepFinish},
		{"requested, ended failed by another member", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Failed, "op-1", now)}), StepUpgradeFailed},
		{"requested, answer lost", rec(nodeview.UpgradeRequested), obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "", now.Add(-LostAnswer-time.Second))}), StepRequestUpgrade},
		{"requested, stalled past the deadline", func() nodeview.Record {
			r := rec(nodeview.UpgradeRequested)
			r.UpgradeSince = now.Add(-deadline - time.Minute)
			return r
		}(),
			obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now.Add(-deadline)), Operation: running}), StepUpgradeFailed},
		{"requested, DONE just past the deadline: done wins", func() nodeview.Record {
			r := rec(nodeview.UpgradeRequested)
			r.UpgradeSince = now.Add(-deadline - time.Minute)
			return r
		}(),
			obs(&PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now.Add(-deadline)), Operation: &Operation{Done: true}}), StepUpgradeDone},
		{"requested, GKE's upgrade drains the node", rec(nodeview.UpgradeRequested), Observation{Ready: true, GKEOperations: []string{"drain", "upgrade_nodes"},
			Upgrade: &PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: running}}, StepHandOver},
		{"requested, a new maintenance announced meanwhile: still the upgrade's", rec(nodeview.UpgradeRequested),
			Observation{Maintenance: scheduledB, Ready: true, Upgrade: &PoolUpgrade{Entry: entry(upgrades.Requested, "op-1", now), Operation: running, Deadline: deadline, Now: now}}, StepNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Next(tc.r, tc.o, false)
			if got != tc.want {
				t.Errorf("Next = %s (%s), want %s", got, why, tc.want)
			}
			if got != StepNone && got != StepRequestUpgrade && why == "" {
				t.Errorf("%s without a reason", got)
			}
		})
	}
}
