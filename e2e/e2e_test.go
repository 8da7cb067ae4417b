// Package e2e proves the loop users buy the product for, with every component real except GKE itself: the
// exporter's three commands as built binaries, Prometheus with the mixin's rules, Alertmanager with the example
// configuration, and the simulated GKE (lifecycle driver, metadata and Cloud Monitoring simulators) on a real
// kube-apiserver.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/demo"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// buildExporter builds the gke-disruption-exporter binary the way users get it.
func buildExporter(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gke-disruption-exporter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gke-disruption-exporter")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the exporter: %v\n%s", err, out)
	}
	return bin
}

// nodeView is what the test watches on each Node: GKE's signals and the actions service's.
type nodeView struct {
	at          time.Time
	maintenance string // active-node-maintenance
	perform     bool
	cordoned    bool
	ready       bool
	action      string // the actions service's action and state annotations
	state       string
	fault       string // fault-behavior and report-and-replace-status: a host reported as faulty
	report      string
}

func (v nodeView) String() string {
	return fmt.Sprintf("maintenance=%q perform=%t cordoned=%t ready=%t action=%s/%s fault=%q report=%q",
		v.maintenance, v.perform, v.cordoned, v.ready, v.action, v.state, v.fault, v.report)
}

// disrupted is a node out of service: cordoned, asked for maintenance, in it, down, or its host being reported.
func (v nodeView) disrupted() bool {
	return v.cordoned || v.perform || v.maintenance != "" || !v.ready || v.fault != ""
}

// watcher records every distinct state of every node, and the most nodes of each pool disrupted at once.
type watcher struct {
	mu           sync.Mutex
	history      map[string][]nodeView
	pool         map[string]string
	current      map[string]nodeView
	maxDisrupted map[string]int
	// workloadPodsAtStart counts the pods that were not DaemonSet pods on a node when GKE first marked it ONGOING.
	workloadPodsAtStart map[string]int
	pods                cache.Store
}

func newWatcher() *watcher {
	return &watcher{history: map[string][]nodeView{}, pool: map[string]string{}, current: map[string]nodeView{},
		maxDisrupted: map[string]int{}, workloadPodsAtStart: map[string]int{}}
}

func (w *watcher) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	v := nodeView{
		at:          time.Now(),
		maintenance: n.Labels[driver.LabelActiveMaintenance],
		perform:     n.Labels[driver.LabelPerformMaintenance] == "true",
		cordoned:    n.Spec.Unschedulable,
		action:      n.Annotations[nodeview.AnnotationAction],
		state:       n.Annotations[nodeview.AnnotationState],
		fault:       n.Labels[gke.LabelFaultBehavior],
		report:      n.Labels[gke.LabelReportAndReplaceStatus],
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			v.ready = c.Status == corev1.ConditionTrue
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.history[n.Name]
	if len(h) == 0 && !v.ready {
		return // registering: the kubelet has not reported yet
	}
	if len(h) > 0 && h[len(h)-1].String() == v.String() {
		return
	}
	if v.maintenance == "ONGOING" && !w.sawMaintenance(n.Name, "ONGOING") {
		w.workloadPodsAtStart[n.Name] = w.workloadPods(n.Name)
	}
	w.history[n.Name] = append(h, v)
	pool := n.Labels[driver.LabelNodePool]
	w.pool[n.Name] = pool
	w.current[n.Name] = v
	disrupted := 0
	for name, cur := range w.current {
		if w.pool[name] == pool && cur.disrupted() {
			disrupted++
		}
	}
	w.maxDisrupted[pool] = max(w.maxDisrupted[pool], disrupted)
}

func (w *watcher) sawMaintenance(node, state string) bool {
	for _, v := range w.history[node] {
		if v.maintenance == state {
			return true
		}
	}
	return false
}

// workloadPods counts the pods on node that are not being deleted and not DaemonSet pods.
func (w *watcher) workloadPods(node string) int {
	n := 0
	for _, obj := range w.pods.List() {
		pod := obj.(*corev1.Pod)
		ref := metav1.GetControllerOf(pod)
		if pod.Spec.NodeName == node && pod.DeletionTimestamp == nil && (ref == nil || ref.Kind != "DaemonSet") {
			n++
		}
	}
	return n
}

// check runs f on a node's history under the lock.
func (w *watcher) check(node string, f func(h []nodeView) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := f(w.history[node]); err != nil {
		var lines []string
		for _, v := range w.history[node] {
			lines = append(lines, "  "+v.at.Format("15:04:05.000")+" "+v.String())
		}
		return fmt.Errorf("node %s: %w; states seen:\n%s", node, err, strings.Join(lines, "\n"))
	}
	return nil
}

// completed is a node that went through GKE maintenance and is back: Ready, uncordoned, nothing pending.
func completed(h []nodeView) error {
	ongoing, terminating := -1, -1
	for i, v := range h {
		if v.maintenance == "ONGOING" && ongoing < 0 {
			ongoing = i
		}
		if v.maintenance == "terminating" && terminating < 0 {
			terminating = i
		}
	}
	if ongoing < 0 || terminating < ongoing {
		return fmt.Errorf("GKE did not run the maintenance (ONGOING, then terminating)")
	}
	last := h[len(h)-1]
	if last.maintenance != "" || last.perform || last.cordoned || !last.ready || last.state != string(nodeview.Done) {
		return fmt.Errorf("not back in service with the action done: %s", last)
	}
	return nil
}

func timesSet(h []nodeView, set func(nodeView) bool) int {
	n, was := 0, false
	for _, v := range h {
		if set(v) && !was {
			n++
		}
		was = set(v)
	}
	return n
}

type stack struct {
	*demo.Stack
	sc *driver.Scenario
}

// firedAlert reports whether Prometheus has had alertname firing for node within the last hour.
func (s stack) firedAlert(ctx context.Context, alertname, node string) error {
	prom, err := s.PrometheusAPI()
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`max_over_time(ALERTS{alertname=%q, node=%q, alertstate="firing"}[1h])`, alertname, node)
	v, _, _, err := prom.Query(ctx, q, time.Now())
	if err != nil {
		return err
	}
	if vec, ok := v.(model.Vector); !ok || len(vec) == 0 {
		return fmt.Errorf("%s has not fired for node %s", alertname, node)
	}
	return nil
}

// alertTimeline lists the intervals each alert was firing or pending since begin, per alert and node.
func (s stack) alertTimeline(ctx context.Context, begin time.Time) string {
	prom, err := s.PrometheusAPI()
	if err != nil {
		return err.Error()
	}
	v, _, _, err := prom.QueryRange(ctx, `ALERTS`, promv1.Range{Start: begin, End: time.Now(), Step: time.Second})
	if err != nil {
		return err.Error()
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return fmt.Sprintf("unexpected result %v", v)
	}
	var lines []string
	for _, series := range m {
		var spans []string
		var from, last model.Time
		for i, p := range series.Values {
			if i == 0 || p.Timestamp-last > 1500 {
				if i > 0 {
					spans = append(spans, fmt.Sprintf("%s-%s", from.Time().Format("15:04:05"), last.Time().Format("15:04:05")))
				}
				from = p.Timestamp
			}
			last = p.Timestamp
		}
		if len(series.Values) > 0 {
			spans = append(spans, fmt.Sprintf("%s-%s", from.Time().Format("15:04:05"), last.Time().Format("15:04:05")))
		}
		lines = append(lines, fmt.Sprintf("  %s %s %s: %s", series.Metric["alertname"], series.Metric["node"],
			series.Metric["alertstate"], strings.Join(spans, ", ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// value is the single value of a PromQL query, or an error when there is none.
func (s stack) value(ctx context.Context, q string) (float64, error) {
	prom, err := s.PrometheusAPI()
	if err != nil {
		return 0, err
	}
	v, _, _, err := prom.Query(ctx, q, time.Now())
	if err != nil {
		return 0, err
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		return 0, fmt.Errorf("%s: want one series, got %v", q, v)
	}
	return float64(vec[0].Value), nil
}

// events sums the counts of the Events with reason on node.
func (s stack) events(ctx context.Context, node, reason string) (int, error) {
	list, err := s.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		n += max(1, int(e.Count))
	}
	return n, nil
}

// startStack runs the whole product on the simulator playing scenario, with the actions policy and overrides of the
// mixin's _config (story time), and watches every node. alive waits for a step while every component runs.
func startStack(t testing.TB, scenario, policy string, rules map[string]any) (stack, *watcher, func(string, func() error)) {
	t.Helper()
	sc, err := driver.Load(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return startScenario(t, sc, policy, rules)
}

// startStackEvery is startStack with Prometheus scraping and evaluating every interval, the mixin's rules as they
// ship.
func startStackEvery(t testing.TB, scenario, policy string, interval time.Duration) (stack, *watcher, func(string, func() error)) {
	t.Helper()
	sc, err := driver.Load(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return startScenarioEvery(t, sc, policy, nil, interval)
}

// startScenario is startStack with a scenario already loaded.
func startScenario(t testing.TB, sc *driver.Scenario, policy string, rules map[string]any) (stack, *watcher, func(string, func() error)) {
	t.Helper()
	return startScenarioEvery(t, sc, policy, rules, time.Second)
}

// startScenarioEvery is startScenario with Prometheus scraping and evaluating every interval.
func startScenarioEvery(t testing.TB, sc *driver.Scenario, policy string, rules map[string]any, interval time.Duration) (stack, *watcher, func(string, func() error)) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the whole product for a few minutes")
	}
	ctx := context.Background()
	exporter := buildExporter(t)
	api := testenv.StartAPIServer(t)

	w := newWatcher()
	factory := informers.NewSharedInformerFactory(api.Client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	w.pods = podInformer.GetStore()
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: w.observe, UpdateFunc: func(_, n any) { w.observe(n) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	cache.WaitForCacheSync(stop, podInformer.HasSynced)

	logFile, err := os.Create(filepath.Join(t.TempDir(), "gke.log"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "stack")
	started, err := demo.Start(ctx, demo.Options{
		Scenario:         sc,
		Exporter:         exporter,
		PolicyFile:       policy,
		AlertmanagerFile: filepath.Join(testenv.RepoRoot(), "examples", "alertmanager.yml"),
		Rules:            demo.RuleConfig{Config: rules},
		Interval:         interval,
		Kube:             &demo.Kube{Client: api.Client, Kubeconfig: api.Kubeconfig},
		Dir:              dir,
		Logger:           slog.New(slog.NewTextHandler(logFile, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := stack{Stack: started, sc: sc}
	begin := time.Now()
	// Keep the components' logs of a failed run, and show when which alert fired.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alerts seen by Prometheus:\n%s", s.alertTimeline(ctx, begin))
			keep, _ := os.MkdirTemp("", "e2e-logs-")
			_ = exec.Command("cp", "-r", s.LogDir, logFile.Name(), keep).Run()
			t.Logf("component logs kept in %s", keep)
		}
		s.Close()
	})
	// Each step takes a few scrapes and evaluations, and Alertmanager's grouping.
	wait := 2*time.Minute + 10*interval
	alive := func(step string, check func() error) {
		t.Helper()
		testenv.Eventually(t, wait, step, func() error {
			if msg := s.Exited(); msg != "" {
				t.Fatalf("%s: a component stopped: %s", step, msg)
			}
			return check()
		})
	}
	return s, w, alive
}

func TestMaintenanceLoop(t *testing.T) {
	s, w, alive := startStack(t, "testdata/scenario.yaml", "testdata/policy.yaml",
		// Story time: the window of the far-off maintenances (48 h) is within the perform-maintenance lead time,
		// the one that cannot be rescheduled (4 h) enters the drain lead time 1 story hour (12 s) into the test.
		map[string]any{"performMaintenanceLeadTime": "7d", "drainLeadTime": "3h"})
	ctx := context.Background()
	sc := s.sc

	t.Run("reschedulable maintenance is requested once and completed", func(t *testing.T) {
		node := sc.NodeName("h100", 0)
		alive("GKENodeMaintenanceWindowApproaching fires for "+node, func() error {
			return s.firedAlert(ctx, "GKENodeMaintenanceWindowApproaching", node)
		})
		alive("actions sets perform-maintenance=true and GKE completes the maintenance", func() error {
			return w.check(node, completed)
		})
		alive("the decision to request maintenance recorded on "+node, func() error {
			n, err := s.events(ctx, node, "DisruptionMaintenanceRequested")
			if err == nil && n == 0 {
				err = fmt.Errorf("no DisruptionMaintenanceRequested event")
			}
			return err
		})
		alive("gke_node_interruptions_total of "+node+" grows", func() error {
			v, err := s.value(ctx, fmt.Sprintf(`sum(gke_node_interruptions_total{node=%q, interruption_type="MaintenanceEvent"})`, node))
			if err == nil && v < 1 {
				err = fmt.Errorf("gke_node_interruptions_total = %v, want at least 1", v)
			}
			return err
		})
	})

	t.Run("maintenance that cannot be rescheduled is drained ahead of the window", func(t *testing.T) {
		node := sc.NodeName("a2-train", 0)
		alive("GKENodeMaintenanceNotReschedulable fires for "+node, func() error {
			return s.firedAlert(ctx, "GKENodeMaintenanceNotReschedulable", node)
		})
		alive("GKE starts the maintenance at the window", func() error {
			return w.check(node, func(h []nodeView) error {
				for _, v := range h {
					if v.maintenance == "ONGOING" {
						return nil
					}
				}
				return fmt.Errorf("not ONGOING yet")
			})
		})
		if err := w.check(node, func(h []nodeView) error {
			for _, v := range h {
				if v.maintenance == "ONGOING" {
					if !v.cordoned || v.action != string(nodeview.Drain) || v.state != string(nodeview.Done) {
						return fmt.Errorf("at the window the node was not drained: %s", v)
					}
					return nil
				}
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		w.mu.Lock()
		left := w.workloadPodsAtStart[node]
		w.mu.Unlock()
		if left != 0 {
			t.Errorf("%d workload pods still ran on %s when the window started", left, node)
		}
		alive("the drained node is back in service after GKE's maintenance", func() error {
			return w.check(node, completed)
		})
	})

	t.Run("rolling pool takes one node at a time", func(t *testing.T) {
		for _, node := range sc.NodeNames("l4-serve") {
			alive("maintenance of "+node+" completed", func() error { return w.check(node, completed) })
		}
		w.mu.Lock()
		most := w.maxDisrupted["l4-serve"]
		w.mu.Unlock()
		if most != 1 {
			t.Errorf("up to %d nodes of the rolling pool (maxUnavailable 1) were out of service at once", most)
		}
	})

	// Last, so that a repeated notification has had the time of the other cases to cause a second action.
	t.Run("every node acted on once", func(t *testing.T) {
		acted := append([]string{sc.NodeName("h100", 0), sc.NodeName("a2-train", 0)}, sc.NodeNames("l4-serve")...)
		for _, node := range acted {
			if err := w.check(node, func(h []nodeView) error {
				cordons := timesSet(h, func(v nodeView) bool { return v.cordoned })
				requests := timesSet(h, func(v nodeView) bool { return v.perform })
				want := 1
				if node == sc.NodeName("a2-train", 0) {
					want = 0 // drained, never requested
				}
				if cordons != 1 || requests != want {
					return fmt.Errorf("cordoned %d times and perform-maintenance set %d times, want once and %d", cordons, requests, want)
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
			if n, err := s.events(ctx, node, "DisruptionActionAccepted"); err != nil || n != 1 {
				t.Errorf("node %s: %d DisruptionActionAccepted events (%v), want one decision to act", node, n, err)
			}
		}
	})

	t.Run("spot preemption alerts", func(t *testing.T) {
		node := sc.NodeName("spot", 0)
		alive("GKESpotNodePreempted fires for "+node, func() error {
			return s.firedAlert(ctx, "GKESpotNodePreempted", node)
		})
		alive("the preempted node is replaced", func() error {
			return w.check(node, func(h []nodeView) error {
				if timesSet(h, func(v nodeView) bool { return !v.ready }) != 1 || !h[len(h)-1].ready {
					return fmt.Errorf("not down once and Ready again")
				}
				return nil
			})
		})
	})
}
