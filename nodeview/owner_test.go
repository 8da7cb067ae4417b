package nodeview

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

func TestOtherOwner(t *testing.T) {
	taint := func(key string) corev1.Taint { return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule} }
	for _, tc := range []struct {
		name          string
		unschedulable bool
		taints        []corev1.Taint
		annotations   map[string]string
		operations    []string
		want          string
	}{
		{name: "free", want: ""},
		{name: "our cordon", unschedulable: true, annotations: map[string]string{AnnotationCordonedBy: "replica-a"}, want: ""},
		{name: "plain cordon", unschedulable: true, want: OwnerCordon},
		{name: "GKE's maintenance handler", unschedulable: true, taints: []corev1.Taint{taint(gke.TaintImpendingTermination)}, want: OwnerGKEMaintenanceHandler},
		{name: "Cluster Autoscaler", taints: []corev1.Taint{taint(TaintClusterAutoscalerToBeDeleted)}, want: OwnerClusterAutoscaler},
		{name: "Cluster Autoscaler's soft taint is no hold", taints: []corev1.Taint{taint("DeletionCandidateOfClusterAutoscaler")}, want: ""},
		{name: "NVSentinel quarantine", unschedulable: true, annotations: map[string]string{AnnotationNVSentinelQuarantine: `{"checkName":"GpuXidError"}`}, want: OwnerNVSentinel},
		{name: "another hand's taint over our cordon", unschedulable: true, taints: []corev1.Taint{taint(TaintClusterAutoscalerToBeDeleted)},
			annotations: map[string]string{AnnotationCordonedBy: "replica-a"}, want: OwnerClusterAutoscaler},
		{name: "GKE's upgrade drain", unschedulable: true, operations: []string{"drain", "upgrade_nodes"}, want: OwnerGKEOperation},
		{name: "GKE's operation over our cordon", unschedulable: true, operations: []string{"auto_repair_nodes"},
			annotations: map[string]string{AnnotationCordonedBy: "replica-a"}, want: OwnerGKEOperation},
		{name: "GKE's operation before it cordons", operations: []string{"drain"}, want: OwnerGKEOperation},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: tc.annotations},
			Spec: corev1.NodeSpec{Unschedulable: tc.unschedulable, Taints: tc.taints}}
		if got := OtherOwner(n, tc.operations); got != tc.want {
			t.Errorf("%s: OtherOwner = %q, want %q", tc.name, got, tc.want)
		}
	}
}
