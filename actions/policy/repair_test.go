package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// announced gives the node GKE's annotation for a maintenance with reasons, a week out as failures are booked.
func announced(status string, reasons ...string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[gke.AnnotationUpcomingMaintenance] = `{"type":"SCHEDULED","maintenance_status":"` + status +
			`","can_reschedule":"true","window_start_time":"2025-06-14T10:00:00Z","maintenance_reasons":["` +
			strings.Join(reasons, `","`) + `"]}`
	}
}

func both(opts ...nodeOpt) nodeOpt {
	return func(n *corev1.Node) {
		for _, o := range opts {
			o(n)
		}
	}
}

// Weekend windows that saturday3am is outside of: Sunday only.
const repairPolicy = `
windows:
  - {days: [Sun], start: "02:00", end: "06:00", timezone: America/Los_Angeles}
pools:
  - name: train
    nodeSelector: {cloud.google.com/gke-nodepool: a4}
    maxUnavailable: 1
    minAvailable: 2
    repair: {maxConcurrent: 2}
  - name: coupled
    nodeSelector: {cloud.google.com/gke-nodepool: a4-coupled}
    strategy: parallel
    repair: {}
  - name: night
    nodeSelector: {cloud.google.com/gke-nodepool: a4-night}
    repair:
      windows: [{start: "22:00", end: "23:00", timezone: UTC}]
  - name: plain
    nodeSelector: {cloud.google.com/gke-nodepool: a4-plain}
`

func TestDecideRepair(t *testing.T) {
	cfg := mustParse(t, repairPolicy)
	failure := announced("PENDING", "FAILURE_GPU_XID", "FAILURE_GPU")
	planned := announced("PENDING", "PLANNED_UPDATE")
	// underRepair is a node this service cordoned for a failure GKE is repairing.
	underRepair := both(cordoned, announced("ONGOING", "FAILURE_GPU"))
	plannedDown := both(cordoned, planned)
	for _, tc := range []struct {
		name    string
		req     Request
		node    string
		cluster []*corev1.Node
		want    Verdict
		reason  string
		code    string
	}{
		{
			name: "failure acted on at once, outside the top-level windows",
			req:  Request{Action: nodeview.PerformMaintenance, CanReschedule: true, HardwareFailure: true},
			node: "a4-0", cluster: fleet("a4", "a4", 5, failure),
			want: Act, reason: "repair of failed hardware",
		},
		{
			name: "planned maintenance keeps the top-level windows",
			req:  Request{Action: nodeview.PerformMaintenance, CanReschedule: true},
			node: "a4-0", cluster: fleet("a4", "a4", 5, planned),
			want: Wait, code: WaitWindow, reason: "outside every maintenance window",
		},
		{
			name: "failure beside a planned maintenance: its own budget, not maxUnavailable",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "a4-0", cluster: fleet("a4", "a4", 5, failure, plannedDown),
			want: Act, reason: "1 of 5 nodes under repair",
		},
		{
			name: "second failure within maxConcurrent 2",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "a4-0", cluster: fleet("a4", "a4", 5, failure, underRepair),
			want: Act, reason: "2 of 5",
		},
		{
			name: "third failure waits for the repair budget",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "a4-0", cluster: fleet("a4", "a4", 5, failure, underRepair, underRepair),
			want: Wait, code: WaitPoolBudget, reason: "2 nodes under repair, repair.maxConcurrent 2",
		},
		{
			name: "repairs respect minAvailable",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "a4-0", cluster: fleet("a4", "a4", 3, failure, plannedDown),
			want: Wait, code: WaitPoolBudget, reason: "below minAvailable 2",
		},
		{
			name: "failure known only from the node's annotation",
			req:  RequestFor(nodeview.Drain, false, false, nodeview.Of(mkNode("x", "a4", scheduled, failure)).Maintenance),
			node: "a4-0", cluster: fleet("a4", "a4", 5, failure),
			want: Act, reason: "repair of failed hardware",
		},
		{
			name: "parallel pool: a failed node is repaired under the repair budget",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "c-0", cluster: fleet("c", "a4-coupled", 4, failure, underRepair),
			want: Wait, code: WaitPoolBudget, reason: "repair.maxConcurrent 1",
		},
		{
			name: "repair windows hold repairs back",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "n-0", cluster: fleet("n", "a4-night", 2, failure),
			want: Wait, code: WaitWindow, reason: "outside every repair window of pool night",
		},
		{
			name: "a pool without repair handles failures as planned maintenance",
			req:  Request{Action: nodeview.Drain, HardwareFailure: true},
			node: "p-0", cluster: fleet("p", "a4-plain", 2, failure),
			want: Wait, code: WaitWindow, reason: "outside every maintenance window",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var node *nodeview.View
			for _, n := range tc.cluster {
				scheduled(n)
			}
			all := views(tc.cluster)
			for _, v := range all {
				if v.Name == tc.node {
					node = v
				}
			}
			pool, cluster := Survey(cfg, node, all, (*nodeview.View).Disrupted)
			d := Decide(cfg, Input{Request: tc.req, Node: node, Members: []*nodeview.View{node}, Pool: pool,
				Cluster: cluster, Now: saturday3am})
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) || d.Code != tc.code {
				t.Errorf("got %s %q (code %q), want %s containing %q (code %q)", d.Verdict, d.Reason, d.Code, tc.want, tc.reason, tc.code)
			}
		})
	}
}

func TestDecideReportFaultyHost(t *testing.T) {
	cfg := mustParse(t, repairPolicy)
	a4 := func(n *corev1.Node) { n.Labels[gke.LabelInstanceType] = "a4-highgpu-8g" }
	label := func(key, value string) nodeOpt { return func(n *corev1.Node) { n.Labels[key] = value } }
	reported := both(a4, label(gke.LabelFaultBehavior, "XID"))
	inProgress := both(a4, label(gke.LabelReportAndReplaceStatus, "OperationRUNNING"))
	report := Request{Action: nodeview.ReportFaultyHost, HardwareFailure: true}
	for _, tc := range []struct {
		name    string
		node    string
		cluster []*corev1.Node
		want    Verdict
		reason  string
		code    string
	}{
		{
			name: "supported machine type, no maintenance pending, outside the top-level windows",
			node: "a4-0", cluster: fleet("a4", "a4", 5, a4),
			want: Act, reason: "repair of failed hardware",
		},
		{
			name: "unsupported machine type",
			node: "a4-0", cluster: fleet("a4", "a4", 5, label(gke.LabelInstanceType, "a3-highgpu-4g")),
			want: Refuse, reason: `machine type "a3-highgpu-4g" cannot have its host reported`,
		},
		{
			name: "no machine type label",
			node: "a4-0", cluster: fleet("a4", "a4", 5),
			want: Refuse, reason: `machine type "" cannot`,
		},
		{
			name: "fault-behavior already set by someone",
			node: "a4-0", cluster: fleet("a4", "a4", 5, reported),
			want: Refuse, reason: "already reported as faulty (cloud.google.com/fault-behavior=XID)",
		},
		{
			name: "GKE's report in progress",
			node: "a4-0", cluster: fleet("a4", "a4", 5, inProgress),
			want: Refuse, reason: "in progress (cloud.google.com/report-and-replace-status=OperationRUNNING)",
		},
		{
			name: "a finished report is no obstacle to a new one",
			node: "a4-0", cluster: fleet("a4", "a4", 5, both(a4, label(gke.LabelReportAndReplaceStatus, "OperationDone"))),
			want: Act, reason: "1 of 5 nodes under repair",
		},
		{
			name: "counts against repair.maxConcurrent with other reports",
			node: "a4-0", cluster: fleet("a4", "a4", 5, a4, reported, inProgress),
			want: Wait, code: WaitPoolBudget, reason: "2 nodes under repair, repair.maxConcurrent 2",
		},
		{
			name: "pool without repair: the default repair budget, any time",
			node: "p-0", cluster: fleet("p", "a4-plain", 3, a4),
			want: Act, reason: "repair.maxConcurrent 1",
		},
		{
			name: "pool without repair: a second report waits",
			node: "p-0", cluster: fleet("p", "a4-plain", 3, a4, reported),
			want: Wait, code: WaitPoolBudget, reason: "1 nodes under repair, repair.maxConcurrent 1",
		},
		{
			name: "parallel pool: only the reported node, under the repair budget",
			node: "c-0", cluster: fleet("c", "a4-coupled", 4, a4),
			want: Act, reason: "1 of 4 nodes under repair",
		},
		{
			name: "GKE maintenance under way",
			node: "a4-0", cluster: fleet("a4", "a4", 5, both(a4, maintenance)),
			want: Refuse, reason: "GKE maintenance is already under way",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := views(tc.cluster)
			var node *nodeview.View
			for _, v := range all {
				if v.Name == tc.node {
					node = v
				}
			}
			pool, cluster := Survey(cfg, node, all, (*nodeview.View).Disrupted)
			d := Decide(cfg, Input{Request: report, Node: node, Members: []*nodeview.View{node}, Pool: pool,
				Cluster: cluster, Now: saturday3am})
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) || d.Code != tc.code {
				t.Errorf("got %s %q (code %q), want %s containing %q (code %q)", d.Verdict, d.Reason, d.Code, tc.want, tc.reason, tc.code)
			}
		})
	}
	if req := RequestFor(nodeview.ReportFaultyHost, false, false, nodeview.Maintenance{}); !req.HardwareFailure {
		t.Error("a faulty-host report is not a repair")
	}
}
