package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// dueIn schedules the node's maintenance d after saturday3am.
func dueIn(d time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		n.Labels[gke.LabelScheduledMaintenanceTime] = fmt.Sprint(saturday3am.Add(d).Unix())
	}
}

// optional is opportunistic work of ours in phase on a cordoned node.
func optional(phase nodeview.Phase) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Annotations = map[string]string{nodeview.AnnotationState: string(phase),
			nodeview.AnnotationAction: string(nodeview.OpportunisticMaintenance)}
	}
}

func with(opts ...nodeOpt) nodeOpt {
	return func(n *corev1.Node) {
		for _, o := range opts {
			o(n)
		}
	}
}

// Due work goes before optional work: opportunistic work GKE has not started is given back, the least urgent
// first and no more than makes room; optional work never takes the room due work waits for.
func TestDueWorkFirst(t *testing.T) {
	drain := Request{Action: nodeview.Drain}
	perform := Request{Action: nodeview.PerformMaintenance, CanReschedule: true}
	opportunistic := Request{Action: nodeview.OpportunisticMaintenance, CanReschedule: true}
	for _, tc := range []struct {
		name     string
		policy   string
		req      Request
		cluster  []*corev1.Node // the candidate is the first node
		want     Verdict
		code     string
		giveBack []string
		reason   string
	}{
		{
			name:   "a due drain has the idle node's requested maintenance given back",
			policy: "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested))),
			want: Wait, code: WaitClusterCap, giveBack: []string{"n-1"}, reason: "giving back opportunistic maintenance",
		},
		{
			name:   "a due perform-maintenance too",
			policy: "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    perform,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.Draining))),
			want: Wait, code: WaitClusterCap, giveBack: []string{"n-1"},
		},
		{
			name:   "only as much as makes room, the latest maintenance first",
			policy: "maxDisruptedNodes: 3\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    drain,
			cluster: fleet("n", "p", 5, dueIn(time.Hour),
				with(dueIn(3*24*time.Hour), optional(nodeview.MaintenanceRequested)),
				with(dueIn(5*24*time.Hour), optional(nodeview.Accepted)),
				cordoned),
			want: Wait, code: WaitClusterCap, giveBack: []string{"n-2"},
		},
		{
			name:   "a pool budget held by optional work",
			policy: "pools: [{name: all, maxUnavailable: 1}]\n",
			req:    drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested))),
			want: Wait, code: WaitPoolBudget, giveBack: []string{"n-1"},
		},
		{
			name:   "a whole multi-host slice is given back together",
			policy: "maxDisruptedNodes: 4\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    drain,
			cluster: append(fleet("n", "p", 1, dueIn(time.Hour)), fleet("s", "p", 4,
				with(slice("slice-a"), dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested)),
				with(slice("slice-a"), dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested)),
				with(slice("slice-a"), dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested)),
				with(slice("slice-a"), dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested)))...),
			want: Wait, code: WaitClusterCap, giveBack: []string{"s-0", "s-1", "s-2", "s-3"},
		},
		{
			name:   "nothing is given back when it would not make room",
			policy: "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested)), notReady),
			want: Wait, code: WaitClusterCap,
		},
		{
			name:   "maintenance GKE started is not given back",
			policy: "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested), maintenance)),
			want: Wait, code: WaitClusterCap,
		},
		{
			name:    "a drain of ours is not optional",
			policy:  "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:     drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour), with(dueIn(5*24*time.Hour), ours(nodeview.Draining))),
			want:    Wait, code: WaitClusterCap,
		},
		{
			name:   "optional work never has optional work given back",
			policy: "maxDisruptedNodes: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:    opportunistic,
			cluster: fleet("n", "p", 4, dueIn(time.Hour),
				with(dueIn(5*24*time.Hour), optional(nodeview.MaintenanceRequested))),
			want: Wait, code: WaitClusterCap,
		},
		{
			name:    "opportunistic work leaves the headroom to due work",
			policy:  "maxDisruptedNodes: 2\nopportunisticHeadroom: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:     opportunistic,
			cluster: fleet("n", "p", 4, dueIn(time.Hour), cordoned),
			want:    Wait, code: WaitClusterCap, reason: "opportunisticHeadroom 1",
		},
		{
			name:    "due work uses the headroom",
			policy:  "maxDisruptedNodes: 2\nopportunisticHeadroom: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:     drain,
			cluster: fleet("n", "p", 4, dueIn(time.Hour), cordoned),
			want:    Act,
		},
		{
			name:    "opportunistic work inside the cap less its headroom",
			policy:  "maxDisruptedNodes: 3\nopportunisticHeadroom: 1\npools: [{name: all, maxUnavailable: 10}]\n",
			req:     opportunistic,
			cluster: fleet("n", "p", 4, dueIn(time.Hour), cordoned),
			want:    Act,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.policy)
			all := views(tc.cluster)
			node := all[0]
			var reclaimable []*nodeview.View
			for _, n := range all {
				if Reclaimable(n) {
					reclaimable = append(reclaimable, n)
				}
			}
			pool, counts := Survey(cfg, node, all, (*nodeview.View).Disrupted)
			got := Decide(cfg, Input{Request: tc.req, Node: node, Members: []*nodeview.View{node}, Pool: pool,
				Cluster: counts, Reclaimable: reclaimable, Now: saturday3am})
			if got.Verdict != tc.want || got.Code != tc.code || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("got %s %q (%q), want %s %q with reason containing %q", got.Verdict, got.Code, got.Reason, tc.want, tc.code, tc.reason)
			}
			if !slices.Equal(got.GiveBack, tc.giveBack) {
				t.Errorf("gives back %v, want %v", got.GiveBack, tc.giveBack)
			}
		})
	}
}
