package policy

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func TestOptsOut(t *testing.T) {
	pod := func(node string, phase corev1.PodPhase, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"own annotation", pod("n", corev1.PodRunning, map[string]string{AnnotationDoNotDisrupt: "true"}), true},
		{"karpenter's annotation", pod("n", corev1.PodRunning, map[string]string{AnnotationKarpenterDoNotDisrupt: "true"}), true},
		{"not true", pod("n", corev1.PodRunning, map[string]string{AnnotationDoNotDisrupt: "false"}), false},
		{"no annotation", pod("n", corev1.PodRunning, nil), false},
		{"finished", pod("n", corev1.PodSucceeded, map[string]string{AnnotationDoNotDisrupt: "true"}), false},
		{"failed", pod("n", corev1.PodFailed, map[string]string{AnnotationDoNotDisrupt: "true"}), false},
		{"not bound", pod("", corev1.PodPending, map[string]string{AnnotationDoNotDisrupt: "true"}), false},
	} {
		if got := OptsOut(tc.pod); got != tc.want {
			t.Errorf("%s: OptsOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An opted-out node is passed over for opportunistic maintenance; another idle node goes instead, and the node goes
// once its pod has ended.
func TestPickOpportunisticSkipsOptedOut(t *testing.T) {
	o := &config.Opportunistic{NodeIdleTime: config.Duration(10 * time.Minute), MinNodes: 1, Window: config.Duration(336 * time.Hour)}
	pool := &config.Pool{Name: "serving", Opportunistic: o}
	nodes := fleet("node", "l4-serve", 3, reschedulable(24*time.Hour), reschedulable(48*time.Hour), reschedulable(72*time.Hour))
	optedOut := map[string]string{}
	pick := func() string {
		got, _ := PickOpportunistic(OpportunisticInput{Pool: pool, Nodes: views(nodes),
			Idle:      func(*nodeview.View) time.Duration { return time.Hour },
			Disrupted: (*nodeview.View).Disrupted,
			Claimable: func(n *nodeview.View) bool { return n.Maintenance.Pending() },
			OptedOut:  func(n *nodeview.View) string { return optedOut[n.Name] },
			Now:       saturday3am})
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		return fmt.Sprint(names)
	}
	if got := pick(); got != "[node-0]" {
		t.Fatalf("picked %s, want node-0 (maintenance first)", got)
	}
	optedOut["node-0"] = "train/step-41"
	if got := pick(); got != "[node-1]" {
		t.Errorf("with node-0 opted out: picked %s, want node-1", got)
	}
	optedOut["node-1"], optedOut["node-2"] = "a/b", "c/d"
	if got := pick(); got != "[]" {
		t.Errorf("with every node opted out: picked %s, want none", got)
	}
	clear(optedOut)
	if got := pick(); got != "[node-0]" {
		t.Errorf("after the pods ended: picked %s, want node-0", got)
	}
}
