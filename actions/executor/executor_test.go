package executor

import (
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
)

func readyNode(labels map[string]string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func TestGKEFinished(t *testing.T) {
	scheduled := map[string]string{gke.LabelScheduledMaintenanceTime: "1750000000"}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		rec  nodestate.Record
		want bool
	}{
		{"drained, maintenance not started yet", readyNode(scheduled), nodestate.Record{ScheduledMaintenance: "1750000000"}, false},
		{"maintenance under way", readyNode(map[string]string{gke.LabelActiveNodeMaintenance: "ONGOING"}), nodestate.Record{MaintenanceSeen: true}, false},
		{"taint still there", readyNode(nil, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}}
		}), nodestate.Record{MaintenanceSeen: true}, false},
		{"perform-maintenance request not consumed", readyNode(map[string]string{gke.LabelPerformMaintenance: "true"}), nodestate.Record{MaintenanceSeen: true}, false},
		{"not Ready yet", readyNode(nil, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }), nodestate.Record{MaintenanceSeen: true}, false},
		{"seen and quiet", readyNode(nil), nodestate.Record{MaintenanceSeen: true}, true},
		{"not seen, scheduled time gone", readyNode(nil), nodestate.Record{ScheduledMaintenance: "1750000000"}, true},
		{"not seen, scheduled time moved", readyNode(map[string]string{gke.LabelScheduledMaintenanceTime: "1760000000"}), nodestate.Record{ScheduledMaintenance: "1750000000"}, true},
		{"no evidence at all", readyNode(nil), nodestate.Record{}, false},
	} {
		if got := gkeFinished(tc.node, tc.rec); got != tc.want {
			t.Errorf("%s: gkeFinished = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSplitByGrace(t *testing.T) {
	pod := func(name string, grace *int64) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: grace}}
	}
	g := func(v int64) *int64 { return &v }
	pods := []corev1.Pod{pod("short", g(5)), pod("equal", g(10)), pod("long", g(600)), pod("unset", nil), pod("zero", g(0))}
	own, capped := splitByGrace(pods, 10*time.Second)
	if names(own) != "short,equal,zero" || names(capped) != "long,unset" {
		t.Errorf("own %s, capped %s", names(own), names(capped))
	}
	own, capped = splitByGrace(pods, 0)
	if len(own) != len(pods) || len(capped) != 0 {
		t.Errorf("no cap: own %s, capped %s", names(own), names(capped))
	}
}

func names(pods []corev1.Pod) string {
	s := ""
	for i, p := range pods {
		if i > 0 {
			s += ","
		}
		s += p.Name
	}
	return s
}

func TestNodeStripperKeepsWhatDecisionsNeed(t *testing.T) {
	cfg, err := config.Parse([]byte("pools: [{name: a, nodeSelector: {team: ml}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	node := readyNode(map[string]string{"team": "ml", "other": "x", gke.LabelActiveNodeMaintenance: "ONGOING"}, func(n *corev1.Node) {
		n.Annotations = map[string]string{nodestate.AnnotationState: "draining", "node.alpha.kubernetes.io/ttl": "0"}
		n.Spec.Unschedulable = true
		n.Spec.PodCIDR = "10.0.0.0/24"
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}}}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
	})
	obj, err := nodeStripper(cfg)(node)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.(*corev1.Node)
	if len(out.Labels) != 2 || out.Labels["team"] != "ml" || out.Labels[gke.LabelActiveNodeMaintenance] != "ONGOING" {
		t.Errorf("labels %v", out.Labels)
	}
	if len(out.Annotations) != 1 || out.Annotations[nodestate.AnnotationState] != "draining" {
		t.Errorf("annotations %v", out.Annotations)
	}
	if !out.Spec.Unschedulable || out.Spec.PodCIDR != "" || len(out.Status.Images) != 0 || len(out.Status.Conditions) != 1 {
		t.Errorf("spec/status not stripped as expected: %+v", out)
	}
	if nodestate.Disrupted(out) != nodestate.Disrupted(node) {
		t.Error("stripping changed whether the node counts as disrupted")
	}
}
