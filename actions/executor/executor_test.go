package executor

import (
	"reflect"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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

// A GPU fault reads the same from the stripped node: the condition of this boot, and the unhealthy GPUs.
func TestStripNodeKeepsGPUFaults(t *testing.T) {
	node := readyNode(nil, func(n *corev1.Node) {
		n.Status.NodeInfo = corev1.NodeSystemInfo{BootID: "boot-1", KernelVersion: "6.6", OSImage: "cos", KubeletVersion: "v1.33.5-gke.1201000"}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: gke.ConditionXidCriticalError,
			Status: corev1.ConditionTrue, Reason: `{"79":true}`, Message: "boot-1", LastTransitionTime: metav1.Unix(1764547200, 0),
			LastHeartbeatTime: metav1.Unix(1764547260, 0)})
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("208"), gke.ResourceGPU: resource.MustParse("8")}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("207"), gke.ResourceGPU: resource.MustParse("7")}
	})
	obj, err := stripNode(node)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.(*corev1.Node)
	got, want := nodeview.Of(out), nodeview.Of(node)
	if want.XidCritical == nil || !reflect.DeepEqual(got.XidCritical, want.XidCritical) || got.UnhealthyGPUs != 1 {
		t.Errorf("stripped: fault %+v, %d GPUs unhealthy; want %+v, 1", got.XidCritical, got.UnhealthyGPUs, want.XidCritical)
	}
	if got.KubeletVersion != want.KubeletVersion || got.BootID != want.BootID {
		t.Errorf("stripped: kubelet %q boot %q, want %q %q", got.KubeletVersion, got.BootID, want.KubeletVersion, want.BootID)
	}
	if len(out.Status.Capacity) != 1 || out.Status.NodeInfo.KernelVersion != "" || !out.Status.Conditions[1].LastHeartbeatTime.IsZero() {
		t.Errorf("kept more than the fault: %+v", out.Status)
	}
}

// The node cache holds each node's View, read from the stripped node as the watch delivers it; handed back what it
// made, the transform changes nothing.
func TestWatchNodeReadsTheViewOnce(t *testing.T) {
	node := readyNode(map[string]string{gke.LabelScheduledMaintenanceTime: "1767607200"}, func(n *corev1.Node) {
		n.ResourceVersion, n.UID = "42", "uid-n"
		n.Annotations = map[string]string{nodeview.AnnotationState: "accepted", "node.alpha.kubernetes.io/ttl": "0"}
	})
	obj, err := watchNode(node)
	if err != nil {
		t.Fatal(err)
	}
	w := obj.(*watchedNode)
	stripped, _ := stripNode(node)
	if !reflect.DeepEqual(w.Node, stripped) || !reflect.DeepEqual(w.view, nodeview.Of(stripped.(*corev1.Node))) {
		t.Errorf("cached %+v with view %+v, want the stripped node and its view", w.Node, w.view)
	}
	if w.view.Name != "n" || w.view.ResourceVersion != "42" || w.view.UID != "uid-n" || !w.view.Maintenance.Pending() || !w.view.Record.Active() {
		t.Errorf("view lost what claims need: %+v", w.view)
	}
	if again, _ := watchNode(w); again != w {
		t.Error("transforming a cached node again made a new one")
	}
	if cp := w.DeepCopyObject().(*watchedNode); cp.Node == w.Node || cp.view != w.view {
		t.Error("a copy shares the node or lost the view")
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "n", Obj: w}
	if got, _ := watchNode(tombstone); got != tombstone {
		t.Error("a tombstone did not pass through")
	}
}
