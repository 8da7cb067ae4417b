package policy

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/repairs"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// guardPolicy: pool gpu (maxConcurrent 5 so the budget never decides here), maxPerHour 2; pool small with the
// defaults; a cluster-wide breaker of 3 an hour.
const guardPolicy = `
repair: {maxPerHour: 3}
pools:
  - name: gpu
    nodeSelector: {cloud.google.com/gke-nodepool: a4}
    repair: {maxConcurrent: 5, maxPerHour: 2}
  - name: small
    nodeSelector: {cloud.google.com/gke-nodepool: a4-small}
    repair: {maxConcurrent: 5}
`

// gpuNode is an A4 node in its boot "boot-1", in topology block blk unless unknown ("").
func gpuNode(block string) nodeOpt {
	return func(n *corev1.Node) {
		n.Labels[gke.LabelInstanceType] = "a4-highgpu-8g"
		if block != "" {
			n.Labels[gke.LabelTopologyBlock] = block
		}
		n.Status.NodeInfo.BootID = "boot-1"
	}
}

// xidShown adds the device plugin's condition for Xid 79 in the node's boot, since at.
func xidShown(at time.Time) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: gke.ConditionXidCriticalError,
			Status: corev1.ConditionTrue, Reason: `{"79":true}`, Message: n.Status.NodeInfo.BootID,
			LastTransitionTime: metav1.NewTime(at)})
	}
}

func newBoot(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" }

// repairedRecord is this service's finished report of the node's host for Xid 79 in boot.
func repairedRecord(boot string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[nodeview.AnnotationAction] = string(nodeview.ReportFaultyHost)
		n.Annotations[nodeview.AnnotationState] = string(nodeview.Done)
		n.Annotations[nodeview.AnnotationIncident] = nodeview.GPUIncidentKey(boot, "79")
	}
}

func entry(node, pool, block, boot string, ago time.Duration, held string) repairs.Entry {
	return repairs.Entry{Node: node, Pool: pool, Block: block, Incident: nodeview.GPUIncidentKey(boot, "79"),
		At: saturday3am.Add(-ago), Held: held}
}

func TestGuardRepair(t *testing.T) {
	cfg := mustParse(t, guardPolicy)
	report := Request{Action: nodeview.ReportFaultyHost, HardwareFailure: true}
	shown := both(gpuNode("b1"), xidShown(saturday3am.Add(-time.Minute)))
	for _, tc := range []struct {
		name     string
		node     []nodeOpt // the deciding node's (g-0)
		others   []nodeOpt // g-1, g-2, ...
		ledger   repairs.Ledger
		want     Verdict
		hold     string
		trip     string
		reason   string
		gkePool  string
		poolSize int
	}{
		{
			name: "a fault the node shows is repaired",
			node: []nodeOpt{shown},
			want: Act, reason: "repair of failed hardware",
		},
		{
			name: "a fault only the alert reports (dcgm-exporter) is repaired: the node shows nothing either way",
			node: []nodeOpt{gpuNode("b1")},
			want: Act,
		},
		{
			name:   "an incident the ledger admitted acts again: its claim was interrupted",
			node:   []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", time.Minute, ""), entry("g-0", "gpu", "b1", "boot-0", time.Hour, "")}},
			want:   Act,
		},
		{
			name:   "sticky gauge: Xid 79 repaired in the last boot, the node shows nothing in this one",
			node:   []nodeOpt{gpuNode("b1"), newBoot},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", 30*time.Minute, "")}},
			want:   Refuse, hold: repairs.HoldUnconfirmed, reason: "the old fault's gauge",
		},
		{
			name: "sticky gauge with the ledger lost (deleted, emptied): the node's own record of its repair holds it",
			node: []nodeOpt{gpuNode("b1"), newBoot, repairedRecord("boot-1")},
			want: Refuse, hold: repairs.HoldUnconfirmed, reason: "its host reported and replaced",
		},
		{
			name: "the node's record of a repair in an earlier boot does not hold a fault it shows now",
			node: []nodeOpt{gpuNode("b1"), newBoot, repairedRecord("boot-1"), xidShown(saturday3am.Add(-time.Minute))},
			want: Act,
		},
		{
			name:   "the same Xid again, shown by the node in its new boot, is a new fault",
			node:   []nodeOpt{gpuNode("b1"), newBoot, xidShown(saturday3am.Add(-time.Minute))},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", 2*time.Hour, "")}},
			want:   Act,
		},
		{
			name: "maxPerNode: two repairs in 7 days hand the third to a person",
			node: []nodeOpt{gpuNode("b1"), func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-3" }, xidShown(saturday3am)},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", 6*24*time.Hour, ""),
				entry("g-0", "gpu", "b1", "boot-2", 2*time.Hour, "")}},
			want: Refuse, hold: repairs.HoldMaxPerNode, reason: "2 automatic repairs in 7 days (repair.maxPerNode 2)",
		},
		{
			name: "maxPerNode counts 7 days only",
			node: []nodeOpt{gpuNode("b1"), func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-3" }, xidShown(saturday3am)},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", 8*24*time.Hour, ""),
				entry("g-0", "gpu", "b1", "boot-2", 2*time.Hour, "")}},
			want: Act,
		},
		{
			name: "correlation: the third node of a block within 10 minutes is held",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b1", "boot-1", 5*time.Minute, ""),
				entry("g-2", "gpu", "b1", "boot-1", 2*time.Minute, "")}},
			want: Refuse, hold: repairs.HoldCorrelated, reason: "3 nodes of topology block b1 had a GPU fault within 10m0s (g-0, g-1, g-2",
		},
		{
			name:   "correlation counts nodes that show a fault before any alert about them",
			node:   []nodeOpt{shown},
			others: []nodeOpt{both(gpuNode("b1"), xidShown(saturday3am.Add(-3*time.Minute))), both(gpuNode("b1"), xidShown(saturday3am.Add(-4*time.Minute)))},
			want:   Refuse, hold: repairs.HoldCorrelated, reason: "3 nodes of topology block b1",
		},
		{
			name: "two nodes of a block are no correlation",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b1", "boot-1", 5*time.Minute, ""),
				entry("g-2", "gpu", "b1", "boot-1", 70*time.Minute, "")}},
			want: Act,
		},
		{
			name: "faults in other blocks are no correlation",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b2", "boot-1", 5*time.Minute, repairs.HoldCorrelated),
				entry("g-2", "gpu", "b3", "boot-1", 2*time.Minute, repairs.HoldCorrelated)}},
			want: Act,
		},
		{
			name: "blocks unknown: the pool is where faults correlate",
			node: []nodeOpt{gpuNode("")},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "", "boot-1", 5*time.Minute, repairs.HoldBreaker),
				entry("g-2", "gpu", "", "boot-1", 2*time.Minute, "")}},
			want: Refuse, hold: repairs.HoldCorrelated, reason: "pool gpu (topology blocks unknown)",
		},
		{
			name:   "a hold decided for the incident stands after its window",
			node:   []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{{Node: "g-0", Pool: "gpu", Incident: nodeview.GPUIncidentKey("boot-1", "79"), At: saturday3am.Add(-time.Hour), Held: repairs.HoldCorrelated, Reason: "held before"}}},
			want:   Refuse, hold: repairs.HoldCorrelated, reason: "held before",
		},
		{
			name: "maxPerHour: the pool's third repair in the hour trips its breaker",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b2", "boot-1", 50*time.Minute, ""),
				entry("g-2", "gpu", "b3", "boot-1", 20*time.Minute, "")}},
			want: Refuse, hold: repairs.HoldBreaker, trip: repairs.PoolScope("gpu"), reason: "2 GPU-fault repairs in pool gpu within the hour (repair.maxPerHour 2 = 2)",
		},
		{
			name: "maxPerHour counts the hour only",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b2", "boot-1", 61*time.Minute, ""),
				entry("g-2", "gpu", "b3", "boot-1", 20*time.Minute, "")}},
			want: Act,
		},
		{
			name:   "a tripped breaker holds after its hour",
			node:   []nodeOpt{shown},
			ledger: repairs.Ledger{Breakers: map[string]repairs.Breaker{repairs.PoolScope("gpu"): {TrippedAt: saturday3am.Add(-5 * time.Hour), Reason: "tripped"}}},
			want:   Refuse, hold: repairs.HoldBreaker, reason: "circuit breaker of pool gpu is tripped since",
		},
		{
			name: "a reset breaker counts repairs from its reset",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-1", "gpu", "b2", "boot-1", 50*time.Minute, ""),
				entry("g-2", "gpu", "b3", "boot-1", 20*time.Minute, "")},
				Breakers: map[string]repairs.Breaker{repairs.PoolScope("gpu"): {ResetAt: saturday3am.Add(-10 * time.Minute)}}},
			want: Act,
		},
		{
			name: "a breaker-held incident is decided again: it acts once the breaker is reset",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("g-0", "gpu", "b1", "boot-1", 20*time.Minute, repairs.HoldBreaker)},
				Breakers: map[string]repairs.Breaker{repairs.PoolScope("gpu"): {ResetAt: saturday3am.Add(-time.Minute)}}},
			want: Act,
		},
		{
			name: "cluster-wide maxPerHour over every pool",
			node: []nodeOpt{shown},
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("s-1", "small", "b7", "boot-1", 50*time.Minute, ""),
				entry("s-2", "small", "b8", "boot-1", 40*time.Minute, ""), entry("g-2", "gpu", "b9", "boot-1", 20*time.Minute, "")}},
			want: Refuse, hold: repairs.HoldBreaker, trip: repairs.ScopeCluster, reason: "3 GPU-fault repairs in the cluster",
		},
		{
			name: "default maxPerHour: 10% of a pool of 20 is 2",
			node: []nodeOpt{shown}, gkePool: "a4-small", poolSize: 20,
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("s-1", "small", "b7", "boot-1", 50*time.Minute, ""),
				entry("s-2", "small", "b8", "boot-1", 40*time.Minute, "")}},
			want: Refuse, hold: repairs.HoldBreaker, trip: repairs.PoolScope("small"), reason: "(repair.maxPerHour 10% = 2)",
		},
		{
			name: "default maxPerHour: at least 1 in a small pool",
			node: []nodeOpt{shown}, gkePool: "a4-small", poolSize: 3,
			ledger: repairs.Ledger{Entries: []repairs.Entry{entry("s-1", "small", "b7", "boot-1", 50*time.Minute, "")}},
			want:   Refuse, hold: repairs.HoldBreaker, trip: repairs.PoolScope("small"), reason: "(repair.maxPerHour 10% = 1)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gkePool, size := tc.gkePool, tc.poolSize
			if gkePool == "" {
				gkePool, size = "a4", 10
			}
			opts := append([]nodeOpt{both(tc.node...)}, tc.others...)
			all := views(fleet("g", gkePool, size, opts...))
			node := all[0]
			pool, cluster := Survey(cfg, node, all, (*nodeview.View).Disrupted)
			d := Decide(cfg, Input{Request: report, Node: node, Members: []*nodeview.View{node}, Pool: pool, Cluster: cluster,
				Fault: &GPUFault{Xid: "79", Incident: nodeview.GPUIncidentKey(node.BootID, "79")}, Ledger: tc.ledger, Now: saturday3am})
			if d.Verdict != tc.want || d.Hold != tc.hold || d.Trip != tc.trip || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("got %s hold %q trip %q: %q; want %s hold %q trip %q containing %q", d.Verdict, d.Hold, d.Trip, d.Reason,
					tc.want, tc.hold, tc.trip, tc.reason)
			}
		})
	}
}

// TestGuardOnlyWhenTheBudgetLetsAct: a repair that waits for its budget is not counted or held by the guard rails.
func TestGuardOnlyWhenTheBudgetLetsAct(t *testing.T) {
	cfg := mustParse(t, repairPolicy) // pool plain: maxConcurrent 1
	reported := func(n *corev1.Node) { n.Labels[gke.LabelFaultBehavior] = "XID" }
	all := views(fleet("p", "a4-plain", 3, gpuNode("b1"), both(gpuNode("b1"), reported)))
	pool, cluster := Survey(cfg, all[0], all, (*nodeview.View).Disrupted)
	ledger := repairs.Ledger{Breakers: map[string]repairs.Breaker{repairs.ScopeCluster: {TrippedAt: saturday3am}}}
	d := Decide(cfg, Input{Request: Request{Action: nodeview.ReportFaultyHost, HardwareFailure: true}, Node: all[0],
		Members: all[:1], Pool: pool, Cluster: cluster, Fault: &GPUFault{Xid: "79", Incident: "gpu/boot-1/xid/79"}, Ledger: ledger, Now: saturday3am})
	if d.Verdict != Wait || d.Code != WaitPoolBudget || d.Hold != "" {
		t.Errorf("got %s %q (code %q, hold %q), want a wait for the pool budget", d.Verdict, d.Reason, d.Code, d.Hold)
	}
}

// TestLaterGKENoticeIsTheSameIncident: GKE's FAILURE_GPU_XID maintenance, announced after this service reported the
// host for the fault of the node's current boot, is that incident: refused, never a second repair.
func TestLaterGKENoticeIsTheSameIncident(t *testing.T) {
	cfg := mustParse(t, repairPolicy)
	failure := announced("PENDING", "FAILURE_GPU_XID", "FAILURE_GPU")
	record := func(phase nodeview.Phase, boot string) nodeOpt {
		return func(n *corev1.Node) {
			n.Annotations[nodeview.AnnotationAction] = string(nodeview.ReportFaultyHost)
			n.Annotations[nodeview.AnnotationState] = string(phase)
			n.Annotations[nodeview.AnnotationIncident] = nodeview.GPUIncidentKey(boot, "79")
		}
	}
	for _, tc := range []struct {
		name   string
		opts   []nodeOpt
		reason string
		want   Verdict
	}{
		{"reported in this boot", []nodeOpt{gpuNode("b1"), failure, record(nodeview.Done, "boot-1")}, "one incident, one repair", Refuse},
		{"the report failed: GKE's repair is the one left", []nodeOpt{gpuNode("b1"), failure, record(nodeview.Failed, "boot-1")}, "repair of failed hardware", Act},
		{"reported in an earlier boot: a new fault", []nodeOpt{gpuNode("b1"), failure, record(nodeview.Done, "boot-0")}, "repair of failed hardware", Act},
		{"the node drained for the fault: GKE's repair goes ahead", []nodeOpt{gpuNode("b1"), failure, func(n *corev1.Node) {
			n.Annotations[nodeview.AnnotationAction] = string(nodeview.Drain)
			n.Annotations[nodeview.AnnotationState] = string(nodeview.Done)
			n.Annotations[nodeview.AnnotationIncident] = nodeview.GPUIncidentKey("boot-1", "79")
		}}, "repair of failed hardware", Act},
		{"a failure other than the GPU's", []nodeOpt{gpuNode("b1"), announced("PENDING", "FAILURE_MEMORY"), record(nodeview.Done, "boot-1")}, "repair of failed hardware", Act},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := views(fleet("a4", "a4", 5, both(append(tc.opts, scheduled)...)))
			pool, cluster := Survey(cfg, all[0], all, (*nodeview.View).Disrupted)
			req := RequestFor(nodeview.PerformMaintenance, true, false, all[0].Maintenance)
			d := Decide(cfg, Input{Request: req, Node: all[0], Members: all[:1], Pool: pool, Cluster: cluster, Now: saturday3am})
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("got %s %q, want %s containing %q", d.Verdict, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

// TestGPUFaultDrain: GKENodeGPUFailed's drain (a machine type GKE cannot replace) needs no maintenance pending and is
// a repair under the guard rails; any other drain still needs one.
func TestGPUFaultDrain(t *testing.T) {
	cfg := mustParse(t, guardPolicy)
	all := views(fleet("g", "a4", 10, both(gpuNode("b1"), func(n *corev1.Node) { n.Labels[gke.LabelInstanceType] = "a3-highgpu-4g" })))
	pool, cluster := Survey(cfg, all[0], all, (*nodeview.View).Disrupted)
	in := Input{Request: Request{Action: nodeview.Drain, HardwareFailure: true}, Node: all[0], Members: all[:1], Pool: pool,
		Cluster: cluster, Fault: &GPUFault{Xid: "79", Incident: "gpu/boot-1/xid/79"}, Now: saturday3am}
	if d := Decide(cfg, in); d.Verdict != Act || !strings.Contains(d.Reason, "repair of failed hardware") {
		t.Errorf("GPU fault's drain: %s %q, want a repair", d.Verdict, d.Reason)
	}
	in.Ledger = repairs.Ledger{Breakers: map[string]repairs.Breaker{repairs.ScopeCluster: {TrippedAt: saturday3am}}}
	if d := Decide(cfg, in); d.Verdict != Refuse || d.Hold != repairs.HoldBreaker {
		t.Errorf("GPU fault's drain behind a tripped breaker: %s %q (hold %q)", d.Verdict, d.Reason, d.Hold)
	}
	in.Fault, in.Ledger = nil, repairs.Ledger{}
	if d := Decide(cfg, in); d.Verdict != Refuse || !strings.Contains(d.Reason, "no maintenance is pending") {
		t.Errorf("a drain without a GPU fault or a maintenance: %s %q", d.Verdict, d.Reason)
	}
}
