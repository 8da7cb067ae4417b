package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
)

// saturday3am is inside the test windows: Saturday 2025-06-07 03:00 in Los Angeles.
var saturday3am = time.Date(2025, 6, 7, 10, 0, 0, 0, time.UTC)

func mustParse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type nodeOpt func(*corev1.Node)

var (
	cordoned     nodeOpt = func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady     nodeOpt = func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	noConditions nodeOpt = func(n *corev1.Node) { n.Status.Conditions = nil }
	// scheduled is due a day after saturday3am, inside drain.horizon.
	scheduled nodeOpt = func(n *corev1.Node) {
		n.Labels[gke.LabelScheduledMaintenanceTime] = fmt.Sprint(saturday3am.Add(24 * time.Hour).Unix())
	}
	maintenance   nodeOpt = func(n *corev1.Node) { n.Labels[gke.LabelActiveNodeMaintenance] = "ONGOING" }
	pmRequested   nodeOpt = func(n *corev1.Node) { n.Labels[gke.LabelPerformMaintenance] = "true" }
	deleting      nodeOpt = func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: saturday3am} }
	terminationTn nodeOpt = func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule})
	}
)

// slice makes the node a host of a multi-host v5e slice (4x4 topology on 4-chip VMs: 4 hosts) in GKE node pool
// name, governed by the rolling policy pool tpu.
func slice(name string) nodeOpt {
	return func(n *corev1.Node) {
		n.Labels[gke.LabelNodePool] = name
		n.Labels[gke.LabelInstanceType] = "ct5lp-hightpu-4t"
		n.Labels[gke.LabelTPUTopology] = "4x4"
		n.Labels["policy-pool"] = "tpu"
	}
}

func ours(phase nodeview.Phase) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations = map[string]string{nodeview.AnnotationState: string(phase), nodeview.AnnotationAction: "drain"}
	}
}

func mkNode(name, gkePool string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gke.LabelNodePool: gkePool}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// views reads nodes as the executor's informer does.
func views(nodes []*corev1.Node) []*nodeview.View {
	out := make([]*nodeview.View, len(nodes))
	for i, n := range nodes {
		out[i] = nodeview.Of(n)
	}
	return out
}

const (
	oldVersion = "v1.33.4-gke.1000"
	newVersion = "v1.33.5-gke.1201000"
)

// pending is maintenance GKE can start on request, five days out.
var pending = reschedulable(5 * 24 * time.Hour)

func kubelet(v string) nodeOpt { return func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v } }

// gkeDrains is GKE's upgrade draining the node, before it cordons.
func gkeDrains(n *corev1.Node) { n.Labels[gke.LabelOperationType] = "drain" }

// fleet makes count healthy nodes named prefix-0.. in gkePool, with opts applied to the first len(opts) nodes.
func fleet(prefix, gkePool string, count int, opts ...nodeOpt) []*corev1.Node {
	var out []*corev1.Node
	for i := range count {
		n := mkNode(fmt.Sprintf("%s-%d", prefix, i), gkePool)
		if i < len(opts) && opts[i] != nil {
			opts[i](n)
		}
		out = append(out, n)
	}
	return out
}

const basePolicy = `
pools:
  - name: tpu
    nodeSelector: {policy-pool: tpu}
    maxUnavailable: 1
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
    maxUnavailable: 1
  - name: batch
    nodeSelector: {cloud.google.com/gke-nodepool: batch}
    maxUnavailable: "25%"
    minAvailable: "50%"
  - name: inference
    nodeSelector: {cloud.google.com/gke-nodepool: inference}
    maxUnavailable: 3
    minAvailable: 8
  - name: elastic
    nodeSelector: {cloud.google.com/gke-nodepool: elastic}
    maxUnavailable: 2
    minAvailable: "50%"
`

func TestDecide(t *testing.T) {
	drain := Request{Action: nodeview.Drain}
	perform := Request{Action: nodeview.PerformMaintenance, CanReschedule: true}
	for _, tc := range []struct {
		name    string
		policy  string // appended to basePolicy
		req     Request
		node    string // candidate, by name, from the cluster
		cluster []*corev1.Node
		want    Verdict
		reason  string // substring of the reason
		code    string // the wait code, when it waits
		// bare keeps a drain candidate without scheduled maintenance (others get the label: every action needs
		// maintenance pending).
		bare bool
	}{
		{
			name: "rolling pool with a free slot acts",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4),
			want: Act, reason: "1 of 4",
		},
		{
			name: "rolling pool with its slot taken by a cordoned node waits",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, cordoned),
			want: Wait, reason: "maxUnavailable 1",
		},
		{
			name: "slot taken by a node in GKE maintenance",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, maintenance),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "slot taken by the impending-termination taint",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, terminationTn),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "slot taken by a perform-maintenance request",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, pmRequested),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "slot taken by a NotReady node",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, notReady),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "a node without a Ready condition counts as unavailable",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, noConditions),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "slot taken by our own work in progress",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, ours(nodeview.Accepted)),
			want: Wait, reason: "maxUnavailable",
		},
		{
			name: "our finished work does not hold a slot",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, ours(nodeview.Done)),
			want: Act,
		},
		{
			name: "disruption in another pool does not count against this pool",
			req:  drain, node: "serve-0",
			cluster: append(fleet("serve", "l4-serve", 4), fleet("batch", "batch", 4, cordoned)...),
			want:    Act,
		},
		{
			name: "a candidate cordoned by someone else waits for that hand",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, cordoned),
			want: Wait, reason: "held by cordon", code: WaitOtherOwner,
		},
		{
			name: "a candidate Cluster Autoscaler is removing waits",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodeview.TaintClusterAutoscalerToBeDeleted, Effect: corev1.TaintEffectNoSchedule})
			}),
			want: Wait, reason: "held by cluster-autoscaler", code: WaitOtherOwner,
		},
		{
			name: "a candidate NVSentinel quarantined waits",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, func(n *corev1.Node) {
				cordoned(n)
				n.Annotations = map[string]string{nodeview.AnnotationNVSentinelQuarantine: "{}"}
			}),
			want: Wait, reason: "held by nvsentinel", code: WaitOtherOwner,
		},
		{
			name: "rolling pool being upgraded: no perform-maintenance on a node the upgrade replaces",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, both(kubelet(oldVersion), pending), both(kubelet(oldVersion), gkeDrains), kubelet(newVersion)),
			want: Wait, reason: "GKE is upgrading pool serving (its own work on serve-1) and node serve-0 runs v1.33.4-gke.1000, older than the pool's v1.33.5-gke.1201000", code: WaitUpgradeReplacesNode,
		},
		{
			name: "rolling pool being upgraded: maintenance that cannot move is due first and drains",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, both(kubelet(oldVersion), pending), both(kubelet(oldVersion), gkeDrains), kubelet(newVersion)),
			want: Act,
		},
		{
			name: "rolling pool being upgraded: failed hardware is repaired now",
			req:  Request{Action: nodeview.PerformMaintenance, CanReschedule: true, HardwareFailure: true}, node: "serve-0",
			cluster: fleet("serve", "l4-serve", 4, both(kubelet(oldVersion), pending), both(kubelet(oldVersion), gkeDrains), kubelet(newVersion)),
			want:    Act,
		},
		{
			name: "rolling pool being upgraded: a node already at the new version is not replaced",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, both(kubelet(newVersion), pending), both(kubelet(oldVersion), gkeDrains), kubelet(newVersion)),
			want: Act,
		},
		{
			name: "versions differ but GKE is not at work: no upgrade under way",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, both(kubelet(oldVersion), pending), kubelet(oldVersion), kubelet(newVersion)),
			want: Act,
		},
		{
			name: "a candidate GKE drains for its upgrade waits, cordoned or not yet",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, func(n *corev1.Node) {
				n.Labels[gke.LabelOperationType] = "drain"
				n.Annotations = map[string]string{gke.AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES"}`}
			}),
			want: Wait, reason: "held by gke-operation drain,upgrade_nodes", code: WaitOtherOwner,
		},
		{
			name: "percent maxUnavailable: 25% of 8 is 2, one taken",
			req:  drain, node: "batch-0", cluster: fleet("batch", "batch", 8, nil, cordoned),
			want: Act,
		},
		{
			name: "percent maxUnavailable: 25% of 8 is 2, both taken",
			req:  drain, node: "batch-0", cluster: fleet("batch", "batch", 8, nil, cordoned, cordoned),
			want: Wait, reason: "maxUnavailable 25% (2)",
		},
		{
			name: "percent maxUnavailable of a small pool still allows one",
			req:  drain, node: "batch-0", cluster: fleet("batch", "batch", 2),
			want: Act,
		},
		{
			name: "percent minAvailable: 50% of 3 rounds up to 2, one already gone",
			req:  drain, node: "el-0", cluster: fleet("el", "elastic", 3, nil, cordoned),
			want: Wait, reason: "2 of 3 nodes available, one more would go below minAvailable 50% (2)",
		},
		{
			name: "percent minAvailable: 50% of 4 is 2, one already gone, one more is fine",
			req:  drain, node: "el-0", cluster: fleet("el", "elastic", 4, nil, cordoned),
			want: Act,
		},
		{
			name: "count minAvailable: 8 of 10 must stay, one gone, one more is fine",
			req:  drain, node: "inf-0", cluster: fleet("inf", "inference", 10, nil, cordoned),
			want: Act,
		},
		{
			name: "count minAvailable: 8 of 10 must stay, two gone",
			req:  drain, node: "inf-0", cluster: fleet("inf", "inference", 10, nil, cordoned, notReady),
			want: Wait, reason: "8 of 10 nodes available, one more would go below minAvailable 8 (8)",
		},
		{
			name: "minAvailable larger than the pool waits",
			req:  drain, node: "inf-0", cluster: fleet("inf", "inference", 5),
			want: Wait, reason: "minAvailable",
		},
		{
			name: "parallel pool acts on every node at once",
			req:  drain, node: "train-3", cluster: fleet("train", "a3-train", 8, ours(nodeview.Draining), ours(nodeview.Accepted)),
			want: Act, reason: "parallel",
		},
		{
			name: "parallel pool waits while another hand holds a member",
			req:  drain, node: "train-3", cluster: fleet("train", "a3-train", 8, ours(nodeview.Draining), ours(nodeview.Accepted), cordoned),
			want: Wait, reason: "node train-2 is held by cordon", code: WaitOtherOwner,
		},
		{
			name:   "cluster cap as a count",
			policy: "maxDisruptedNodes: 2\n",
			req:    drain, node: "serve-0",
			cluster: append(fleet("serve", "l4-serve", 4), fleet("batch", "batch", 4, cordoned, cordoned)...),
			want:    Wait, reason: "2 of 8 nodes disrupted",
		},
		{
			name:   "cluster cap with room",
			policy: "maxDisruptedNodes: 3\n",
			req:    drain, node: "serve-0",
			cluster: append(fleet("serve", "l4-serve", 4), fleet("batch", "batch", 4, cordoned, cordoned)...),
			want:    Act,
		},
		{
			name:   "cluster cap as a percent: 10% of 20 is 2",
			policy: "maxDisruptedNodes: '10%'\n",
			req:    drain, node: "serve-0",
			cluster: append(fleet("serve", "l4-serve", 10), fleet("batch", "batch", 10, cordoned, cordoned)...),
			want:    Wait, reason: "maxDisruptedNodes 10% (2)",
		},
		{
			name:   "cluster cap 0 stops everything",
			policy: "maxDisruptedNodes: 0\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4),
			want: Wait, reason: "maxDisruptedNodes 0",
		},
		{
			name:   "cluster cap must fit a whole parallel pool",
			policy: "maxDisruptedNodes: 4\n",
			req:    drain, node: "train-0", cluster: fleet("train", "a3-train", 5),
			want: Wait, reason: "5 more",
		},
		{
			name:   "a parallel pool already on its way fits the cap",
			policy: "maxDisruptedNodes: 5\n",
			req:    drain, node: "train-4", cluster: fleet("train", "a3-train", 5, ours(nodeview.Draining), ours(nodeview.Draining), ours(nodeview.Draining), ours(nodeview.Draining)),
			want: Act,
		},
		{
			name: "unmatched node is refused",
			req:  drain, node: "other-0", cluster: fleet("other", "default-pool", 2),
			want: Refuse, reason: "no pool",
		},
		{
			name: "perform-maintenance with can_reschedule true and scheduled maintenance acts",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 3, scheduled),
			want: Act,
		},
		{
			name: "perform-maintenance without can_reschedule is refused",
			req:  Request{Action: nodeview.PerformMaintenance}, node: "serve-0", cluster: fleet("serve", "l4-serve", 3, scheduled),
			want: Refuse, reason: "can_reschedule",
		},
		{
			name: "perform-maintenance on a node without scheduled maintenance is refused",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 3),
			want: Refuse, reason: "no maintenance is pending",
		},
		{
			name: "perform-maintenance already requested is refused",
			req:  perform, node: "serve-0", cluster: fleet("serve", "l4-serve", 3, func(n *corev1.Node) { scheduled(n); pmRequested(n) }),
			want: Refuse, reason: "already requested",
		},
		{
			name: "node already in GKE maintenance is refused",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 3, maintenance),
			want: Refuse, reason: "already under way",
		},
		{
			name: "node being deleted is refused",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 3, deleting),
			want: Refuse, reason: "being deleted",
		},
		{
			name: "unknown action is refused",
			req:  Request{Action: "reboot"}, node: "serve-0", cluster: fleet("serve", "l4-serve", 3),
			want: Refuse, reason: "unknown action",
		},
		{
			name:   "outside the windows waits",
			policy: "windows: [{days: [Sun], start: '02:00', end: '06:00', timezone: America/Los_Angeles}]\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 3),
			want: Wait, reason: "window",
		},
		{
			name:   "inside a window acts",
			policy: "windows: [{days: [Sun], start: '02:00', end: '06:00', timezone: Asia/Tokyo}, {days: [Sat], start: '02:00', end: '06:00', timezone: America/Los_Angeles}]\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 3),
			want: Act,
		},
		{
			name: "a drain for a node with no maintenance pending is refused",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4), bare: true,
			want: Refuse, reason: "no maintenance is pending",
		},
		{
			name:   "paused waits with code paused",
			policy: "paused: true\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4),
			want: Wait, reason: "paused", code: WaitPaused,
		},
		{
			name:   "paused still refuses what it would refuse anyway",
			policy: "paused: true\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4), bare: true,
			want: Refuse, reason: "no maintenance",
		},
		{
			name: "budget waits carry code pool_budget",
			req:  drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 4, nil, cordoned),
			want: Wait, code: WaitPoolBudget,
		},
		{
			name:   "a group of 4 where the cap fits 3 waits with code cluster_cap",
			policy: "maxDisruptedNodes: 3\n",
			req:    drain, node: "train-0", cluster: fleet("train", "a3-train", 4),
			want: Wait, reason: "4 more (4 nodes together)", code: WaitClusterCap,
		},
		{
			name:   "a group of 4 where the cap fits 4 acts",
			policy: "maxDisruptedNodes: 4\n",
			req:    drain, node: "train-0", cluster: fleet("train", "a3-train", 4),
			want: Act, reason: "4 nodes together",
		},
		{
			name: "a 4-host TPU slice in a rolling pool with maxUnavailable 1 goes as one unit",
			req:  drain, node: "tpu-0", cluster: fleet("tpu", "l4-serve", 4, slice("s1"), slice("s1"), slice("s1"), slice("s1")),
			want: Act, reason: "1 of 1 units",
		},
		{
			name: "a second slice of a rolling pool waits while the first is down",
			req:  drain, node: "tpu-0",
			cluster: append(fleet("tpu", "l4-serve", 2, slice("s1"), slice("s1")),
				fleet("other", "l4-serve", 2, func(n *corev1.Node) { slice("s2")(n); cordoned(n) }, slice("s2"))...),
			want: Wait, reason: "1 of 2 units", code: WaitPoolBudget,
		},
		{
			name:   "outside the windows waits with code window",
			policy: "windows: [{days: [Sun], start: '02:00', end: '06:00', timezone: America/Los_Angeles}]\n",
			req:    drain, node: "serve-0", cluster: fleet("serve", "l4-serve", 2),
			want: Wait, code: WaitWindow,
		},
		{
			name:   "refusals win over a closed window",
			policy: "windows: [{days: [Sun], start: '02:00', end: '06:00'}]\n",
			req:    drain, node: "other-0", cluster: fleet("other", "default-pool", 1),
			want: Refuse,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, basePolicy+tc.policy)
			var node *corev1.Node
			for _, n := range tc.cluster {
				if n.Name == tc.node {
					node = n
				}
			}
			if node == nil {
				t.Fatalf("no node %s in the cluster", tc.node)
			}
			if _, ok := node.Labels[gke.LabelScheduledMaintenanceTime]; !ok && tc.req.Action == nodeview.Drain && !tc.bare {
				scheduled(node)
			}
			view, cluster := nodeview.Of(node), views(tc.cluster)
			pool, counts := Survey(cfg, view, cluster, (*nodeview.View).Disrupted)
			got := Decide(cfg, Input{Request: tc.req, Node: view, Members: Scope(cfg, view, pool, cluster), Pool: pool,
				Cluster: counts, Now: saturday3am})
			if got.Verdict != tc.want || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("got %s (%q), want %s with reason containing %q", got.Verdict, got.Reason, tc.want, tc.reason)
			}
			if tc.code != "" && got.Code != tc.code {
				t.Errorf("wait code %q, want %q", got.Code, tc.code)
			}
			if tc.want != Refuse || !strings.Contains(got.Reason, "no pool") {
				if p := cfg.MatchPool(node.Labels); got.Pool != p.Name {
					t.Errorf("decision names pool %q, want %q", got.Pool, p.Name)
				}
			}
		})
	}
}

func TestSurvey(t *testing.T) {
	cfg := mustParse(t, basePolicy)
	all := append(fleet("serve", "l4-serve", 3, nil, cordoned), fleet("batch", "batch", 2, notReady)...)
	fresher := nodeview.Of(mkNode("serve-0", "l4-serve", cordoned))
	pool, cluster := Survey(cfg, fresher, views(all), (*nodeview.View).Disrupted)
	if cluster != (Cluster{Nodes: 5, Disrupted: 3}) {
		t.Errorf("cluster %+v, want 5 nodes, 3 disrupted (fresher copy of serve-0 is cordoned)", cluster)
	}
	if len(pool) != 3 || pool[0] != fresher {
		t.Errorf("pool %v: want the 3 serving nodes with the fresher copy of serve-0", pool)
	}
	newNode := nodeview.Of(mkNode("serve-new", "l4-serve"))
	pool, cluster = Survey(cfg, newNode, views(all), (*nodeview.View).Disrupted)
	if cluster.Nodes != 6 || len(pool) != 4 {
		t.Errorf("a node missing from the list is counted: cluster %+v, pool %d", cluster, len(pool))
	}
}

func TestInWindow(t *testing.T) {
	la := "America/Los_Angeles"
	for _, tc := range []struct {
		name   string
		window string
		at     string // RFC 3339
		want   bool
	}{
		{"inside", "{days: [Sat], start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-07T03:00:00-07:00", true},
		{"start is inclusive", "{days: [Sat], start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-07T02:00:00-07:00", true},
		{"end is exclusive", "{days: [Sat], start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-07T06:00:00-07:00", false},
		{"wrong day", "{days: [Sun], start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-07T03:00:00-07:00", false},
		{"no days means every day", "{start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-04T03:00:00-07:00", true},
		{"UTC by default", "{start: '02:00', end: '06:00'}", "2025-06-04T03:00:00Z", true},
		{"timezone matters: 03:00 UTC is not 03:00 LA", "{start: '02:00', end: '06:00', timezone: " + la + "}", "2025-06-04T03:00:00Z", false},
		{"the day is the local day: Monday 02:30 Tokyo is Sunday in UTC", "{days: [Mon], start: '02:00', end: '06:00', timezone: Asia/Tokyo}", "2025-06-08T17:30:00Z", true},
		{"the local day, not the UTC day", "{days: [Sun], start: '02:00', end: '06:00', timezone: Asia/Tokyo}", "2025-06-08T17:30:00Z", false},
		{"overnight window, evening part", "{days: [Fri], start: '22:00', end: '02:00'}", "2025-06-06T23:00:00Z", true},
		{"overnight window, after midnight", "{days: [Fri], start: '22:00', end: '02:00'}", "2025-06-07T01:59:00Z", true},
		{"overnight window, ended", "{days: [Fri], start: '22:00', end: '02:00'}", "2025-06-07T02:00:00Z", false},
		{"overnight window opens only on its days", "{days: [Fri], start: '22:00', end: '02:00'}", "2025-06-07T23:00:00Z", false},
		{"overnight window, before it opens", "{days: [Fri], start: '22:00', end: '02:00'}", "2025-06-06T21:59:00Z", false},
		{"overnight window across Sunday to Monday", "{days: [Sun], start: '23:00', end: '01:00'}", "2025-06-09T00:30:00Z", true},
		{"whole day", "{days: [Wed], start: '00:00', end: '24:00'}", "2025-06-04T23:59:59Z", true},
		{"whole day ends at midnight", "{days: [Wed], start: '00:00', end: '24:00'}", "2025-06-05T00:00:00Z", false},
		// 2025-03-09 02:00 PST the clocks jump to 03:00 PDT.
		{"DST spring forward: 03:30 PDT is inside 01:00-04:00", "{days: [Sun], start: '01:00', end: '04:00', timezone: " + la + "}", "2025-03-09T10:30:00Z", true},
		{"DST spring forward: 01:59 PST is inside 01:00-04:00", "{days: [Sun], start: '01:00', end: '04:00', timezone: " + la + "}", "2025-03-09T09:59:00Z", true},
		{"DST spring forward: 04:00 PDT is outside (only 2 real hours that night)", "{days: [Sun], start: '01:00', end: '04:00', timezone: " + la + "}", "2025-03-09T11:00:00Z", false},
		{"DST spring forward: the skipped hour's window never opens (03:00 PDT)", "{days: [Sun], start: '02:00', end: '03:00', timezone: " + la + "}", "2025-03-09T10:00:00Z", false},
		{"DST spring forward: a window the day after keeps its local hours", "{days: [Mon], start: '02:00', end: '03:00', timezone: " + la + "}", "2025-03-10T09:30:00Z", true},
		// 2025-11-02 02:00 PDT the clocks fall back to 01:00 PST: 01:00-02:00 happens twice.
		{"DST fall back: first 01:30 (PDT)", "{days: [Sun], start: '01:00', end: '02:00', timezone: " + la + "}", "2025-11-02T08:30:00Z", true},
		{"DST fall back: second 01:30 (PST)", "{days: [Sun], start: '01:00', end: '02:00', timezone: " + la + "}", "2025-11-02T09:30:00Z", true},
		{"DST fall back: 02:00 PST is outside", "{days: [Sun], start: '01:00', end: '02:00', timezone: " + la + "}", "2025-11-02T10:00:00Z", false},
		{"DST in Europe: 02:30 CEST on the last Sunday of March is 00:30 UTC", "{days: [Sun], start: '02:00', end: '04:00', timezone: Europe/Berlin}", "2025-03-30T01:30:00Z", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, "pools: [{name: a}]\nwindows: ["+tc.window+"]\n")
			at, err := time.Parse(time.RFC3339, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := InWindow(cfg.Windows.Weekly[0], at); got != tc.want {
				t.Errorf("InWindow(%s, %s) = %v, want %v", tc.window, at.In(cfg.Windows.Weekly[0].Timezone.Location), got, tc.want)
			}
		})
	}
}

func TestInWindowsAnyMatches(t *testing.T) {
	if !InWindows(nil, saturday3am) {
		t.Error("no windows must mean any time")
	}
	cfg := mustParse(t, "pools: [{name: a}]\nwindows: [{days: [Mon], start: '01:00', end: '02:00'}, {days: [Sat], start: '09:00', end: '11:00'}]\n")
	if !InWindows(cfg.Windows.Weekly, saturday3am) {
		t.Error("second window should match Saturday 10:00 UTC")
	}
}

// A drain for maintenance beyond drain.horizon is refused: the node would stay cordoned until then.
func TestDrainHorizon(t *testing.T) {
	at := func(when time.Time) nodeOpt {
		return func(n *corev1.Node) { n.Labels[gke.LabelScheduledMaintenanceTime] = fmt.Sprint(when.Unix()) }
	}
	for _, tc := range []struct {
		name    string
		policy  string
		due     time.Time
		verdict Verdict
	}{
		{"due in an hour", "", saturday3am.Add(time.Hour), Act},
		{"just inside the default 48h", "", saturday3am.Add(47 * time.Hour), Act},
		{"300 days away", "", saturday3am.Add(300 * 24 * time.Hour), Refuse},
		{"year 5138", "", time.Date(5138, 1, 1, 0, 0, 0, 0, time.UTC), Refuse},
		{"inside a longer horizon", "drain: {horizon: 9600h}\n", saturday3am.Add(300 * 24 * time.Hour), Act},
		{"beyond a shorter horizon", "drain: {horizon: 1h}\n", saturday3am.Add(2 * time.Hour), Refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.policy+"pools: [{name: all}]\n")
			node := mkNode("n", "p", at(tc.due))
			got := Decide(cfg, Input{Request: Request{Action: nodeview.Drain}, Node: nodeview.Of(node), Now: saturday3am})
			if got.Verdict != tc.verdict {
				t.Errorf("verdict %s (%s), want %s", got.Verdict, got.Reason, tc.verdict)
			}
			if tc.verdict == Refuse && !strings.Contains(got.Reason, "drain.horizon") {
				t.Errorf("reason %q does not name drain.horizon", got.Reason)
			}
		})
	}
}
