package nodes

import (
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func renderText(n *v1.Node) (string, []parseError) {
	r, errs := render(n)
	var b strings.Builder
	for _, part := range r {
		b.Write(part)
	}
	return b.String(), errs
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
			want: `gke_node_info{accelerator="",machine_type="",node="n1",node_pool="",provisioning="standard",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "spot label without provisioning label",
			node: node("n1", map[string]string{gke.LabelSpot: "true", gke.LabelNodePool: "spot-pool"}),
			want: `gke_node_info{accelerator="",machine_type="",node="n1",node_pool="spot-pool",provisioning="spot",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "provisioning label wins over spot",
			node: node("n1", map[string]string{gke.LabelSpot: "true", gke.LabelProvisioning: "flex-start"}),
			want: `gke_node_info{accelerator="",machine_type="",node="n1",node_pool="",provisioning="flex-start",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "deprecated zone and instance type labels",
			node: node("n1", map[string]string{gke.LabelZoneDeprecated: "us-central1-a", gke.LabelInstanceTypeDeprecated: "a3-highgpu-8g"}),
			want: `gke_node_info{accelerator="",machine_type="a3-highgpu-8g",node="n1",node_pool="",provisioning="standard",tpu_accelerator="",tpu_topology="",zone="us-central1-a"} 1` + "\n",
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
			name: "perform-maintenance false is no request",
			node: node("n1", map[string]string{gke.LabelPerformMaintenance: "false"}),
		},
		{
			name: "opportunistic maintenance disabled",
			node: node("n1", map[string]string{gke.LabelOpportunisticDisable: "true"}),
			want: "gke_node_opportunistic_maintenance_disabled{node=\"n1\"} 1\n",
		},
		{
			name: "invalid UTF-8 label value dropped",
			node: node("n1", map[string]string{gke.LabelNodePool: "pool\xff"}),
			want: `gke_node_info{accelerator="",machine_type="",node="n1",node_pool="",provisioning="standard",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
		},
		{
			name: "quotes and backslashes escaped",
			node: node(`n"1\`, nil),
			want: `gke_node_info{accelerator="",machine_type="",node="n\"1\\",node_pool="",provisioning="standard",tpu_accelerator="",tpu_topology="",zone=""} 1` + "\n",
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
				gotErrors = append(gotErrors, e.label)
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
	}
	got, _ := renderText(n)
	for _, want := range []string{
		"gke_node_impending_termination{effect=\"NoSchedule\",node=\"n1\"} 1\n",
		"gke_node_impending_termination{effect=\"NoExecute\",node=\"n1\"} 1\n",
		"gke_node_unschedulable{node=\"n1\"} 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "nvidia") {
		t.Errorf("unrelated taint rendered:\n%s", got)
	}
}

func TestOpportunisticTriggered(t *testing.T) {
	for value, want := range map[string]bool{
		"opportunistic-triggered: true":          true,
		`{"opportunistic-triggered": "true"}`:    true,
		"opportunistic-triggered=true":           true,
		"Opportunistic-Triggered":                true,
		"other: x, opportunistic-triggered:true": true,
		"opportunistic-triggered: false":         false,
		"":                                       false,
		"garbage\x00":                            false,
	} {
		got := gke.OpportunisticTriggered(map[string]string{gke.AnnotationMaintenanceState: value})
		if got != want {
			t.Errorf("gke.OpportunisticTriggered(%q) = %v, want %v", value, got, want)
		}
	}
	if gke.OpportunisticTriggered(nil) {
		t.Error("no annotation must not count as triggered")
	}
}

func TestStripKeepsOnlyWhatSeriesNeed(t *testing.T) {
	n := node("n1", map[string]string{gke.LabelNodePool: "p", "kubernetes.io/hostname": "n1", gke.LabelScheduledMaintenanceTime: "1"})
	n.Annotations = map[string]string{gke.AnnotationMaintenanceState: "x", "node.alpha.kubernetes.io/ttl": "0"}
	n.Spec.Taints = []v1.Taint{{Key: "other", Effect: v1.TaintEffectNoSchedule}, {Key: gke.TaintImpendingTermination, Value: "v", Effect: v1.TaintEffectNoSchedule}}
	n.Status.Images = []v1.ContainerImage{{Names: []string{"image"}}}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}

	obj, err := Strip(n)
	if err != nil {
		t.Fatal(err)
	}
	s := obj.(*v1.Node)
	if len(s.Labels) != 2 || s.Labels["kubernetes.io/hostname"] != "" {
		t.Errorf("labels not stripped: %v", s.Labels)
	}
	if len(s.Annotations) != 1 || len(s.Spec.Taints) != 1 || len(s.Status.Images) != 0 || len(s.ManagedFields) != 0 {
		t.Errorf("not stripped: %+v", s)
	}
	// The stripped node renders exactly as the full one.
	full, _ := renderText(n)
	stripped, _ := renderText(s)
	if full != stripped {
		t.Errorf("stripped node renders differently:\n%s\nvs\n%s", stripped, full)
	}
}

func TestStoreSetAndDelete(t *testing.T) {
	s := newStore()
	for _, name := range []string{"a", "b", "c"} {
		r, _ := render(node(name, map[string]string{gke.LabelPerformMaintenance: "true"}))
		s.set(name, &r)
	}
	r, _ := render(node("b", nil))
	s.set("b", &r) // b no longer requests maintenance
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
		if s.names[i] != name {
			t.Errorf("index of %s points at %s", name, s.names[i])
		}
	}
}
