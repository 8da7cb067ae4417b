package nodes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// gkeSeries are the families the golden files cover.
var gkeSeries = []string{
	"gke_node_info", "gke_node_scheduled_maintenance_timestamp_seconds", "gke_node_maintenance_state",
	"gke_node_impending_termination", "gke_node_perform_maintenance_requested", "gke_node_unschedulable",
	"gke_node_opportunistic_maintenance_triggered", "gke_node_opportunistic_maintenance_disabled",
	"gke_node_upcoming_maintenance_info", "gke_node_upcoming_maintenance_window_start_timestamp_seconds",
	"gke_node_upcoming_maintenance_window_end_timestamp_seconds",
	"gke_node_upcoming_maintenance_latest_window_start_timestamp_seconds", "gke_node_maintenance_window_started",
	"gke_node_tpu_slice_hosts", "gke_node_report_and_replace_status", "gke_disruption_node_label_parse_errors_total",
	"gke_node_gpu_xid_critical", "gke_node_gpu_xid_critical_since_timestamp_seconds", "gke_node_gpus_unhealthy",
	"gke_node_gke_operation", "gke_node_termination_timestamp_seconds",
}

// exporter runs the node collector behind the real /metrics handler.
type exporter struct {
	t         *testing.T
	collector *Collector
	url       string
}

func startExporter(t *testing.T, client kubernetes.Interface, opts ...Option) *exporter {
	t.Helper()
	e := runExporter(t, client, nil, opts...)
	testenv.Eventually(t, 30*time.Second, "initial node list sync", func() error {
		if !e.collector.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return e
}

// runExporter starts the collector without waiting for its sync; beforeEvent, if not nil, runs before the handler
// applies each event.
func runExporter(t *testing.T, client kubernetes.Interface, beforeEvent func(), opts ...Option) *exporter {
	t.Helper()
	logger := promslog.NewNopLogger()
	reg := prometheus.NewRegistry()
	c, err := New(logger, client, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.beforeEvent = beforeEvent
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	srv := httptest.NewServer(collector.NewSet(logger, reg, map[string]collector.Collector{"nodes": c}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return &exporter{t: t, collector: c, url: srv.URL}
}

// waitFor polls /metrics until the named families equal want.
func (e *exporter) waitFor(step, want string, names ...string) {
	e.t.Helper()
	if len(names) == 0 {
		names = gkeSeries
	}
	testenv.Eventually(e.t, 30*time.Second, step, func() error {
		return testutil.ScrapeAndCompare(e.url, strings.NewReader(want), names...)
	})
}

func (e *exporter) scrape() string {
	e.t.Helper()
	resp, err := http.Get(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// createNode creates n, then writes its status, which the API server takes only through the status subresource.
func createNode(t *testing.T, client kubernetes.Interface, n *v1.Node) {
	t.Helper()
	created, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", n.Name, err)
	}
	if reflect.DeepEqual(n.Status, v1.NodeStatus{}) {
		return
	}
	created.Status = n.Status
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status of node %s: %v", n.Name, err)
	}
}

// updateStatus changes a node's status as the kubelet or a device plugin does.
func updateStatus(t *testing.T, client kubernetes.Interface, name string, change func(*v1.NodeStatus)) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(&n.Status)
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the status of node %s: %v", name, err)
	}
}

func patchNode(t *testing.T, client kubernetes.Interface, name, patch string) {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching node %s: %v", name, err)
	}
}

// gkeNodes is a small GKE fleet in every state the series describe.
func gkeNodes() []*v1.Node {
	a3 := node("gke-train-a3-0", map[string]string{
		gke.LabelNodePool: "a3-train", gke.LabelZone: "us-central1-a", gke.LabelInstanceType: "a3-highgpu-8g",
		gke.LabelAccelerator: "nvidia-h100-80gb", gke.LabelScheduledMaintenanceTime: "1764547200",
		"kubernetes.io/hostname": "gke-train-a3-0", gke.LabelTopologyBlock: "b-7f3a", gke.LabelTopologySubblock: "sb-2c41",
		gke.LabelTopologyHost: "h-91d0",
	})
	a3.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: `{"can_reschedule":"true",` +
		`"latest_window_start_time":"2025-12-08T00:00:00Z","maintenance_status":"PENDING","type":"SCHEDULED",` +
		`"window_end_time":"2025-12-01T04:00:00Z","window_start_time":"2025-12-01T00:00:00Z",` +
		`"maintenance_reasons":["PLANNED_UPDATE"]}`}
	// After perform-maintenance, as seen in the field.
	passthrough := node("gke-train-a3-1", map[string]string{
		gke.LabelNodePool: "a3-train", gke.LabelZone: "us-central1-a", gke.LabelInstanceType: "a3-highgpu-8g",
		gke.LabelAccelerator: "nvidia-h100-80gb", gke.LabelActiveNodeMaintenance: "passthrough",
		gke.LabelPerformMaintenance: "true",
	})
	passthrough.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED",` +
		`"maintenance_status":"ONGOING","can_reschedule":false,"maintenance_reasons":["FAILURE_GPU","PLANNED_UPDATE"]}`}
	passthrough.Spec.Taints = []v1.Taint{{Key: gke.TaintMaintenanceWindowStarted, Effect: v1.TaintEffectPreferNoSchedule}}
	// TPU nodes whose slice size cannot be known: a machine type of no known family, and no topology label.
	tpuUnknown := node("gke-tpu-future-0", map[string]string{
		gke.LabelNodePool: "tpu-future", gke.LabelInstanceType: "ct9x-hightpu-4t", gke.LabelTPUTopology: "4x4",
		gke.LabelTPUAccelerator: "tpu-future",
	})
	tpuNoTopology := node("gke-tpu-v5e-0", map[string]string{
		gke.LabelNodePool: "tpu-v5e", gke.LabelInstanceType: "ct5lp-hightpu-4t", gke.LabelTPUAccelerator: "tpu-v5-lite-podslice",
	})
	tpu := node("gke-tpu-v5p-0", map[string]string{
		gke.LabelNodePool: "tpu-v5p", gke.LabelZone: "us-east5-a", gke.LabelInstanceType: "ct5p-hightpu-4t",
		gke.LabelTPUAccelerator: "tpu-v5p-slice", gke.LabelTPUTopology: "2x2x2", gke.LabelActiveNodeMaintenance: "ONGOING",
	})
	tpu.Spec.Taints = []v1.Taint{{Key: gke.TaintImpendingTermination, Effect: v1.TaintEffectNoSchedule}}
	spot := node("gke-spot-l4-0", map[string]string{
		gke.LabelNodePool: "l4-spot", gke.LabelZone: "us-central1-b", gke.LabelInstanceType: "g2-standard-8",
		gke.LabelAccelerator: "nvidia-l4", gke.LabelSpot: "true", gke.LabelPerformMaintenance: "true",
		gke.LabelOpportunisticDisable: "true",
	})
	spot.Annotations = map[string]string{gke.AnnotationMaintenanceState: "opportunistic-triggered: true"}
	cordoned := node("gke-serve-l4-0", map[string]string{
		gke.LabelNodePool: "l4-serve", gke.LabelProvisioning: "standard", gke.LabelScheduledMaintenanceTime: "soon",
	})
	cordoned.Spec.Unschedulable = true
	cordoned.Annotations = map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED",`}
	// Its host reported as faulty; GKE's error spelled as the page also writes it.
	reported := node("gke-train-a4-0", map[string]string{
		gke.LabelNodePool: "a4-train", gke.LabelZone: "us-central1-b", gke.LabelInstanceType: "a4-highgpu-8g",
		gke.LabelAccelerator: "nvidia-b200", gke.LabelReportAndReplaceStatus: "ERROR",
		gke.LabelReportAndReplaceOperation: "operation-1700000000000-abc",
	})
	// A GPU fault in this boot, one GPU marked unhealthy; and a fault left from before the last boot, all healthy.
	faulty := gpuFault(withDevices(node("gke-train-a4-1", map[string]string{
		gke.LabelNodePool: "a4-train", gke.LabelZone: "us-central1-b", gke.LabelInstanceType: "a4-highgpu-8g",
		gke.LabelAccelerator: "nvidia-b200",
	}), map[string][2]string{gke.ResourceGPU: {"8", "7"}}), "0f1e2d3c", `{"79":true,"48":true}`, "0f1e2d3c")
	gpuFault(withDevices(a3, map[string][2]string{gke.ResourceGPU: {"8", "8"}}), "a3-boot-2", `{"79":true}`, "a3-boot-1")
	withDevices(tpu, map[string][2]string{gke.ResourceTPU: {"4", "3"}})
	// A node GKE drains for a node pool upgrade, as its surge upgrade marks it.
	upgrading := node("gke-infer-l4-0", map[string]string{
		gke.LabelNodePool: "l4-infer", gke.LabelZone: "us-central1-c", gke.LabelInstanceType: "g2-standard-8",
		gke.LabelAccelerator: "nvidia-l4", gke.LabelOperationType: "drain",
	})
	upgrading.Annotations = map[string]string{gke.AnnotationCurrentOperation: `{"operation_type":"UPGRADE_NODES","lock_end_timestamp":"2025-12-01T01:00:00Z"}`}
	upgrading.Spec.Unschedulable = true
	// A flex-start VM with its planned end.
	flex := node("gke-flex-a3-0", map[string]string{
		gke.LabelNodePool: "a3-flex", gke.LabelZone: "us-central1-a", gke.LabelInstanceType: "a3-highgpu-8g",
		gke.LabelAccelerator: "nvidia-h100-80gb", "cloud.google.com/gke-flex-start": "true",
	})
	flex.Annotations = map[string]string{gke.AnnotationMachineTerminationDatetime: "2025-12-07T12:00:00Z"}
	return []*v1.Node{a3, passthrough, tpu, tpuUnknown, tpuNoTopology, spot, cordoned, reported, faulty, upgrading, flex}
}

func TestGoldenSeries(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	for _, n := range gkeNodes() {
		createNode(t, api.Client, n)
	}
	e := startExporter(t, api.Client)
	golden, err := os.ReadFile("testdata/nodes.prom")
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("series of the GKE fleet", string(golden))

	// The golden file is valid exposition as promtool sees it.
	check := exec.Command(testenv.Binary(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(string(golden))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the golden file: %v\n%s", err, out)
	}
	// And so is what the exporter serves, self-monitoring included.
	check = exec.Command(testenv.Binary(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(e.scrape())
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on a scrape: %v\n%s", err, out)
	}
}

func TestSeriesFollowNodes(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	createNode(t, api.Client, node("n1", map[string]string{gke.LabelNodePool: "p"}))
	e := startExporter(t, api.Client)
	info := `# HELP gke_node_info GKE node metadata: node pool, zone, machine type, accelerators, provisioning model and physical host.
# TYPE gke_node_info gauge
gke_node_info{accelerator="",block="",host="",machine_type="",node="n1",node_pool="p",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1
`
	scheduled := `# HELP gke_node_scheduled_maintenance_timestamp_seconds When host maintenance is scheduled to start, from the node label cloud.google.com/scheduled-maintenance-time.
# TYPE gke_node_scheduled_maintenance_timestamp_seconds gauge
gke_node_scheduled_maintenance_timestamp_seconds{node="n1"} %d
`
	names := []string{"gke_node_info", "gke_node_scheduled_maintenance_timestamp_seconds", "gke_node_maintenance_state"}
	e.waitFor("info series only", info, names...)

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"1764547200"}}}`)
	e.waitFor("label added", info+fmt.Sprintf(scheduled, 1764547200), names...)

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"1764633600","cloud.google.com/active-node-maintenance":"ONGOING"}}}`)
	e.waitFor("label changed", info+fmt.Sprintf(scheduled, 1764633600)+`# HELP gke_node_maintenance_state The node is in host maintenance, from the label cloud.google.com/active-node-maintenance.
# TYPE gke_node_maintenance_state gauge
gke_node_maintenance_state{node="n1",state="ongoing"} 1
`, names...)

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":null,"cloud.google.com/active-node-maintenance":null}}}`)
	e.waitFor("labels removed", info, names...)

	// A bad value is counted once, however often the node changes while it stays.
	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"cloud.google.com/scheduled-maintenance-time":"not-a-time"}}}`)
	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"unrelated":"change"}}}`)
	e.waitFor("parse error counted once", parseErrorsText(map[string]int{gke.LabelScheduledMaintenanceTime: 1}), "gke_disruption_node_label_parse_errors_total")
	patchNode(t, api.Client, "n1", `{"metadata":{"annotations":{"node.gke.io/upcoming-maintenance":"{\"type\":"}}}`)
	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"unrelated":"again"}}}`)
	e.waitFor("annotation parse error counted once", parseErrorsText(map[string]int{gke.LabelScheduledMaintenanceTime: 1, gke.AnnotationUpcomingMaintenance: 1}), "gke_disruption_node_label_parse_errors_total")

	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("node deleted", "", names...)
}

func TestRecoversFromAPIServerRestart(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	createNode(t, api.Client, node("n1", nil))
	e := startExporter(t, api.Client)
	names := []string{"gke_node_perform_maintenance_requested"}
	e.waitFor("no request yet", "", names...)

	api.StopAPIServer()
	// While the API server is down the last known series stay.
	if !strings.Contains(e.scrape(), `node="n1"`) {
		t.Fatal("series lost while the API server was down")
	}
	api.StartAgain()

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"cloud.google.com/perform-maintenance":"true"}}}`)
	e.waitFor("change after restart", `# HELP gke_node_perform_maintenance_requested Maintenance was requested early with the label cloud.google.com/perform-maintenance=true, or by the actions service until GKE shows it under way (GKE consumes the label seconds before it shows passthrough).
# TYPE gke_node_perform_maintenance_requested gauge
gke_node_perform_maintenance_requested{node="n1"} 1
`, names...)
}

// createNodes creates count plain nodes named gke-pool-NNNN, 32 at a time.
func createNodes(t *testing.T, client kubernetes.Interface, count int) {
	t.Helper()
	errs := make(chan error, count)
	sem := make(chan struct{}, 32)
	for i := range count {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := client.CoreV1().Nodes().Create(context.Background(),
				node(fmt.Sprintf("gke-pool-%04d", i), map[string]string{gke.LabelNodePool: "pool"}), metav1.CreateOptions{})
			errs <- err
		}()
	}
	for range count {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestThousandNodes(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	const count = 1000
	createNodes(t, api.Client, count)
	e := startExporter(t, api.Client)
	testenv.Eventually(t, 30*time.Second, "all nodes exported", func() error {
		if got := strings.Count(e.scrape(), "gke_node_info{"); got != count {
			return fmt.Errorf("%d of %d nodes exported", got, count)
		}
		return nil
	})
}

// TestReadyOnlyWhenEveryNodeIsStored holds the event handler while the informer reads the initial list: the
// collector must not call itself synced, nor serve a partial cluster, until the handler has stored every node.
func TestReadyOnlyWhenEveryNodeIsStored(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	const count = 300
	createNodes(t, api.Client, count)
	gate := make(chan struct{})
	e := runExporter(t, api.Client, func() { <-gate })
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the collector stops: a held handler would keep it from stopping

	testenv.Eventually(t, 30*time.Second, "informer has read the initial list", func() error {
		if !e.collector.informer.HasSynced() {
			return fmt.Errorf("informer not synced")
		}
		return nil
	})
	if e.collector.HasSynced() {
		t.Fatal("synced while the handler has stored no node")
	}
	if got := e.scrape(); !strings.Contains(got, `gke_disruption_collector_success{collector="nodes"} 0`) || strings.Contains(got, "gke_node_info{") {
		t.Fatalf("scrape before the handler stored the nodes:\n%s", got)
	}

	release()
	testenv.Eventually(t, 30*time.Second, "handler has stored the initial list", func() error {
		if !e.collector.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	if got := strings.Count(e.scrape(), "gke_node_info{"); got != count {
		t.Fatalf("synced with %d of %d nodes stored", got, count)
	}
}

// TestWatchTroubleIsVisible stops the API server: errors are counted, and once list/watch has failed for longer
// than the failure grace the collector reports failure while serving the last known series; it recovers when the
// API server is back.
func TestWatchTroubleIsVisible(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	createNode(t, api.Client, node("n1", nil))
	e := startExporter(t, api.Client, WithFailureGrace(500*time.Millisecond))
	success := func(v int) string {
		return fmt.Sprintf(`# HELP gke_disruption_collector_success Whether a collector's part of the scrape succeeded.
# TYPE gke_disruption_collector_success gauge
gke_disruption_collector_success{collector="nodes"} %d
`, v)
	}
	e.waitFor("healthy", success(1), "gke_disruption_collector_success")
	if !strings.Contains(e.scrape(), `gke_disruption_watch_errors_total{resource="nodes"} 0`) {
		t.Fatalf("watch errors not exported as 0:\n%s", e.scrape())
	}

	api.StopAPIServer()
	e.waitFor("failing after the grace", success(0), "gke_disruption_collector_success")
	got := e.scrape()
	if !strings.Contains(got, `gke_node_info{`) {
		t.Errorf("last known series dropped while failing:\n%s", got)
	}
	if strings.Contains(got, `gke_disruption_watch_errors_total{resource="nodes"} 0`) {
		t.Errorf("watch errors not counted:\n%s", got)
	}

	api.StartAgain()
	e.waitFor("healthy again", success(1), "gke_disruption_collector_success")
	patchNode(t, api.Client, "n1", `{"spec":{"unschedulable":true}}`)
	e.waitFor("watching again", `# HELP gke_node_unschedulable The node is cordoned (spec.unschedulable).
# TYPE gke_node_unschedulable gauge
gke_node_unschedulable{node="n1"} 1
`, "gke_node_unschedulable")
}

// TestConvergenceAfterAPIServerRestart measures how the collector converges when the API server restarts and the
// cluster changes right after (a node deleted, one created, one moved to another pool): how long until the series
// are true again, and how long stale series were served with success 1 (never longer than the failure grace). It
// logs both.
func TestConvergenceAfterAPIServerRestart(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	pool := func(name string) map[string]string { return map[string]string{"cloud.google.com/gke-nodepool": name} }
	createNode(t, api.Client, node("n1", pool("a")))
	createNode(t, api.Client, node("n2", pool("a")))
	e := startExporter(t, api.Client)
	testenv.Eventually(t, 30*time.Second, "both nodes", func() error {
		if body := e.scrape(); !strings.Contains(body, `node="n1"`) || !strings.Contains(body, `node="n2"`) {
			return fmt.Errorf("nodes missing")
		}
		return nil
	})

	api.StopAPIServer()
	api.StartAgain()
	restarted := time.Now()
	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createNode(t, api.Client, node("n3", pool("b")))
	patchNode(t, api.Client, "n2", `{"metadata":{"labels":{"cloud.google.com/gke-nodepool":"b"}}}`)
	changed := time.Now()

	truthful := func(body string) bool {
		return !strings.Contains(body, `node="n1"`) && strings.Contains(body, `node="n3"`) &&
			strings.Contains(body, `node="n2",node_pool="b"`)
	}
	var staleWithSuccess time.Duration
	var lastScrape time.Time
	testenv.Eventually(t, 120*time.Second, "series true after the restart", func() error {
		now := time.Now()
		body := e.scrape()
		if truthful(body) {
			return nil
		}
		if strings.Contains(body, `gke_disruption_collector_success{collector="nodes"} 1`) && !lastScrape.IsZero() {
			staleWithSuccess += now.Sub(lastScrape)
		}
		lastScrape = now
		return fmt.Errorf("stale series")
	})
	converged := time.Since(changed)
	t.Logf("API server restart: series true %v after the changes (%v after the restart); stale series served with success 1 for %v",
		converged.Round(10*time.Millisecond), time.Since(restarted).Round(10*time.Millisecond), staleWithSuccess.Round(10*time.Millisecond))
	if staleWithSuccess > kube.DefaultFailureGrace {
		t.Errorf("stale series served with success 1 for %v, longer than the failure grace", staleWithSuccess)
	}
}

// TestGPUFaultSeries follows a GPU fault on a real API server as GKE's GPU device plugin and the kubelet write it:
// the condition appears, a garbled reason loses nothing else, a GPU goes unhealthy, the node reboots on a repaired
// host (the condition, left from the boot before, says nothing), and the GPU is healthy again.
func TestGPUFaultSeries(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	n := withDevices(node("a4-0", map[string]string{gke.LabelNodePool: "a4"}), map[string][2]string{gke.ResourceGPU: {"8", "8"}})
	n.Status.NodeInfo.BootID = "boot-1"
	createNode(t, api.Client, n)
	e := startExporter(t, api.Client)
	names := []string{"gke_node_info", "gke_node_gpu_xid_critical", "gke_node_gpu_xid_critical_since_timestamp_seconds",
		"gke_node_gpus_unhealthy", "gke_disruption_node_label_parse_errors_total"}
	info := `# HELP gke_node_info GKE node metadata: node pool, zone, machine type, accelerators, provisioning model and physical host.
# TYPE gke_node_info gauge
gke_node_info{accelerator="",block="",host="",machine_type="",node="a4-0",node_pool="a4",provisioning="standard",subblock="",tpu_accelerator="",tpu_topology="",zone=""} 1
`
	parseErrors := func(xid int) string {
		return parseErrorsText(map[string]int{nodeview.UnreadableXidCondition: xid})
	}
	since := `# HELP gke_node_gpu_xid_critical_since_timestamp_seconds When the node condition XidCriticalError of the current boot became True.
# TYPE gke_node_gpu_xid_critical_since_timestamp_seconds gauge
gke_node_gpu_xid_critical_since_timestamp_seconds{node="a4-0"} 1.7551638e+09
`
	xid79 := `# HELP gke_node_gpu_xid_critical A critical GPU Xid seen since boot, from the GPU device plugin's node condition XidCriticalError; absent when the condition was set in an earlier boot.
# TYPE gke_node_gpu_xid_critical gauge
gke_node_gpu_xid_critical{node="a4-0",xid="79"} 1
`
	unhealthy := `# HELP gke_node_gpus_unhealthy Accelerator devices the device plugin marked unhealthy: capacity minus allocatable of nvidia.com/gpu or google.com/tpu.
# TYPE gke_node_gpus_unhealthy gauge
gke_node_gpus_unhealthy{node="a4-0",resource="nvidia.com/gpu"} 1
`
	e.waitFor("a healthy GPU node", info+parseErrors(0), names...)

	setReason := func(reason string) {
		updateStatus(t, api.Client, "a4-0", func(s *v1.NodeStatus) {
			s.Conditions = slices.DeleteFunc(s.Conditions, func(c v1.NodeCondition) bool { return c.Type == gke.ConditionXidCriticalError })
			s.Conditions = gpuFault(&v1.Node{}, "", reason, "boot-1").Status.Conditions
		})
	}
	setReason(`{"79":true}`)
	e.waitFor("Xid 79 in this boot", info+parseErrors(0)+since+xid79, names...)

	// A garbled reason is counted once, however often the node changes while it stays, and the fault stays known.
	setReason(`{"79":tr`)
	patchNode(t, api.Client, "a4-0", `{"metadata":{"labels":{"unrelated":"change"}}}`)
	e.waitFor("garbled reason: counted, the fault's time kept", info+parseErrors(1)+since, names...)
	setReason(`{"79":true}`)
	e.waitFor("readable again", info+parseErrors(1)+since+xid79, names...)

	updateStatus(t, api.Client, "a4-0", func(s *v1.NodeStatus) { s.Allocatable[gke.ResourceGPU] = resource.MustParse("7") })
	e.waitFor("a GPU marked unhealthy", info+parseErrors(1)+since+xid79+unhealthy, names...)

	// The host repaired, the node boots again before the device plugin removes the condition of the boot before.
	updateStatus(t, api.Client, "a4-0", func(s *v1.NodeStatus) { s.NodeInfo.BootID = "boot-2" })
	e.waitFor("a new boot: the condition is stale", info+parseErrors(1)+unhealthy, names...)

	updateStatus(t, api.Client, "a4-0", func(s *v1.NodeStatus) { s.Allocatable[gke.ResourceGPU] = resource.MustParse("8") })
	e.waitFor("every GPU healthy again", info+parseErrors(1), names...)
}

// GKE's own work and a planned end appear with what GKE writes on the node and end with it; values that do not
// read are counted once and lose nothing else.
func TestGKEOperationAndTerminationFollowNodes(t *testing.T) {
	t.Parallel()
	api := testenv.StartAPIServer(t)
	createNode(t, api.Client, node("n1", map[string]string{gke.LabelNodePool: "p"}))
	e := startExporter(t, api.Client)
	names := []string{"gke_node_gke_operation", "gke_node_termination_timestamp_seconds"}
	operation := `# HELP gke_node_gke_operation GKE's own work on the node (an upgrade, a repair, its drain), from the label operation.gke.io/type and the annotation gke-current-operation; absent when none.
# TYPE gke_node_gke_operation gauge
`
	termination := `# HELP gke_node_termination_timestamp_seconds A planned end of the node's VM other than maintenance: reason max_run_duration from the annotation node.gke.io/machine-termination-datetime (flex-start, queued provisioning).
# TYPE gke_node_termination_timestamp_seconds gauge
gke_node_termination_timestamp_seconds{node="n1",reason="max_run_duration"} %d
`
	e.waitFor("nothing of GKE's", "", names...)

	patchNode(t, api.Client, "n1", `{"metadata":{"annotations":{"gke-current-operation":"{\"operation_type\":\"AUTO_REPAIR_NODES\"}","node.gke.io/machine-termination-datetime":"2026-12-09T10:00:00Z"}}}`)
	e.waitFor("a repair and a planned end", operation+`gke_node_gke_operation{node="n1",operation_type="auto_repair_nodes"} 1
`+fmt.Sprintf(termination, 1796810400), names...)

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"operation.gke.io/type":"drain"},"annotations":{"gke-current-operation":"{\"operation_type\":\"UPGRADE_NODES\"}","node.gke.io/machine-termination-datetime":"2026-12-10T10:00:00Z"}}}`)
	e.waitFor("an upgrade drains it, the end moved", operation+`gke_node_gke_operation{node="n1",operation_type="drain"} 1
gke_node_gke_operation{node="n1",operation_type="upgrade_nodes"} 1
`+fmt.Sprintf(termination, 1796896800), names...)

	// Garbled values: the label's drain stays; the planned end is gone rather than guessed; each counted once.
	patchNode(t, api.Client, "n1", `{"metadata":{"annotations":{"gke-current-operation":"[oops","node.gke.io/machine-termination-datetime":"next week"}}}`)
	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"unrelated":"change"}}}`)
	e.waitFor("garbled values", operation+`gke_node_gke_operation{node="n1",operation_type="drain"} 1
`, names...)
	e.waitFor("garbled values counted once", parseErrorsText(map[string]int{gke.AnnotationCurrentOperation: 1, gke.AnnotationMachineTerminationDatetime: 1}), "gke_disruption_node_label_parse_errors_total")

	patchNode(t, api.Client, "n1", `{"metadata":{"labels":{"operation.gke.io/type":null},"annotations":{"gke-current-operation":null,"node.gke.io/machine-termination-datetime":null}}}`)
	e.waitFor("GKE done", "", names...)
}

// parseErrorsText is the parse-error counter as scraped: every value the collector reads, at 0 but for counts.
func parseErrorsText(counts map[string]int) string {
	text := `# HELP gke_disruption_node_label_parse_errors_total Node label and annotation values that could not be read, counted once per value seen.
# TYPE gke_disruption_node_label_parse_errors_total counter
`
	for _, key := range []string{gke.LabelScheduledMaintenanceTime, nodeview.UnreadableXidCondition, gke.AnnotationCurrentOperation,
		gke.AnnotationMachineTerminationDatetime, gke.AnnotationUpcomingMaintenance} {
		text += fmt.Sprintf("gke_disruption_node_label_parse_errors_total{label=%q} %d\n", key, counts[key])
	}
	return text
}
