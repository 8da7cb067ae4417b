package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

func TestDesiredNodeMeta(t *testing.T) {
	start := time.Date(2025, 12, 3, 2, 0, 0, 0, time.UTC)
	announced := metadata.Maintenance{Type: "SCHEDULED", Status: "PENDING", CanReschedule: true, WindowStart: start,
		WindowEnd: start.Add(4 * time.Hour), LatestWindowStart: start, Reasons: []string{"PLANNED_UPDATE"}}
	for _, tc := range []struct {
		name      string
		m         *maintenance
		want      nodeMeta
		wantState string // maintenance_status of the annotation
	}{
		{name: "none", want: nodeMeta{}},
		{name: "announced", m: &maintenance{phase: phaseScheduled},
			want: nodeMeta{scheduled: "1764727200"}, wantState: "PENDING"},
		{name: "window started", m: &maintenance{phase: phaseStarting},
			want: nodeMeta{scheduled: "1764727200", windowStarted: true}, wantState: "PENDING"},
		{name: "after perform-maintenance", m: &maintenance{phase: phaseStarting, requested: true},
			want: nodeMeta{scheduled: "1764727200", state: "passthrough", windowStarted: true}, wantState: "PENDING"},
		{name: "ongoing", m: &maintenance{phase: phaseWorkloadEviction, requested: true},
			want: nodeMeta{scheduled: "1764727200", state: "ONGOING", terminating: true, windowStarted: true}, wantState: "ONGOING"},
		{name: "field: request just taken", m: &maintenance{phase: phaseDrainWindow, field: true, labelConsumed: true},
			want: nodeMeta{scheduled: "1764727200"}, wantState: "PENDING"},
		{name: "field: passthrough", m: &maintenance{phase: phaseDrainWindow, field: true, passthrough: true},
			want: nodeMeta{scheduled: "1764727200", state: "passthrough"}, wantState: "PENDING"},
		{name: "field: drain window, node still Ready", m: &maintenance{phase: phaseDrainWindow, field: true, passthrough: true, windowStartedTaint: true},
			want: nodeMeta{scheduled: "1764727200", state: "passthrough", windowStarted: true}, wantState: "PENDING"},
		{name: "field: host repaired, no termination taint", m: &maintenance{phase: phaseHostDown, field: true, passthrough: true, windowStartedTaint: true},
			want: nodeMeta{scheduled: "1764727200", state: "passthrough", windowStarted: true}, wantState: "PENDING"},
		{name: "terminating", m: &maintenance{phase: phaseHostDown},
			want: nodeMeta{scheduled: "1764727200", state: "terminating", terminating: true, windowStarted: true}, wantState: "ONGOING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sn := &simNode{maintenance: tc.m}
			if tc.m != nil {
				tc.m.windowStart, tc.m.announced = start, announced
			}
			got := desiredNodeMeta(sn)
			upcoming := got.upcoming
			got.upcoming = ""
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.m == nil {
				if upcoming != "" {
					t.Errorf("annotation %s without maintenance", upcoming)
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(upcoming), &doc); err != nil {
				t.Fatalf("annotation %q: %v", upcoming, err)
			}
			// As GKE writes it: snake_case, can_reschedule a string.
			if doc["maintenance_status"] != tc.wantState || doc["can_reschedule"] != "true" || doc["window_start_time"] != "2025-12-03T02:00:00Z" {
				t.Errorf("annotation %s", upcoming)
			}
		})
	}
}

func TestApplyNodeMeta(t *testing.T) {
	start := time.Date(2025, 12, 3, 2, 0, 0, 0, time.UTC)
	sn := &simNode{maintenance: &maintenance{phase: phaseStarting, requested: true, windowStart: start,
		announced: metadata.Maintenance{WindowStart: start}}}
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: taintGPU, Effect: corev1.TaintEffectNoSchedule}}}}
	if !applyNodeMeta(n, sn) {
		t.Fatal("nothing applied")
	}
	if applyNodeMeta(n, sn) {
		t.Error("applied twice")
	}
	if n.Labels[LabelActiveMaintenance] != "passthrough" || n.Annotations[AnnotationUpcomingMaintenance] == "" ||
		!hasTaint(n, TaintMaintenanceWindowStarted) || hasTaint(n, TaintImpendingTermination) || !hasTaint(n, taintGPU) {
		t.Errorf("after perform-maintenance: %+v %+v", n.ObjectMeta, n.Spec.Taints)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == TaintMaintenanceWindowStarted && taint.Effect != corev1.TaintEffectPreferNoSchedule {
			t.Errorf("window-started taint effect %s", taint.Effect)
		}
	}
	sn.maintenance = nil
	if !applyNodeMeta(n, sn) {
		t.Fatal("nothing cleared")
	}
	if len(n.Labels) != 0 || len(n.Annotations) != 0 || len(n.Spec.Taints) != 1 {
		t.Errorf("after maintenance: %+v %+v", n.ObjectMeta, n.Spec.Taints)
	}
}

// maintenanceSignals is what the exporter reads of a node's maintenance, one line per state.
func maintenanceSignals(n *corev1.Node) string {
	status := ""
	if v := n.Annotations[AnnotationUpcomingMaintenance]; v != "" {
		var doc struct {
			Status        string `json:"maintenance_status"`
			CanReschedule string `json:"can_reschedule"`
		}
		if err := json.Unmarshal([]byte(v), &doc); err != nil {
			status = "unreadable"
		} else {
			status = doc.Status + "/" + doc.CanReschedule
		}
	}
	return fmt.Sprintf("upcoming=%s state=%s window-started=%t terminating=%t", status, n.Labels[LabelActiveMaintenance],
		hasTaint(n, TaintMaintenanceWindowStarted), hasTerminationTaint(n))
}

// TestDriverPlaysFieldSignals runs reschedulable maintenance started on request against the real API server and
// watches GKE's maintenance handler's annotation, the passthrough state and the window-started taint come and go.
func TestDriverPlaysFieldSignals(t *testing.T) {
	api, d, _, _ := startDriver(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke: {sequence: documented, maintenanceStartDelay: 300ms, workloadEviction: 300ms, systemEviction: 200ms, hostMaintenance: 300ms}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 1}
  - {name: v5e, machineType: ct5lp-hightpu-4t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 4x4, chipsPerNode: 4}, nodes: 4}
events:
  - {at: 0s, maintenance: {nodePool: l4, windowStartsIn: 72h, canReschedule: true, reasons: [PLANNED_UPDATE]}}
`)
	node := d.sc.NodeNames("l4")[0]
	var mu sync.Mutex
	var seen []string
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Name == node {
			mu.Lock()
			defer mu.Unlock()
			if s := maintenanceSignals(n); len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, n any) { record(n) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })

	testenv.Eventually(t, 30*time.Second, "annotation written days ahead", func() error {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := maintenanceSignals(n); got != "upcoming=PENDING/true state= window-started=false terminating=false" {
			return fmt.Errorf("signals %s", got)
		}
		return nil
	})
	if err := updateNode(ctx, api.Client, node, func(n *corev1.Node) bool {
		n.Labels[LabelPerformMaintenance] = "true"
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"upcoming=PENDING/true state= window-started=false terminating=false",
		"upcoming=PENDING/true state=passthrough window-started=true terminating=false",
		"upcoming=ONGOING/true state=ONGOING window-started=true terminating=true",
		"upcoming=ONGOING/true state=terminating window-started=true terminating=true",
		"upcoming= state= window-started=false terminating=false",
	}
	testenv.Eventually(t, 30*time.Second, "maintenance played through", func() error {
		mu.Lock()
		defer mu.Unlock()
		got := seen
		if len(got) > 0 && got[0] == want[len(want)-1] {
			got = got[1:] // registered before the announcement
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("states seen %q, want %q", seen, want)
		}
		return nil
	})

	// The 4x4 v5e pool is one slice of four hosts, labelled as GKE labels it.
	for _, name := range d.sc.NodeNames("v5e") {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[LabelTPUTopology] != "4x4" || n.Labels["node.kubernetes.io/instance-type"] != "ct5lp-hightpu-4t" {
			t.Errorf("slice node %s labels %v", name, n.Labels)
		}
	}
	if hosts := d.sc.Pool("v5e").SliceHosts(); hosts != 4 || len(d.sc.NodeNames("v5e")) != hosts {
		t.Errorf("v5e slice: %d hosts, %d nodes", hosts, len(d.sc.NodeNames("v5e")))
	}
}
