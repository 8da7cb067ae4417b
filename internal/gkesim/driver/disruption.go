package driver

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// disruptedPodTimeout is how long the disruption controller counts an evicted pod as disrupted while it has not yet
// been deleted (Kubernetes' DeletionTimeout).
const disruptedPodTimeout = 2 * time.Minute

// pdbStatus is what the disruption controller computes for pdb over its pods: the eviction API allows an eviction
// only while the status has observed the current generation and allows a disruption. expected is the pods the
// owning controller wants. Pods the eviction API recorded as disrupted count as unhealthy until they are deleted
// or the record times out, so that two evictions racing a status update cannot both pass.
func pdbStatus(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, expected int, now time.Time) policyv1.PodDisruptionBudgetStatus {
	disrupted := map[string]metav1.Time{}
	for name, at := range pdb.Status.DisruptedPods {
		if now.Sub(at.Time) < disruptedPodTimeout {
			disrupted[name] = at
		}
	}
	alive := map[string]bool{}
	healthy := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		alive[pod.Name] = true
		if _, ok := disrupted[pod.Name]; ok {
			continue
		}
		if pod.Status.Phase == corev1.PodRunning && podReady(pod) {
			healthy++
		}
	}
	for name := range disrupted {
		if !alive[name] {
			delete(disrupted, name)
		}
	}
	if len(disrupted) == 0 {
		disrupted = nil
	}

	desired := 0
	switch {
	case pdb.Spec.MinAvailable != nil:
		desired = scaled(pdb.Spec.MinAvailable, expected)
	case pdb.Spec.MaxUnavailable != nil:
		desired = max(0, expected-scaled(pdb.Spec.MaxUnavailable, expected))
	}
	allowed := max(0, healthy-desired)

	status := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: int32(allowed),
		CurrentHealthy:     int32(healthy),
		DesiredHealthy:     int32(desired),
		ExpectedPods:       int32(expected),
		Conditions:         append([]metav1.Condition(nil), pdb.Status.Conditions...),
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue,
		Reason: policyv1.SufficientPodsReason, ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now)}
	if allowed == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	return status
}

// scaled resolves a count or percentage of expected, rounding percentages up as the disruption controller does.
func scaled(v *intstr.IntOrString, expected int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, expected, true)
	if err != nil { // the scenario validated the value
		return 0
	}
	return n
}

// pdbStatusChanged tells whether status differs from pdb's in anything but condition timestamps.
func pdbStatusChanged(pdb *policyv1.PodDisruptionBudget, status policyv1.PodDisruptionBudgetStatus) bool {
	old := pdb.Status.DeepCopy()
	updated := status.DeepCopy()
	for _, s := range []*policyv1.PodDisruptionBudgetStatus{old, updated} {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	return !apiequality.Semantic.DeepEqual(old, updated)
}
