package demo

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

func TestSummaryRender(t *testing.T) {
	sum := Summary{
		GKE: driver.Status{Story: 26*time.Hour + 30*time.Minute, Scheduled: 1, InMaintenance: 1, Maintained: 2, Preempted: 1,
			EventsLeft: 3, Nodes: []driver.NodeStatus{
				{Name: "gke-a", Pool: "l4", Phase: "evicting-workloads"},
				{Name: "gke-b", Pool: "l4"},
				{Name: "gke-c", Pool: "a4"},
			}},
		Firing:  map[string]int{"GKESpotNodePreempted": 1, "GKENodeMaintenanceInProgress": 2},
		Actions: map[string]int{"perform-maintenance succeeded": 2, "opportunistic-maintenance succeeded": 1},
		Nodes: map[string]corev1.Node{
			"gke-a": {
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{driver.LabelActiveMaintenance: "ONGOING", driver.LabelPerformMaintenance: "true"},
					Annotations: map[string]string{nodeview.AnnotationAction: "perform-maintenance", nodeview.AnnotationState: "maintenance-requested"},
				},
				Spec:   corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
			},
			"gke-c": {
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{gke.LabelFaultBehavior: "XID", gke.LabelReportAndReplaceStatus: "OperationRUNNING"},
					Annotations: map[string]string{nodeview.AnnotationAction: "report-faulty-host", nodeview.AnnotationState: "host-reported"},
				},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
			},
		},
		Problems: []string{"Prometheus alerts: connection refused"},
		At:       time.Unix(1764547200, 0),
		Workloads: []Workload{
			{Namespace: "training", Kind: "JobSet", Name: "train-llm", Nodes: 16, InMaintenance: 2,
				NextMaintenance: time.Unix(1764547200+37, 0)},
			{Namespace: "serving", Kind: "Deployment", Name: "inference", Nodes: 3},
		},
		Findings: []Finding{
			{Check: "graceful_termination_disabled", Count: 1},
			{Check: "spot_grace_exceeds_notice", Namespace: "batch", Kind: "Job", Name: "batch-embeddings", Count: 2},
		},
	}
	var b strings.Builder
	sum.Render(&b, 288)
	out := b.String()
	for _, want := range []string{
		"Story time day 2 02:30 (288x)   events to come: 3\n",
		"maintenance scheduled: 1   in maintenance: 1   maintained: 2   preempted: 1   cordoned: 1",
		"Alerts firing: GKENodeMaintenanceInProgress 2, GKESpotNodePreempted 1",
		"Actions taken: opportunistic-maintenance succeeded 1, perform-maintenance succeeded 2\n",
		"perform-maintenance: maintenance-requested  Ready,SchedulingDisabled,maintenance=ONGOING,perform-maintenance",
		"report-faulty-host: host-reported           Ready,fault-behavior=XID,report=OperationRUNNING",
		"gke-b  l4    -                   -                                           NotReady",
		"! Prometheus alerts: connection refused",
		"  JobSet training/train-llm: next maintenance in 2h 58m on its 16 nodes, 2 of 16 in maintenance now\n",
		"  Deployment serving/inference: no maintenance scheduled on its 3 nodes\n",
		"  graceful_termination_disabled: the cluster\n",
		"  spot_grace_exceeds_notice: Job batch/batch-embeddings, 2 pods\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	sum.GKE = driver.Status{Story: time.Hour}
	b.Reset()
	sum.Render(&b, 288)
	if !strings.Contains(b.String(), "the story is over") {
		t.Errorf("no end of story:\n%s", b.String())
	}
}
