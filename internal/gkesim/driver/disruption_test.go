package driver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testPod(name string, running, ready, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if running {
		p.Status.Phase = corev1.PodRunning
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if deleting {
		p.DeletionTimestamp = ptrTo(metav1.Now())
	}
	return p
}

func TestPDBStatus(t *testing.T) {
	now := time.Now()
	healthy := []*corev1.Pod{testPod("a", true, true, false), testPod("b", true, true, false), testPod("c", true, true, false)}
	maxUnavailable1 := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptrTo(intstr.FromInt32(1))},
	}
	for name, tc := range map[string]struct {
		pdb      *policyv1.PodDisruptionBudget
		pods     []*corev1.Pod
		expected int
		healthy  int32
		desired  int32
		allowed  int32
	}{
		"all healthy": {maxUnavailable1, healthy, 3, 3, 2, 1},
		"one deleting": {maxUnavailable1, []*corev1.Pod{healthy[0], healthy[1], testPod("c", true, true, true)},
			3, 2, 2, 0},
		"one pending": {maxUnavailable1, []*corev1.Pod{healthy[0], healthy[1], testPod("c", false, false, false)},
			3, 2, 2, 0},
		"not ready": {maxUnavailable1, []*corev1.Pod{healthy[0], healthy[1], testPod("c", true, false, false)},
			3, 2, 2, 0},
		"recently disrupted": {&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Spec:       maxUnavailable1.Spec,
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{"a": metav1.NewTime(now)}},
		}, healthy, 3, 2, 2, 0},
		"disruption record timed out": {&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Spec:       maxUnavailable1.Spec,
			Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{
				"a": metav1.NewTime(now.Add(-3 * time.Minute))}},
		}, healthy, 3, 3, 2, 1},
		"min available percent": {&policyv1.PodDisruptionBudget{
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrTo(intstr.FromString("50%"))},
		}, healthy, 3, 3, 2, 1},
		"fewer than desired": {&policyv1.PodDisruptionBudget{
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrTo(intstr.FromInt32(3))},
		}, healthy[:2], 3, 2, 3, 0},
	} {
		t.Run(name, func(t *testing.T) {
			s := pdbStatus(tc.pdb, tc.pods, tc.expected, now)
			if s.CurrentHealthy != tc.healthy || s.DesiredHealthy != tc.desired || s.DisruptionsAllowed != tc.allowed ||
				s.ExpectedPods != int32(tc.expected) || s.ObservedGeneration != tc.pdb.Generation {
				t.Errorf("status %+v, want healthy %d desired %d allowed %d", s, tc.healthy, tc.desired, tc.allowed)
			}
			if len(s.Conditions) != 1 || (s.Conditions[0].Status == metav1.ConditionTrue) != (tc.allowed > 0) {
				t.Errorf("conditions %+v", s.Conditions)
			}
		})
	}
}

func TestPDBStatusDropsRecordsOfGonePods(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptrTo(intstr.FromInt32(1))},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{"gone": metav1.Now()}},
	}
	s := pdbStatus(pdb, []*corev1.Pod{testPod("a", true, true, false)}, 1, time.Now())
	if s.DisruptedPods != nil {
		t.Errorf("disrupted pods %v: the pod is gone, the record must go", s.DisruptedPods)
	}
	if !pdbStatusChanged(pdb, s) {
		t.Error("dropping a record is a change")
	}
	pdb.Status = s
	if pdbStatusChanged(pdb, pdbStatus(pdb, []*corev1.Pod{testPod("a", true, true, false)}, 1, time.Now().Add(time.Hour))) {
		t.Error("the same status an hour later is no change")
	}
}
