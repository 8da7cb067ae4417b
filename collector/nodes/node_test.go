package nodes

import (
	"strings"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func node(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func annotated(n *v1.Node, annotations map[string]string) *v1.Node {
	n.Annotations = annotations
	return n
}

// gpuFault gives n the boot ID and the GPU device plugin's XidCriticalError condition, set in the boot conditionBoot.
func gpuFault(n *v1.Node, bootID, reason, conditionBoot string) *v1.Node {
	n.Status.NodeInfo.BootID = bootID
	n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: gke.ConditionXidCriticalError,
		Status: v1.ConditionTrue, Reason: reason, Message: conditionBoot,
		LastTransitionTime: metav1.NewTime(time.Date(2025, 8, 14, 9, 30, 0, 0, time.UTC))})
	return n
}

// withDevices sets n's capacity and allocatable of each resource.
func withDevices(n *v1.Node, devices map[string][2]string) *v1.Node {
	n.Status.Capacity, n.Status.Allocatable = v1.ResourceList{}, v1.ResourceList{}
	for r, c := range devices {
		n.Status.Capacity[v1.ResourceName(r)] = resource.MustParse(c[0])
		n.Status.Allocatable[v1.ResourceName(r)] = resource.MustParse(c[1])
	}
	return n
}

func renderText(n *v1.Node) (string, []parseError) {
	r := render(nodeview.Of(n))
	return string(r.samples), r.bad
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node       *v1.Node
		want       string
		wantErrors []string
	}{
		{
			name: "plain node has only info, provisioning standard",
			node: node("n1", nil),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="",node="n1",node_pool="",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "spot label without provisioning label",
			node: node("n1", map[string]string{gke.LabelSpot: "true", gke.LabelNodePool: "spot-pool"}),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="",node="n1",node_pool="spot-pool",provisioning="spot",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "provisioning label wins over spot",
			node: node("n1", map[string]string{gke.LabelSpot: "true", gke.LabelProvisioning: "flex-start"}),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="",node="n1",node_pool="",provisioning="flex-start",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "deprecated zone and instance type labels",
			node: node("n1", map[string]string{gke.LabelZoneDeprecated: "us-central1-a", gke.LabelInstanceTypeDeprecated: "a3-highgpu-8g"}),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="a3-highgpu-8g",node="n1",node_pool="",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone="us-central1-a"} 1` + "\n",
		},
		{
			name: "physical topology",
			node: node("n1", map[string]string{gke.LabelTopologyHost: "h-1", gke.LabelTopologyBlock: "b-1", gke.LabelTopologySubblock: "sb-1"}),
			want: `gke_node_info{accelerator="",block="b-1",host="h-1",machine_type="",node="n1",node_pool="",provisioning="standard",subblock="sb-1",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "scheduled maintenance time",
			node: node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: "1733040000"}),
			want: "gke_node_scheduled_maintenance_timestamp_seconds{node=\"n1\"} 1.73304e+09\n",
		},
		{
			name:       "non-numeric maintenance time is an error, no series",
			node:       node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: "tomorrow"}),
			wantErrors: []string{gke.LabelScheduledMaintenanceTime},
		},
		{
			name:       "negative maintenance time is an error",
			node:       node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: "-5"}),
			wantErrors: []string{gke.LabelScheduledMaintenanceTime},
		},
		{
			name:       "fractional maintenance time is an error",
			node:       node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: "1733040000.5"}),
			wantErrors: []string{gke.LabelScheduledMaintenanceTime},
		},
		{
			name:       "empty maintenance time is an error",
			node:       node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: ""}),
			wantErrors: []string{gke.LabelScheduledMaintenanceTime},
		},
		{
			name: "zero maintenance time is a value",
			node: node("n1", map[string]string{gke.LabelScheduledMaintenanceTime: "0"}),
			want: "gke_node_scheduled_maintenance_timestamp_seconds{node=\"n1\"} 0\n",
		},
		{
			name: "maintenance state lower-cased",
			node: node("n1", map[string]string{gke.LabelActiveNodeMaintenance: "ONGOING"}),
			want: "gke_node_maintenance_state{node=\"n1\",state=\"ongoing\"} 1\n",
		},
		{
			name: "unknown maintenance state passes through",
			node: node("n1", map[string]string{gke.LabelActiveNodeMaintenance: "Draining_Workloads"}),
			want: "gke_node_maintenance_state{node=\"n1\",state=\"draining_workloads\"} 1\n",
		},
		{
			name: "empty maintenance state means none",
			node: node("n1", map[string]string{gke.LabelActiveNodeMaintenance: ""}),
		},
		{
			name: "perform-maintenance only when exactly true",
			node: node("n1", map[string]string{gke.LabelPerformMaintenance: "true"}),
			want: "gke_node_perform_maintenance_requested{node=\"n1\"} 1\n",
		},
		{
			// GKE has consumed the label and shows no maintenance yet: the actions service's request still stands.
			name: "the actions service's request, consumed by GKE",
			node: annotated(node("n1", nil), map[string]string{nodeview.AnnotationAction: "perform-maintenance",
				nodeview.AnnotationState: "maintenance-requested"}),
			want: "gke_node_perform_maintenance_requested{node=\"n1\"} 1\n",
		},
		{
			name: "the actions service's request once GKE shows passthrough",
			node: annotated(node("n1", map[string]string{gke.LabelActiveNodeMaintenance: "passthrough"}),
				map[string]string{nodeview.AnnotationAction: "perform-maintenance", nodeview.AnnotationState: "maintenance-requested"}),
			want: "gke_node_maintenance_state{node=\"n1\",state=\"passthrough\"} 1\n",
		},
		{
			name: "the actions service's request after GKE's maintenance was seen",
			node: annotated(node("n1", nil), map[string]string{nodeview.AnnotationAction: "perform-maintenance",
				nodeview.AnnotationState: "maintenance-requested", nodeview.AnnotationMaintenanceSeen: "true"}),
		},
		{
			name: "report-and-replace status in its documented spelling",
			node: node("n1", map[string]string{gke.LabelReportAndReplaceStatus: "OperationRUNNING", gke.LabelFaultBehavior: "XID"}),
			want: "gke_node_report_and_replace_status{node=\"n1\",status=\"OperationRUNNING\"} 1\n",
		},
		{
			name: "report-and-replace status ERROR read as Error",
			node: node("n1", map[string]string{gke.LabelReportAndReplaceStatus: "ERROR"}),
			want: "gke_node_report_and_replace_status{node=\"n1\",status=\"Error\"} 1\n",
		},
		{
			name: "perform-maintenance false is no request",
			node: node("n1", map[string]string{gke.LabelPerformMaintenance: "false"}),
		},
		{
			name: "opportunistic maintenance started by the actions service, until it is done",
			node: withAnnotations(node("n1", nil), map[string]string{nodeview.AnnotationAction: "opportunistic-maintenance",
				nodeview.AnnotationState: "maintenance-requested"}),
			want: "gke_node_perform_maintenance_requested{node=\"n1\"} 1\ngke_node_opportunistic_maintenance_triggered{node=\"n1\"} 1\n",
		},
		{
			name: "opportunistic maintenance of the actions service done",
			node: withAnnotations(node("n1", nil), map[string]string{nodeview.AnnotationAction: "opportunistic-maintenance",
				nodeview.AnnotationState: "done"}),
		},
		{
			name: "opportunistic maintenance disabled",
			node: node("n1", map[string]string{gke.LabelOpportunisticDisable: "true"}),
			want: "gke_node_opportunistic_maintenance_disabled{node=\"n1\"} 1\n",
		},
		{
			name: "passthrough maintenance state passes through",
			node: node("n1", map[string]string{gke.LabelActiveNodeMaintenance: "passthrough"}),
			want: "gke_node_maintenance_state{node=\"n1\",state=\"passthrough\"} 1\n",
		},
		{
			name: "upcoming maintenance annotation as GKE writes it",
			node: annotated(node("n1", nil), map[string]string{gke.AnnotationUpcomingMaintenance: `{"can_reschedule":"true",` +
				`"latest_window_start_time":"2025-03-05T01:00:00Z","maintenance_status":"PENDING","type":"SCHEDULED",` +
				`"window_end_time":"2025-03-04T03:00:00Z","window_start_time":"2025-03-04T01:00:00Z","maintenance_reasons":["PLANNED_UPDATE"]}`}),
			want: `gke_node_upcoming_maintenance_info{can_reschedule="true",node="n1",reasons="PLANNED_UPDATE",status="PENDING",type="SCHEDULED"} 1` + "\n" +
				`gke_node_upcoming_maintenance_window_start_timestamp_seconds{node="n1"} 1.74105e+09` + "\n" +
				`gke_node_upcoming_maintenance_window_end_timestamp_seconds{node="n1"} 1.7410572e+09` + "\n" +
				`gke_node_upcoming_maintenance_latest_window_start_timestamp_seconds{node="n1"} 1.7411364e+09` + "\n",
		},
		{
			name: "upcoming maintenance with bool can_reschedule and no windows",
			node: annotated(node("n1", nil), map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"UNSCHEDULED","can_reschedule":false}`}),
			want: `gke_node_upcoming_maintenance_info{can_reschedule="false",node="n1",reasons="",status="",type="UNSCHEDULED"} 1` + "\n",
		},
		{
			name: "empty upcoming maintenance means none",
			node: annotated(node("n1", nil), map[string]string{gke.AnnotationUpcomingMaintenance: `{}`}),
		},
		{
			name:       "bad upcoming maintenance JSON is an error, no series",
			node:       annotated(node("n1", nil), map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED"`}),
			wantErrors: []string{gke.AnnotationUpcomingMaintenance},
		},
		{
			name:       "unreadable field is an error, the rest is kept",
			node:       annotated(node("n1", nil), map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED","window_start_time":"soon"}`}),
			want:       `gke_node_upcoming_maintenance_info{can_reschedule="false",node="n1",reasons="",status="",type="SCHEDULED"} 1` + "\n",
			wantErrors: []string{gke.AnnotationUpcomingMaintenance},
		},
		{
			name: "TPU slice hosts",
			node: node("n1", map[string]string{gke.LabelTPUTopology: "4x4", gke.LabelInstanceType: "ct5lp-hightpu-4t"}),
			want: "gke_node_tpu_slice_hosts{node=\"n1\"} 4\n",
		},
		{
			name: "single-host TPU slice",
			node: node("n1", map[string]string{gke.LabelTPUTopology: "2x4", gke.LabelInstanceType: "ct5lp-hightpu-8t"}),
			want: "gke_node_tpu_slice_hosts{node=\"n1\"} 1\n",
		},
		{
			name: "unknown TPU machine type: no slice series",
			node: node("n1", map[string]string{gke.LabelTPUTopology: "4x4", gke.LabelInstanceType: "ct9x-future-4t"}),
		},
		{
			name: "TPU without topology: no slice series",
			node: node("n1", map[string]string{gke.LabelInstanceType: "ct5p-hightpu-4t"}),
		},
		{
			name: "garbled topology: no slice series",
			node: node("n1", map[string]string{gke.LabelTPUTopology: "4by4", gke.LabelInstanceType: "ct5p-hightpu-4t"}),
		},
		{
			name: "critical Xids of this boot, and since when",
			node: gpuFault(node("n1", nil), "boot-1", `{"79":true,"119":true}`, "boot-1"),
			want: `gke_node_gpu_xid_critical{node="n1",xid="79"} 1` + "\n" + `gke_node_gpu_xid_critical{node="n1",xid="119"} 1` + "\n" +
				`gke_node_gpu_xid_critical_since_timestamp_seconds{node="n1"} 1.7551638e+09` + "\n",
		},
		{
			name: "Xid condition of an earlier boot says nothing",
			node: gpuFault(node("n1", nil), "boot-2", `{"79":true}`, "boot-1"),
		},
		{
			name:       "unreadable Xid condition reason is an error, the fault's time kept",
			node:       gpuFault(node("n1", nil), "boot-1", `Xid 79`, "boot-1"),
			want:       `gke_node_gpu_xid_critical_since_timestamp_seconds{node="n1"} 1.7551638e+09` + "\n",
			wantErrors: []string{nodeview.UnreadableXidCondition},
		},
		{
			name: "unhealthy GPUs and TPU chips",
			node: withDevices(node("n1", nil), map[string][2]string{gke.ResourceGPU: {"8", "7"}, gke.ResourceTPU: {"4", "2"}, "cpu": {"8", "7"}}),
			want: `gke_node_gpus_unhealthy{node="n1",resource="nvidia.com/gpu"} 1` + "\n" + `gke_node_gpus_unhealthy{node="n1",resource="google.com/tpu"} 2` + "\n",
		},
		{
			name: "every GPU healthy",
			node: withDevices(node("n1", nil), map[string][2]string{gke.ResourceGPU: {"8", "8"}}),
		},
		{
			name: "invalid UTF-8 label value dropped",
			node: node("n1", map[string]string{gke.LabelNodePool: "pool\xff"}),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="",node="n1",node_pool="",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "quotes and backslashes escaped",
			node: node(`n"1\`, nil),
			want: `gke_node_info{accelerator="",block="",host="",machine_type="",node="n\"1\\",node_pool="",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := renderText(tc.node)
			// Every node has an info line; the cases that are about other series compare only those.
			if !strings.HasPrefix(tc.want, "gke_node_info") {
				got = got[strings.Index(got, "\n")+1:]
			}
			if got != tc.want {
				t.Errorf("render:\n got %q\nwant %q", got, tc.want)
			}
			var gotErrors []string
			for _, e := range errs {
				gotErrors = append(gotErrors, e.key)
			}
			if strings.Join(gotErrors, ",") != strings.Join(tc.wantErrors, ",") {
				t.Errorf("parse errors: got %v, want %v", gotErrors, tc.wantErrors)
			}
		})
	}
}

func TestRenderTaints(t *testing.T) {
	n := node("n1", nil)
	n.Spec.Unschedulable = true
	n.Spec.Taints = []v1.Taint{
		{Key: "nvidia.com/gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: gke.TaintImpendingTermination, Effect: v1.TaintEffectNoSchedule},
		{Key: gke.TaintImpendingTermination, Effect: v1.TaintEffectNoExecute},
		{Key: gke.TaintMaintenanceWindowStarted, Effect: v1.TaintEffectPreferNoSchedule},
	}
	got, _ := renderText(n)
	for _, want := range []string{
		"gke_node_impending_termination{effect=\"NoSchedule\",node=\"n1\"} 1\n",
		"gke_node_impending_termination{effect=\"NoExecute\",node=\"n1\"} 1\n",
		"gke_node_unschedulable{node=\"n1\"} 1\n",
		"gke_node_maintenance_window_started{effect=\"PreferNoSchedule\",node=\"n1\"} 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "nvidia") {
		t.Errorf("unrelated taint rendered:\n%s", got)
	}
}

func TestTransformKeepsOnlyTheRecord(t *testing.T) {
	n := node("n1", map[string]string{gke.LabelNodePool: "p", "kubernetes.io/hostname": "n1", gke.LabelScheduledMaintenanceTime: "x"})
	n.ResourceVersion = "42"
	n.Status.Images = []v1.ContainerImage{{Names: []string{"image"}}}
	obj, err := Transform(n)
	if err != nil {
		t.Fatal(err)
	}
	r := obj.(*record)
	want, wantErrs := renderText(n)
	if string(r.samples) != want || len(r.bad) != len(wantErrs) {
		t.Errorf("record %q, errors %v; want %q, %v", r.samples, r.bad, want, wantErrs)
	}
	// The informer keys records like nodes, and transforms a record again as itself.
	key, err := cache.MetaNamespaceKeyFunc(r)
	if err != nil || key != "n1" {
		t.Errorf("key %q, %v", key, err)
	}
	if again, _ := Transform(r); again != r {
		t.Error("a record transformed again changed")
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "n1", Obj: r}
	if got, _ := Transform(tombstone); got != tombstone {
		t.Error("a tombstone did not pass through")
	}
}

func TestStoreSetAndDelete(t *testing.T) {
	s := newStore()
	for _, name := range []string{"a", "b", "c"} {
		s.set(render(nodeview.Of(node(name, map[string]string{gke.LabelPerformMaintenance: "true"}))))
	}
	s.set(render(nodeview.Of(node("b", nil)))) // b no longer requests maintenance
	s.delete("a")
	s.delete("missing")

	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{`node="b"`, `gke_node_perform_maintenance_requested{node="c"} 1`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in\n%s", want, got)
		}
	}
	if strings.Contains(got, `node="a"`) || strings.Contains(got, `gke_node_perform_maintenance_requested{node="b"}`) {
		t.Errorf("stale series in\n%s", got)
	}
	if s.counts[familyPerformMaintenanceRequested] != 1 || s.counts[familyInfo] != 2 || len(s.index) != 2 {
		t.Errorf("counts %v, index %v", s.counts, s.index)
	}
	for name, i := range s.index {
		if s.nodes[i].name != name {
			t.Errorf("index of %s points at %s", name, s.nodes[i].name)
		}
	}
}

func withAnnotations(n *v1.Node, annotations map[string]string) *v1.Node {
	n.Annotations = annotations
	return n
}

// TestStoreGeneration: the text's generation changes when a node's series do, or a node comes or goes, and not when
// an update leaves its series as they were (status, heartbeats).
func TestStoreGeneration(t *testing.T) {
	s := newStore()
	step := func(what string, change func(), changes bool) {
		t.Helper()
		before := s.TextGeneration()
		change()
		if got := s.TextGeneration() != before; got != changes {
			t.Errorf("%s: generation changed %v, want %v", what, got, changes)
		}
	}
	step("add", func() { s.set(render(nodeview.Of(node("a", nil)))) }, true)
	step("same series", func() {
		n := node("a", nil)
		n.ResourceVersion = "2"
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		s.set(render(nodeview.Of(n)))
	}, false)
	step("new series", func() { s.set(render(nodeview.Of(node("a", map[string]string{gke.LabelPerformMaintenance: "true"})))) }, true)
	step("delete missing", func() { s.delete("missing") }, false)
	step("delete", func() { s.delete("a") }, true)
}
