package driver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// gpuScenario has an A4 pool whose node 0 loses a GPU (Xid 79, with companions, announced by GKE 3 s later) and
// whose node 1 has a double-bit ECC error (Xid 48, never announced), and a pool of two topology blocks whose second
// block has an Xid 45 storm, and a lone A3 node whose Xid 79 lingers 3 s past its repair.
const gpuScenario = `
cluster: {project: sim-project, location: us-central1, name: sim}
gke:
  failureRepair: 2s
  reportOperation: 500ms
  workloadEviction: 500ms
  xidDetection: 200ms
  xidHeartbeat: 1s
  field: {labelConsumed: 100ms, passthrough: 200ms, windowRewritten: 300ms, windowStartedTaint: 400ms, notReady: 600ms}
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 2}
  - {name: a3, machineType: a3-ultragpu-8g, accelerator: nvidia-h200-141gb, acceleratorCount: 8, nodes: 4, topology: {nodesPerBlock: 2}}
  - {name: lingering, machineType: a3-ultragpu-8g, accelerator: nvidia-h200-141gb, acceleratorCount: 8, nodes: 1}
events:
  - at: 0s
    gpuFault:
      nodePool: a4
      nodes: [0]
      xid: 79
      gpu: 2
      companions: [{xid: 154, after: 500ms}, {xid: 45, gpus: [3], after: 500ms}]
      notice: {after: 3s}
  - {at: 0s, gpuFault: {nodePool: a4, nodes: [1], xid: 48, gpu: 5, rowRemapFailure: true}}
  - {at: 0s, gpuFault: {nodePool: a3, block: 1, xid: 45}}
  - {at: 0s, gpuFault: {nodePool: lingering, xid: 79, companions: [], lingers: 3s}}
`

// lastXid scrapes the node's dcgm-exporter, parses the exposition as Prometheus does and returns
// DCGM_FI_DEV_XID_ERRORS of the GPU, checking that its err_code says the same.
func lastXid(t *testing.T, d *Driver, node string, gpu int) (int, error) {
	t.Helper()
	return dcgmValue(t, d, node, "DCGM_FI_DEV_XID_ERRORS", gpu)
}

// dcgmValue scrapes the node's dcgm-exporter and returns the GPU's value of a metric.
func dcgmValue(t *testing.T, d *Driver, node, metric string, gpu int) (int, error) {
	t.Helper()
	for _, n := range d.Nodes() {
		if n.Name != node || n.DCGM == nil {
			continue
		}
		srv := httptest.NewServer(n.DCGM)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("dcgm-exporter of %s answered %s", node, resp.Status)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("dcgm-exporter of %s: the exposition does not parse: %v", node, err)
		}
		for _, m := range families[metric].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["gpu"] != strconv.Itoa(gpu) {
				continue
			}
			v := int(m.GetGauge().GetValue())
			if metric == "DCGM_FI_DEV_XID_ERRORS" && l["err_code"] != strconv.Itoa(v) || l["Hostname"] != node {
				t.Errorf("%s %v = %d: err_code or Hostname do not match", metric, l, v)
			}
			return v, nil
		}
		t.Fatalf("dcgm-exporter of %s has no %s for GPU %d", node, metric, gpu)
	}
	t.Fatalf("no GPU node %s", node)
	return 0, nil
}

// xidEvents are the device plugin's Xid Events on the node, as "message xN".
func xidEvents(t *testing.T, api *testenv.APIServer, node string) map[string]int32 {
	t.Helper()
	list, err := api.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + node + ",reason=" + xidEventReason})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Type != corev1.EventTypeWarning || e.Source.Component != devicePluginName || e.InvolvedObject.Kind != "Node" {
			t.Errorf("Xid Event %s: type %s, source %+v, object %+v", e.Name, e.Type, e.Source, e.InvolvedObject)
		}
		out[e.Message] += e.Count
	}
	return out
}

// gpuSignals is what a GPU fault changes on a node: the condition (its reason and whether it names the current
// boot), the allocatable GPUs, and the maintenance announced.
func gpuSignals(n *corev1.Node) string {
	cond := "none"
	if c := findCondition(n, gke.ConditionXidCriticalError); c != nil {
		cond = fmt.Sprintf("%s/%s/current-boot=%t", c.Status, c.Reason, c.Message == n.Status.NodeInfo.BootID)
	}
	gpus := n.Status.Allocatable[resourceGPU]
	return fmt.Sprintf("xid=%s allocatable=%d scheduled=%t ready=%t", cond, gpus.Value(),
		n.Labels[LabelScheduledMaintenance] != "", nodeReady(n))
}

func TestDriverPlaysGPUFault(t *testing.T) {
	api, d, _, _ := startDriver(t, gpuScenario)
	ctx := context.Background()
	faulty, ecc := d.sc.NodeName("a4", 0), d.sc.NodeName("a4", 1)
	h := &history{states: map[string][]string{}}
	watchNodes(t, api, func(n *corev1.Node) { h.recordAs(n.Name, gpuSignals(n)) })
	const wait = 30 * time.Second
	get := func(name string) *corev1.Node {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	firstBoot := get(faulty).Status.NodeInfo.BootID
	if firstBoot == "" || firstBoot == get(ecc).Status.NodeInfo.BootID {
		t.Fatalf("boot IDs %q and %q: want one of its own per node", firstBoot, get(ecc).Status.NodeInfo.BootID)
	}

	t.Run("condition and Event of the fault, before GKE's notice", func(t *testing.T) {
		testenv.Eventually(t, wait, "condition set in the current boot, then the notice", func() error {
			return h.saw(faulty,
				"xid=none allocatable=8 scheduled=false ready=true",
				`xid=True/{"79":true}/current-boot=true allocatable=8 scheduled=false ready=true`,
				`xid=True/{"79":true}/current-boot=true allocatable=8 scheduled=true ready=true`)
		})
		c := findCondition(get(faulty), gke.ConditionXidCriticalError)
		if c.Message != firstBoot {
			t.Errorf("condition message %q, want the boot ID %q", c.Message, firstBoot)
		}
		testenv.Eventually(t, wait, "Warning Events of the fault and its companions", func() error {
			got := xidEvents(t, api, faulty)
			for msg, want := range map[string]int32{"Caught XID error, XID=79": 1, "Caught XID error, XID=154": 8, "Caught XID error, XID=45": 1} {
				if got[msg] != want {
					return fmt.Errorf("events %v: want %q %d times", got, msg, want)
				}
			}
			return nil
		})
		testenv.Eventually(t, wait, "heartbeat refreshed", func() error {
			c := findCondition(get(faulty), gke.ConditionXidCriticalError)
			if c == nil || !c.LastHeartbeatTime.After(c.LastTransitionTime.Time) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	})

	t.Run("GKE's notice as measured in the field", func(t *testing.T) {
		n := get(faulty)
		upcoming, err := gke.ParseUpcomingMaintenance(n.Annotations[AnnotationUpcomingMaintenance])
		if err != nil {
			t.Fatal(err)
		}
		if upcoming.JoinedReasons() != "FAILURE_GPU,FAILURE_GPU_XID" || upcoming.CanReschedule != gke.CanRescheduleTrue ||
			time.Until(upcoming.WindowStart) < 6*24*time.Hour {
			t.Errorf("notice %+v: want FAILURE_GPU_XID, FAILURE_GPU, reschedulable, a week out", upcoming)
		}
		if md := metadataValue(t, d, faulty, "instance/upcoming-maintenance"); !strings.Contains(md, "FAILURE_GPU_XID") {
			t.Errorf("metadata server: %s", md)
		}
		// Announced no earlier than the scenario's 3 s after the fault at the story's start (the window start is
		// whole seconds, a week from the announcement).
		if announced := upcoming.WindowStart.Add(-7 * 24 * time.Hour); announced.Before(d.clock.start.Add(2 * time.Second)) {
			t.Errorf("notice announced at %s, %s after the fault; the scenario says 3s", announced, announced.Sub(d.clock.start))
		}
		if get(ecc).Labels[LabelScheduledMaintenance] != "" {
			t.Error("a fault without a notice in the scenario was announced")
		}
	})

	t.Run("Xid 48 makes its GPU unhealthy", func(t *testing.T) {
		testenv.Eventually(t, wait, "one GPU fewer allocatable", func() error {
			return h.saw(ecc, `xid=True/{"48":true}/current-boot=true allocatable=7 scheduled=false ready=true`)
		})
		if c := get(ecc).Status.Capacity[resourceGPU]; c.Value() != 8 {
			t.Errorf("capacity %d, want 8", c.Value())
		}
	})

	t.Run("dcgm-exporter keeps the last Xid", func(t *testing.T) {
		for gpu, want := range map[int]int{2: 154, 3: 45, 0: 154} {
			if got, err := lastXid(t, d, faulty, gpu); err != nil || got != want {
				t.Errorf("GPU %d: last Xid %d (%v), want %d", gpu, got, err, want)
			}
		}
		if got, _ := lastXid(t, d, ecc, 5); got != 48 {
			t.Errorf("ECC node GPU 5: last Xid %d, want 48", got)
		}
		for gpu, want := range map[int]int{5: 1, 4: 0} {
			if got, err := dcgmValue(t, d, ecc, "DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu); err != nil || got != want {
				t.Errorf("ECC node GPU %d: row remap failure %d (%v), want %d", gpu, got, err, want)
			}
		}
		if got, _ := dcgmValue(t, d, faulty, "DCGM_FI_DEV_ROW_REMAP_FAILURE", 2); got != 0 {
			t.Errorf("Xid 79 without a remap failure: DCGM_FI_DEV_ROW_REMAP_FAILURE %d", got)
		}
	})

	t.Run("repair gives a new boot and removes the condition", func(t *testing.T) {
		if err := updateNode(ctx, api.Client, faulty, func(n *corev1.Node) bool {
			n.Labels[LabelPerformMaintenance] = "true"
			return true
		}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, wait, "host repaired", func() error {
			return h.saw(faulty,
				`xid=True/{"79":true}/current-boot=true allocatable=8 scheduled=true ready=false`,
				"xid=none allocatable=8 scheduled=false ready=true")
		})
		if boot := get(faulty).Status.NodeInfo.BootID; boot == firstBoot || boot == "" {
			t.Errorf("boot ID after the repair %q, want a new one (was %q)", boot, firstBoot)
		}
		if got, err := lastXid(t, d, faulty, 2); err != nil || got != 0 {
			t.Errorf("dcgm-exporter after the repair: last Xid %d (%v), want 0 from its new pod", got, err)
		}
		if c := findCondition(get(ecc), gke.ConditionXidCriticalError); c == nil {
			t.Error("the other node's condition went with the repair")
		}
	})

	t.Run("a lingering fault shows past the repair, then goes", func(t *testing.T) {
		node := d.sc.NodeName("lingering", 0)
		before := get(node).Status.NodeInfo.BootID
		testenv.Eventually(t, wait, "fault seen", func() error {
			return h.saw(node, `xid=True/{"79":true}/current-boot=true allocatable=8 scheduled=false ready=true`)
		})
		if err := updateNode(ctx, api.Client, node, func(n *corev1.Node) bool {
			n.Labels[gke.LabelFaultBehavior] = string(gke.FaultXID)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, wait, "back in a new boot with the last boot's fault showing, then without it", func() error {
			return h.saw(node,
				`xid=True/{"79":true}/current-boot=false allocatable=8 scheduled=false ready=true`,
				"xid=none allocatable=8 scheduled=false ready=true")
		})
		if boot := get(node).Status.NodeInfo.BootID; boot == before {
			t.Errorf("boot ID %q unchanged by the repair", boot)
		}
		if got, err := lastXid(t, d, node, 0); err != nil || got != 0 {
			t.Errorf("dcgm-exporter once the fault stopped lingering: last Xid %d (%v), want 0", got, err)
		}
	})

	t.Run("Xid 45 storm across one block", func(t *testing.T) {
		nodes := d.sc.NodeNames("a3")
		block := func(i int) string { return get(nodes[i]).Labels[gke.LabelTopologyBlock] }
		if block(2) == "" || block(2) != block(3) || block(0) != block(1) || block(0) == block(2) {
			t.Fatalf("blocks %q %q %q %q: want nodes 0-1 and 2-3 in two blocks", block(0), block(1), block(2), block(3))
		}
		for i, node := range nodes {
			want := 0
			if i >= 2 {
				want = 45
			}
			testenv.Eventually(t, wait, "Xids of "+node, func() error {
				events := xidEvents(t, api, node)
				if got, err := lastXid(t, d, node, 0); err != nil || got != want {
					return fmt.Errorf("last Xid %d (%v), want %d", got, err, want)
				}
				if (want != 0) != (events["Caught XID error, XID=45"] == 1) || len(events) > 1 {
					return fmt.Errorf("events %v", events)
				}
				return nil
			})
			if c := findCondition(get(node), gke.ConditionXidCriticalError); c != nil {
				t.Errorf("node %s: Xid 45 is no critical Xid, yet condition %+v", node, c)
			}
		}
	})
}
