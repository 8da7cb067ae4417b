package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// fieldSignals is what the field sequence changes on a node: the request label, the announcement's status,
// can_reschedule and whether its window starts within the hour (rewritten to now) or days out, the maintenance
// state, the two taints and Ready.
func fieldSignals(n *corev1.Node) string {
	upcoming := ""
	if v := n.Annotations[AnnotationUpcomingMaintenance]; v != "" {
		var doc struct {
			Status        string    `json:"maintenance_status"`
			CanReschedule string    `json:"can_reschedule"`
			WindowStart   time.Time `json:"window_start_time"`
		}
		if err := json.Unmarshal([]byte(v), &doc); err != nil {
			upcoming = "unreadable"
		} else {
			when := "far"
			if time.Until(doc.WindowStart) < time.Hour {
				when = "now"
			}
			upcoming = doc.Status + "/" + doc.CanReschedule + "/" + when
		}
	}
	return fmt.Sprintf("perform=%s upcoming=%s state=%s window-started=%t terminating=%t ready=%t",
		n.Labels[LabelPerformMaintenance], upcoming, n.Labels[LabelActiveMaintenance],
		hasTaint(n, TaintMaintenanceWindowStarted), hasTerminationTaint(n), nodeReady(n))
}

// A GPU failure announced as GKE announced it in the field (FAILURE_* reasons, reschedulable, a week out), then
// perform-maintenance=true: GKE plays the sequence measured in the field, in order, and the metadata server says
// what the annotation says.
func TestDriverPlaysFieldSequence(t *testing.T) {
	api, d, mon, _ := startDriver(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke:
  hostMaintenance: 100ms
  failureRepair: 4s
  field: {labelConsumed: 200ms, passthrough: 600ms, windowRewritten: 1s, windowStartedTaint: 1400ms, notReady: 2s}
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 2}
workloads:
  - {name: train, namespace: training, kind: Job, nodePools: [a4], nodes: [1]}
events:
  - {at: 0s, maintenance: {nodePool: a4, nodes: [0], windowStartsIn: 168h, canReschedule: true, reasons: [FAILURE_GPU_XID, FAILURE_GPU]}}
`)
	node := d.sc.NodeNames("a4")[0]
	h := &history{states: map[string][]string{}}
	watchNodes(t, api, func(n *corev1.Node) {
		if n.Name == node {
			h.recordAs(n.Name, fieldSignals(n))
		}
	})
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "failure announced a week out", func() error {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := fieldSignals(n); got != "perform= upcoming=PENDING/true/far state= window-started=false terminating=false ready=true" {
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
	testenv.Eventually(t, 30*time.Second, "metadata server rewritten with the annotation", func() error {
		md := metadataValue(t, d, node, "instance/upcoming-maintenance")
		if !strings.Contains(md, `"maintenance_status":"ONGOING"`) || !strings.Contains(md, `"can_reschedule":"false"`) {
			return fmt.Errorf("upcoming-maintenance %s", md)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "field sequence played through", func() error {
		return h.saw(node,
			"perform=true upcoming=PENDING/true/far state= window-started=false terminating=false ready=true",
			"perform= upcoming=PENDING/true/far state= window-started=false terminating=false ready=true",
			"perform= upcoming=ONGOING/true/far state=passthrough window-started=false terminating=false ready=true",
			"perform= upcoming=ONGOING/false/now state=passthrough window-started=false terminating=false ready=true",
			"perform= upcoming=ONGOING/false/now state=passthrough window-started=true terminating=false ready=true",
			"perform= upcoming=ONGOING/false/now state=passthrough window-started=true terminating=false ready=false",
			"perform= upcoming= state= window-started=false terminating=false ready=true")
	})
	if got := metadataValue(t, d, node, "instance/upcoming-maintenance"); got != "{}" {
		t.Errorf("upcoming-maintenance after the repair: %s", got)
	}
	testenv.Eventually(t, 30*time.Second, "interruption recorded", func() error {
		if got := interruptions(t, mon, node); len(got) != 1 {
			return fmt.Errorf("interruptions %v", got)
		}
		return nil
	})
	// Only the labelled node was touched.
	other := d.sc.NodeNames("a4")[1]
	n, err := api.Client.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fieldSignals(n); got != "perform= upcoming= state= window-started=false terminating=false ready=true" {
		t.Errorf("other node: %s", got)
	}
	// The repair took failureRepair, not hostMaintenance: checked through the order above (NotReady long enough
	// to be seen) and here through the story.
	if s := d.Status(); s.Maintained != 1 {
		t.Errorf("maintained %d, want 1", s.Maintained)
	}
}

// watchNodes calls seen with every node the watch delivers, until the test ends.
func watchNodes(t *testing.T, api *testenv.APIServer, seen func(*corev1.Node)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			seen(n)
		}
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, n any) { record(n) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
}
