package driver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringpb "cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// storyScenario has a GPU pool serving a Deployment under a PodDisruptionBudget, a multi-host TPU slice running a
// training Job, a Spot pool, and a system DaemonSet everywhere. GKE's mechanics take fractions of a second.
const storyScenario = `
cluster: {project: sim-project, location: us-central1, name: sim}
timeScale: 1
gke:
  sequence: documented
  maintenanceStartDelay: 200ms
  workloadEviction: 400ms
  systemEviction: 400ms
  hostMaintenance: 600ms
  preemptionNotice: 800ms
  spotReplacement: 600ms
  podShutdown: 100ms
nodePools:
  - {name: l4-serve, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 2}
  - {name: tpu-v5p, machineType: ct5p-hightpu-4t, tpu: {accelerator: tpu-v5p-slice, topology: 2x2x2}, nodes: 2}
  - {name: spot, machineType: g2-standard-8, accelerator: nvidia-l4, spot: true, nodes: 1}
workloads:
  - {name: inference, namespace: serving, kind: Deployment, nodePools: [l4-serve], replicas: 2, pdb: {maxUnavailable: 1}}
  - {name: train, namespace: training, kind: Job, nodePools: [tpu-v5p]}
  - {name: device-plugin, namespace: kube-system, kind: DaemonSet}
events:
  - at: 0s
    maintenance: {nodePool: l4-serve, nodes: [0], windowStartsIn: 1h, canReschedule: true, reasons: [PLANNED_UPDATE]}
  - at: 3s
    maintenance: {nodePool: tpu-v5p, windowStartsIn: 2s}
  - at: 3s
    preemption: {nodePool: spot}
`

// history records every state each node was seen in, as the watch delivered them.
type history struct {
	mu     sync.Mutex
	states map[string][]string
}

func nodeState(n *corev1.Node) string {
	return fmt.Sprintf("scheduled=%t state=%s tainted=%t perform=%s ready=%t",
		n.Labels[LabelScheduledMaintenance] != "", n.Labels[LabelActiveMaintenance], hasTerminationTaint(n),
		n.Labels[LabelPerformMaintenance], nodeReady(n))
}

func (h *history) record(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	h.recordAs(n.Name, nodeState(n))
}

// recordAs records state s of node when it differs from the last one.
func (h *history) recordAs(node, s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.states[node]; len(l) == 0 || l[len(l)-1] != s {
		h.states[node] = append(l, s)
	}
}

// saw reports whether the node went through want in this order (other states may come between).
func (h *history) saw(node string, want ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.states[node]
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	if i < len(want) {
		return fmt.Errorf("node %s: states seen %q, missing %q", node, got, want[i])
	}
	return nil
}

func startDriver(t *testing.T, scenario string) (*testenv.APIServer, *Driver, *monitoring.Server, *history) {
	t.Helper()
	api := testenv.StartAPIServer(t)
	h := &history{states: map[string][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: h.record, UpdateFunc: func(_, n any) { h.record(n) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	d, mon, _ := runDriver(t, api, scenario)
	return api, d, mon, h
}

// runDriver starts a driver on api and waits until its story has started; stop ends it (the test's cleanup does
// too) and may be called more than once.
func runDriver(t *testing.T, api *testenv.APIServer, scenario string) (d *Driver, mon *monitoring.Server, stop func()) {
	t.Helper()
	sc, err := Parse([]byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	mon = monitoring.New(monitoring.Options{SamplePeriod: time.Second})
	d, err = New(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Options{Client: api.Client, Scenario: sc, Monitoring: mon})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("driver: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-d.Started():
	case err := <-done:
		t.Fatalf("driver stopped before the story started: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the driver did not register the cluster within 60s")
	}
	return d, mon, stop
}

func podsOn(t *testing.T, api *testenv.APIServer, namespace, node string) []corev1.Pod {
	t.Helper()
	pods, err := api.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func runningPods(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			n++
		}
	}
	return n
}

func metadataValue(t *testing.T, d *Driver, node, key string) string {
	t.Helper()
	for _, n := range d.Nodes() {
		if n.Name != node {
			continue
		}
		ts := httptest.NewServer(n.Metadata)
		defer ts.Close()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/computeMetadata/v1/"+key, nil)
		req.Header.Set("Metadata-Flavor", "Google")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	t.Fatalf("no node %s", node)
	return ""
}

func interruptions(t *testing.T, mon *monitoring.Server, node string) []string {
	t.Helper()
	now := time.Now()
	resp, err := mon.ListTimeSeries(context.Background(), &monitoringpb.ListTimeSeriesRequest{
		Name:     "projects/sim-project",
		Filter:   `metric.type = "kubernetes.io/node/interruption_count"`,
		Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(now.Add(-time.Hour)), EndTime: timestamppb.New(now.Add(time.Minute))},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ts := range resp.TimeSeries {
		if ts.Resource.Labels["node_name"] == node {
			out = append(out, ts.Metric.Labels["interruption_type"])
		}
	}
	return out
}

func TestDriverPlaysGKE(t *testing.T) {
	api, d, mon, h := startDriver(t, storyScenario)
	ctx := context.Background()
	sc := d.sc
	serving := sc.NodeNames("l4-serve")
	tpu := sc.NodeNames("tpu-v5p")
	spot := sc.NodeNames("spot")[0]
	const wait = 30 * time.Second

	t.Run("cluster registered", func(t *testing.T) {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, tpu[1], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{LabelNodePool: "tpu-v5p", LabelTPUTopology: "2x2x2", LabelProvisioning: "standard",
			"topology.kubernetes.io/zone": "us-central1-a", "node.kubernetes.io/instance-type": "ct5p-hightpu-4t"} {
			if n.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
			}
		}
		s, err := api.Client.CoreV1().Nodes().Get(ctx, spot, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Labels[LabelSpot] != "true" || s.Labels[LabelProvisioning] != "spot" {
			t.Errorf("spot node labels: %v", s.Labels)
		}
		testenv.Eventually(t, wait, "workload and system pods running on every node", func() error {
			for _, node := range append(slices.Clone(serving), tpu...) {
				if got := runningPods(podsOn(t, api, "", node)); got != 2 {
					return fmt.Errorf("node %s runs %d pods, want 2 (its workload and the DaemonSet)", node, got)
				}
			}
			return nil
		})
	})

	t.Run("disruption budget enforced on evictions", func(t *testing.T) {
		testenv.Eventually(t, wait, "budget allows one disruption", func() error {
			pdb, err := api.Client.PolicyV1().PodDisruptionBudgets("serving").Get(ctx, "inference", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pdb.Status.DisruptionsAllowed != 1 || pdb.Status.ObservedGeneration != pdb.Generation {
				return fmt.Errorf("status %+v", pdb.Status)
			}
			return nil
		})
		pods, err := api.Client.CoreV1().Pods("serving").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 2 {
			t.Fatalf("serving pods: %v, %v", pods, err)
		}
		evict := func(p corev1.Pod) error {
			return api.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		}
		if err := evict(pods.Items[0]); err != nil {
			t.Fatalf("first eviction: %v", err)
		}
		if err := evict(pods.Items[1]); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("second eviction at once: got %v, want 429 from the disruption budget", err)
		}
		testenv.Eventually(t, wait, "evicted pod replaced and finished", func() error {
			list, err := api.Client.CoreV1().Pods("serving").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) != 2 || runningPods(list.Items) != 2 {
				return fmt.Errorf("%d pods, %d running", len(list.Items), runningPods(list.Items))
			}
			return nil
		})
	})

	t.Run("reschedulable maintenance on request", func(t *testing.T) {
		node := serving[0]
		n, err := api.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		at, err := strconv.ParseInt(n.Labels[LabelScheduledMaintenance], 10, 64)
		if err != nil || time.Until(time.Unix(at, 0)) < 50*time.Minute {
			t.Fatalf("scheduled-maintenance-time %q: want about an hour ahead", n.Labels[LabelScheduledMaintenance])
		}
		if md := metadataValue(t, d, node, "instance/upcoming-maintenance"); !strings.Contains(md, `"can_reschedule":"true"`) {
			t.Fatalf("upcoming-maintenance %s", md)
		}
		if err := updateNode(ctx, api.Client, node, func(n *corev1.Node) bool {
			n.Labels[LabelPerformMaintenance] = "true"
			return true
		}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, wait, "maintenance run and cleared", func() error {
			return h.saw(node,
				"scheduled=true state=ONGOING tainted=true perform=true ready=true",
				"scheduled=true state=terminating tainted=true perform=true ready=false",
				"scheduled=false state= tainted=false perform= ready=true")
		})
		if got := metadataValue(t, d, node, "instance/maintenance-event"); got != "NONE" {
			t.Errorf("maintenance-event after maintenance: %s", got)
		}
		testenv.Eventually(t, wait, "interruption recorded", func() error {
			if got := interruptions(t, mon, node); !slices.Equal(got, []string{"MaintenanceEvent"}) {
				return fmt.Errorf("interruptions %v", got)
			}
			return nil
		})
		testenv.Eventually(t, wait, "serving pods back to two", func() error {
			list, err := api.Client.CoreV1().Pods("serving").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if runningPods(list.Items) != 2 {
				return fmt.Errorf("%d running", runningPods(list.Items))
			}
			return nil
		})
	})

	t.Run("TPU slice maintained as a whole at the window", func(t *testing.T) {
		for _, node := range tpu {
			testenv.Eventually(t, wait, "slice node "+node+" maintained", func() error {
				return h.saw(node,
					"scheduled=true state= tainted=false perform= ready=true",
					"scheduled=true state=ONGOING tainted=true perform= ready=true",
					"scheduled=false state= tainted=false perform= ready=true")
			})
		}
		testenv.Eventually(t, wait, "training pods back on the slice", func() error {
			for _, node := range tpu {
				if got := runningPods(podsOn(t, api, "training", node)); got != 1 {
					return fmt.Errorf("node %s runs %d training pods", node, got)
				}
			}
			return nil
		})
	})

	t.Run("spot preemption", func(t *testing.T) {
		testenv.Eventually(t, wait, "spot node down and replaced", func() error {
			return h.saw(spot, "scheduled=false state= tainted=false perform= ready=false",
				"scheduled=false state= tainted=false perform= ready=true")
		})
		if got := metadataValue(t, d, spot, "instance/preempted"); got != "FALSE" {
			t.Errorf("preempted after replacement: %s", got)
		}
		testenv.Eventually(t, wait, "preemption recorded", func() error {
			if got := interruptions(t, mon, spot); !slices.Equal(got, []string{"PreemptionEvent"}) {
				return fmt.Errorf("interruptions %v", got)
			}
			return nil
		})
		if s := d.Status(); s.Preempted != 1 || s.Maintained != 3 {
			t.Errorf("status: %d preempted, %d maintained; want 1 and 3", s.Preempted, s.Maintained)
		}
	})
}
