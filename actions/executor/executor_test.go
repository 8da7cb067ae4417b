package executor

import (
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestStripNodeKeepsWhatDecisionsNeed(t *testing.T) {
	node := readyNode(map[string]string{"team": "ml", "other": "x", gke.LabelActiveNodeMaintenance: "ONGOING"}, func(n *corev1.Node) {
		n.Annotations = map[string]string{nodeview.AnnotationState: "draining", "node.alpha.kubernetes.io/ttl": "0",
			gke.AnnotationUpcomingMaintenance: `{"can_reschedule":"true"}`}
		n.Spec.Unschedulable = true
		n.Spec.PodCIDR = "10.0.0.0/24"
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}}}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
	})
	obj, err := stripNode(node)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.(*corev1.Node)
	// Every label stays: a reloaded policy may select on any of them.
	if len(out.Labels) != 3 || out.Labels["team"] != "ml" || out.Labels[gke.LabelActiveNodeMaintenance] != "ONGOING" {
		t.Errorf("labels %v", out.Labels)
	}
	if len(out.Annotations) != 2 || out.Annotations[nodeview.AnnotationState] != "draining" || out.Annotations[gke.AnnotationUpcomingMaintenance] == "" {
		t.Errorf("annotations %v", out.Annotations)
	}
	if !out.Spec.Unschedulable || out.Spec.PodCIDR != "" || len(out.Status.Images) != 0 || len(out.Status.Conditions) != 1 {
		t.Errorf("spec/status not stripped as expected: %+v", out)
	}
	if nodeview.Of(out).Disrupted() != nodeview.Of(node).Disrupted() {
		t.Error("stripping changed whether the node counts as disrupted")
	}
}
