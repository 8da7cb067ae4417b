package readiness

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestToleratesTerminationTaint(t *testing.T) {
	for _, tc := range []struct {
		name string
		tols []corev1.Toleration
		want bool
	}{
		{"none", nil, false},
		{"other key", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}, false},
		{"explicit", []corev1.Toleration{{Key: "cloud.google.com/impending-node-termination", Operator: corev1.TolerationOpExists}}, true},
		{"explicit NoSchedule", []corev1.Toleration{{Key: "cloud.google.com/impending-node-termination", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}, true},
		{"explicit other effect", []corev1.Toleration{{Key: "cloud.google.com/impending-node-termination", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, false},
		{"keyless Exists", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, true},
		{"keyless Exists NoExecute", []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, false},
	} {
		if got := ToleratesTerminationTaint(tc.tols); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGracefulTerminationEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want bool
	}{
		{"missing ConfigMap", nil, false},
		{"key true", map[string]string{"gracefulTermination": "true"}, true},
		{"key True with space", map[string]string{"gracefulTermination": " True\n"}, true},
		{"key false", map[string]string{"gracefulTermination": "false"}, false},
		{"key garbage", map[string]string{"gracefulTermination": "yes please"}, false},
		{"YAML document", map[string]string{"config.yaml": "gracefulTermination: true\n"}, true},
		{"YAML document false", map[string]string{"config.yaml": "gracefulTermination: false\n"}, false},
		{"garbage document", map[string]string{"config.yaml": "{{{"}, false},
		{"unrelated", map[string]string{"other": "1"}, false},
	} {
		if got := GracefulTerminationEnabled(tc.data); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPDBBlocksDrain(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	pdb := func(minAvailable, maxUnavailable *intstr.IntOrString, expected int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: minAvailable, MaxUnavailable: maxUnavailable},
			Status: policyv1.PodDisruptionBudgetStatus{ExpectedPods: expected},
		}
	}
	v := func(x intstr.IntOrString) *intstr.IntOrString { return &x }
	for _, tc := range []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		want bool
	}{
		{"maxUnavailable 0", pdb(nil, v(intstr.FromInt32(0)), 3), true},
		{"maxUnavailable 0%", pdb(nil, v(intstr.FromString("0%")), 3), true},
		{"maxUnavailable 1", pdb(nil, v(intstr.FromInt32(1)), 3), false},
		{"maxUnavailable 10%", pdb(nil, v(intstr.FromString("10%")), 3), false},
		{"minAvailable 100%", pdb(v(intstr.FromString("100%")), nil, 3), true},
		{"minAvailable 50%", pdb(v(intstr.FromString("50%")), nil, 3), false},
		{"minAvailable all pods", pdb(v(intstr.FromInt32(3)), nil, 3), true},
		{"minAvailable more than pods", pdb(v(intstr.FromInt32(5)), nil, 3), true},
		{"minAvailable fewer than pods", pdb(v(intstr.FromInt32(2)), nil, 3), false},
		{"minAvailable before status", pdb(v(intstr.FromInt32(2)), nil, 0), false},
		{"no selector", &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: v(intstr.FromInt32(0))}}, false},
	} {
		if got := PDBBlocksDrain(tc.pdb); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeWithoutMaintenanceNotice(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.30.5-gke.1014001":  true,
		"v1.31.1-gke.1999999":  true,
		"v1.31.1-gke.2008000":  false,
		"v1.31.1-gke.2008001":  false,
		"v1.31.2-gke.1000":     false,
		"v1.33.5-gke.1080000":  false,
		"v1.29.0":              true,
		"":                     false,
		"not a version":        false,
		"1.31.0-gke.1500000":   true,
		"v1.31.1-gke.20080000": false,
	} {
		if got := NodeWithoutMaintenanceNotice(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

func TestPodFindings(t *testing.T) {
	cfg := Config{MinGracePeriod: 60 * time.Second, SpotNotice: 15 * time.Second}
	gpu := Node{Accelerated: true}
	spot := Node{Spot: true}
	ordinary := Node{}
	for _, tc := range []struct {
		name string
		pod  Pod
		node Node
		want []ID
	}{
		{"ready GPU pod", Pod{GracePeriodSeconds: 600}, gpu, nil},
		{"short grace on GPU", Pod{GracePeriodSeconds: 30}, gpu, []ID{CheckGracePeriodShort}},
		{"short grace on Spot is fine", Pod{GracePeriodSeconds: 10}, spot, nil},
		{"long grace on Spot", Pod{GracePeriodSeconds: 30}, spot, []ID{CheckSpotGraceExceedsNotice}},
		{"grace equal to notice", Pod{GracePeriodSeconds: 15}, spot, nil},
		{"tolerating on GPU", Pod{GracePeriodSeconds: 600, ToleratesTerminationTaint: true}, gpu, []ID{CheckToleratesTerminationTaint}},
		{"tolerating on Spot is not checked", Pod{GracePeriodSeconds: 10, ToleratesTerminationTaint: true}, spot, nil},
		{"blocking PDB on Spot", Pod{GracePeriodSeconds: 10, BlockedByPDB: true}, spot, []ID{CheckPDBBlocksDrain}},
		{"old GPU node", Pod{GracePeriodSeconds: 600}, Node{Accelerated: true, WithoutMaintenanceNotice: true}, []ID{CheckNodeWithoutMaintenanceNotice}},
		{"ordinary node", Pod{GracePeriodSeconds: 0, ToleratesTerminationTaint: true, BlockedByPDB: true}, ordinary, nil},
		{"Spot GPU node", Pod{GracePeriodSeconds: 30}, Node{Accelerated: true, Spot: true}, []ID{CheckGracePeriodShort, CheckSpotGraceExceedsNotice}},
	} {
		var want Findings
		for _, id := range tc.want {
			want |= 1 << id
		}
		if got := PodFindings(cfg, tc.pod, tc.node); got != want {
			t.Errorf("%s: %08b, want %08b", tc.name, got, want)
		}
	}
}

func TestEveryCheckDescribed(t *testing.T) {
	for id, c := range Checks {
		if c.Name == "" || c.Summary == "" || c.Fix == "" || (c.Severity != Warning && c.Severity != Error) {
			t.Errorf("check %d incompletely described: %+v", id, c)
		}
	}
}
