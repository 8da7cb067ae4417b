package driver

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// reportSignals is what a faulty host report changes on a node: the two labels and Ready.
func reportSignals(n *corev1.Node) string {
	return fmt.Sprintf("behavior=%s status=%s ready=%t",
		n.Labels[gke.LabelFaultBehavior], n.Labels[gke.LabelReportAndReplaceStatus], nodeReady(n))
}

// A host reported as faulty through GKE: on a supported machine type the pods are evicted and each status shows
// in order, the VM moves to a healthy host (down, then Ready) and the label goes; on another machine type the
// report fails at once (Error, the label removed); labelling again is a new report.
func TestDriverPlaysFaultyHostReport(t *testing.T) {
	api, d, mon, _ := startDriver(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke:
  workloadEviction: 300ms
  reportOperation: 600ms
  failureRepair: 1s
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 1}
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 1}
workloads:
  - {name: train, namespace: training, kind: Job, nodePools: [a4]}
`)
	ctx := context.Background()
	a4, l4 := d.sc.NodeNames("a4")[0], d.sc.NodeNames("l4")[0]
	h := &history{states: map[string][]string{}}
	watchNodes(t, api, func(n *corev1.Node) {
		if n.Name == a4 || n.Name == l4 {
			h.recordAs(n.Name, reportSignals(n))
		}
	})
	podsOn := func(node string) int {
		pods, err := api.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !systemPod(&p) {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 30*time.Second, "the training pod running", func() error {
		if podsOn(a4) == 0 {
			return fmt.Errorf("no pod on %s", a4)
		}
		return nil
	})
	label := func(node string) {
		t.Helper()
		if err := updateNode(ctx, api.Client, node, func(n *corev1.Node) bool {
			n.Labels[gke.LabelFaultBehavior] = string(gke.FaultXID)
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}

	label(a4)
	testenv.Eventually(t, 30*time.Second, "the report played through", func() error {
		return h.saw(a4,
			"behavior=XID status= ready=true",
			"behavior=XID status=PodsEvicted ready=true",
			"behavior=XID status=OperationRUNNING ready=true",
			"behavior=XID status=OperationDone ready=false",
			"behavior= status=OperationDone ready=true")
	})
	testenv.Eventually(t, 30*time.Second, "the VM's move recorded as an interruption", func() error {
		if got := interruptions(t, mon, a4); len(got) != 1 {
			return fmt.Errorf("interruptions %v", got)
		}
		return nil
	})

	label(l4)
	testenv.Eventually(t, 30*time.Second, "an unsupported machine type fails at once", func() error {
		return h.saw(l4, "behavior=XID status= ready=true", "behavior= status=Error ready=true")
	})
	label(l4) // GKE's documented retry: label again
	testenv.Eventually(t, 30*time.Second, "labelling again is a new report", func() error {
		return h.saw(l4, "behavior=XID status= ready=true", "behavior= status=Error ready=true",
			"behavior=XID status=Error ready=true", "behavior= status=Error ready=true")
	})
}

// A scenario's report event without a Reporter is the operator labelling the node by hand: GKE's report follows.
func TestDriverPlaysScenarioReportByHand(t *testing.T) {
	api, d, _, _ := startDriver(t, `
cluster: {project: sim-project, location: us-central1, name: sim}
gke:
  workloadEviction: 300ms
  reportOperation: 300ms
  failureRepair: 300ms
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 2}
events:
  - {at: 0s, report: {nodePool: a4, nodes: [1], behavior: sdc}}
`)
	names := d.sc.NodeNames("a4")
	h := &history{states: map[string][]string{}}
	watchNodes(t, api, func(n *corev1.Node) { h.recordAs(n.Name, reportSignals(n)) })
	testenv.Eventually(t, 30*time.Second, "the reported node replaced", func() error {
		return h.saw(names[1], "behavior=SDC status= ready=true", "behavior= status=OperationDone ready=true")
	})
	for _, s := range h.states[names[0]] {
		if s != "behavior= status= ready=true" {
			t.Errorf("node 0, not named by the event, went through %q", s)
		}
	}
}

// With a Reporter, the driver hands the report to it (the demo's report-faulty) and labels nothing itself.
func TestDriverHandsScenarioReportToReporter(t *testing.T) {
	api := testenv.StartAPIServer(t)
	sc, err := Parse([]byte(`
cluster: {project: sim-project, location: us-central1, name: sim}
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 1}
events:
  - {at: 0s, report: {nodePool: a4, behavior: XID}}
`))
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 1)
	d, err := New(slog.New(slog.DiscardHandler), Options{Client: api.Client, Scenario: sc,
		Reporter: func(_ context.Context, node string, behavior gke.FaultBehavior) error {
			asked <- node + " " + string(behavior)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case got := <-asked:
		if want := sc.NodeNames("a4")[0] + " XID"; got != want {
			t.Errorf("reporter asked for %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reporter was never asked")
	}
	n, err := api.Client.CoreV1().Nodes().Get(ctx, sc.NodeNames("a4")[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := n.Labels[gke.LabelFaultBehavior]; b != "" {
		t.Errorf("the driver labelled the node itself (%s) although a Reporter plays the operator", b)
	}
}
