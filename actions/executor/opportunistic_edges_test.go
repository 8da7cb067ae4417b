package executor

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func podOn(node string, phase corev1.PodPhase, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid-" + node)},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{Phase: phase}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func requests(r string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(r): resource.MustParse("1")}}
}

// Holds: which pods keep a node busy, as the pod watch sees them (after stripPod).
func TestIdleTrackerUsesAccelerator(t *testing.T) {
	tr := newIdleTracker(func() []string { return []string{"nvidia.com/gpu", "google.com/tpu", "example.com/fpga"} })
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running GPU pod", podOn("n", corev1.PodRunning, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("nvidia.com/gpu") }), true},
		{"bound, still Pending", podOn("n", corev1.PodPending, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("google.com/tpu") }), true},
		{"configured resource only", podOn("n", corev1.PodRunning, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("example.com/fpga") }), true},
		{"limits only", podOn("n", corev1.PodRunning, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
		}), true},
		{"init container", podOn("n", corev1.PodRunning, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: requests("nvidia.com/gpu")}}
		}), true},
		{"second container", podOn("n", corev1.PodRunning, func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: requests("nvidia.com/gpu")})
		}), true},
		{"zero quantity", podOn("n", corev1.PodRunning, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}}
		}), false},
		{"unbound", podOn("", corev1.PodPending, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("nvidia.com/gpu") }), false},
		{"succeeded", podOn("n", corev1.PodSucceeded, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("nvidia.com/gpu") }), false},
		{"failed", podOn("n", corev1.PodFailed, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("nvidia.com/gpu") }), false},
		{"CPU only", podOn("n", corev1.PodRunning, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("cpu") }), false},
	} {
		stripped, _ := stripPod(tc.pod)
		if got := usesAny(extendedResources(stripped.(*corev1.Pod)), tr.resources()); got != tc.want {
			t.Errorf("%s: uses accelerator %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Holds: a node is busy while an accelerator pod is bound and not finished, and idle from when the last one finished
// or was deleted (a pod deleted while the watch was away arrives as a delete on relist, counted from then).
func TestIdleTrackerClock(t *testing.T) {
	tr := newIdleTracker(func() []string { return []string{"nvidia.com/gpu"} })
	tr.started = time.Now().Add(-time.Hour)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	if got := tr.idle(nodeview.Of(node)); got < time.Hour-time.Second {
		t.Fatalf("idle %v before any pod, want since the watch started (1h)", got)
	}
	gpu := podOn("n", corev1.PodRunning, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("nvidia.com/gpu") })
	tr.observe(gpu.UID, gpu)
	if got := tr.idle(nodeview.Of(node)); got != 0 {
		t.Fatalf("idle %v with a GPU pod running, want 0", got)
	}
	tr.observe(gpu.UID, gpu) // an update of the same pod
	done := gpu.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	tr.observe(done.UID, done)
	if got := tr.idle(nodeview.Of(node)); got <= 0 || got > time.Second {
		t.Fatalf("idle %v just after the pod finished, want counted from then", got)
	}
	tr.observe(gpu.UID, nil) // its deletion afterwards changes nothing
	if len(tr.onNode) != 0 || len(tr.pods) != 0 {
		t.Errorf("bookkeeping left over: on nodes %v, pods %v", tr.onNode, tr.pods)
	}

	second := podOn("n", corev1.PodRunning, func(p *corev1.Pod) {
		p.UID = "second"
		p.Spec.Containers[0].Resources = requests("nvidia.com/gpu")
	})
	tr.observe(second.UID, second)
	tr.observe(second.UID, nil) // deleted, as a relist reports it
	if got := tr.idle(nodeview.Of(node)); got <= 0 || got > time.Second {
		t.Errorf("idle %v after a deletion, want counted from it", got)
	}

	tr.synced = func() bool { return false }
	if got := tr.idle(nodeview.Of(node)); got != 0 {
		t.Errorf("idle %v before the pod list is read, want 0", got)
	}
}
