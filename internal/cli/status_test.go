package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the tests' clock: every relative time in the goldens counts from it.
var now = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func epoch(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

// fleet is a node in each state status distinguishes.
func fleet() []*corev1.Node {
	node := func(name string, labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	}
	scheduled := node("gke-a3-0", map[string]string{gke.LabelNodePool: "a3-train", gke.LabelAccelerator: "nvidia-h100-80gb",
		gke.LabelScheduledMaintenanceTime: epoch(3*time.Hour + 12*time.Minute)}, nil)
	reschedulable := node("gke-l4-1", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"},
		map[string]string{gke.AnnotationUpcomingMaintenance: `{"type":"SCHEDULED","maintenance_status":"PENDING","can_reschedule":"true",` +
			`"window_start_time":"` + now.Add(50*time.Minute).Format(time.RFC3339) + `","window_end_time":"` + now.Add(5*time.Hour).Format(time.RFC3339) +
			`","latest_window_start_time":"` + now.Add(96*time.Hour).Format(time.RFC3339) + `"}`})
	requested := node("gke-l4-2", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4",
		gke.LabelScheduledMaintenanceTime: epoch(72 * time.Hour), gke.LabelPerformMaintenance: "true"},
		map[string]string{nodestate.AnnotationAction: "perform-maintenance", nodestate.AnnotationState: "maintenance-requested",
			nodestate.AnnotationMaintenance: nodestate.LabelKey(epoch(72 * time.Hour))})
	ongoing := node("gke-v5e-0", map[string]string{gke.LabelNodePool: "v5e-slice", gke.LabelTPUAccelerator: "tpu-v5-lite-podslice",
		gke.LabelTPUTopology: "4x4", gke.LabelInstanceType: "ct5lp-hightpu-4t", gke.LabelActiveNodeMaintenance: "ONGOING"}, nil)
	ongoing.Spec.Taints = []corev1.Taint{{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule}}
	done := node("gke-l4-0", map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelAccelerator: "nvidia-l4"},
		map[string]string{nodestate.AnnotationAction: "drain", nodestate.AnnotationState: "done",
			nodestate.AnnotationCordonedBy: "actions-0", nodestate.AnnotationMaintenance: nodestate.LabelKey(epoch(-time.Hour))})
	done.Spec.Unschedulable = true
	quiet := node("gke-default-0", map[string]string{gke.LabelNodePool: "default"}, nil)
	return []*corev1.Node{quiet, done, ongoing, requested, reschedulable, scheduled}
}

func createNodes(t *testing.T, client kubernetes.Interface, nodes []*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestStatusGolden reads nodes in every state back from a real API server and prints them in each format.
func TestStatusGolden(t *testing.T) {
	api := testenv.StartAPIServer(t)
	createNodes(t, api.Client, fleet())
	for _, tc := range []struct {
		file string
		opts StatusOptions
	}{
		{"status.table", StatusOptions{Output: OutputTable}},
		{"status.wide", StatusOptions{Output: OutputWide}},
		{"status.json", StatusOptions{Output: OutputJSON}},
		{"status-all.table", StatusOptions{Output: OutputTable, All: true}},
		{"status-pool.table", StatusOptions{Output: OutputTable, Pool: "l4-serve"}},
		{"status-selector.json", StatusOptions{Output: OutputJSON, Selector: gke.LabelAccelerator + "=nvidia-h100-80gb"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tc.opts.Now = clock
			var out bytes.Buffer
			if err := Status(context.Background(), api.Client, &out, tc.opts); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.file, out.Bytes())
		})
	}
}

func TestStatusBadSelector(t *testing.T) {
	err := Status(context.Background(), nil, &bytes.Buffer{}, StatusOptions{Selector: "a in (", Now: clock})
	if e, ok := err.(*ExitError); !ok || e.Code != ExitAPI || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one-line exit-2 error", err)
	}
}

func TestRelative(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second:              "now",
		-20 * time.Second:             "now",
		5 * time.Minute:               "in 5m",
		3*time.Hour + 12*time.Minute:  "in 3h12m",
		-(90 * time.Minute):           "1h30m ago",
		47 * time.Hour:                "in 47h00m",
		73*time.Hour + 10*time.Minute: "in 3d1h",
	} {
		if got := relative(d); got != want {
			t.Errorf("relative(%s) = %q, want %q", d, got, want)
		}
	}
}

// syncBuffer is a writer the watch goroutine and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWatchRedraws drives --watch against a real API server: a node gaining maintenance, the API server
// restarting, GKE starting the maintenance, then the node deleted, each redraw the table; a change that alters
// nothing shown draws nothing.
func TestWatchRedraws(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, api.Client, out, true, StatusOptions{Output: OutputTable, Now: clock}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch ended with %v", err)
		}
	}()
	frames := func() []string { return strings.Split(out.String(), clearScreen)[1:] }
	waitFrames := func(n int, contains string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "frame "+strconv.Itoa(n), func() error {
			f := frames()
			if len(f) < n {
				return fmt.Errorf("%d frames", len(f))
			}
			if !strings.Contains(f[n-1], contains) {
				return fmt.Errorf("frame %d lacks %q:\n%s", n, contains, f[n-1])
			}
			return nil
		})
	}
	waitFrames(1, "No nodes with maintenance pending")

	createNodes(t, api.Client, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gke-a3-0",
		Labels: map[string]string{gke.LabelNodePool: "a3-train"}}}})
	waitFrames(2, "a3-train  1") // the header counts it; no row yet

	patch := func(body string) {
		t.Helper()
		if _, err := api.Client.CoreV1().Nodes().Patch(context.Background(), "gke-a3-0", "application/merge-patch+json",
			[]byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"metadata":{"labels":{"` + gke.LabelScheduledMaintenanceTime + `":"` + epoch(2*time.Hour) + `"}}}`)
	waitFrames(3, "(in 2h00m)")

	// The API server restarting under the watch: the informer reconnects and later changes still redraw.
	api.Restart()

	// An annotation nobody shows: no redraw. The next change's frame must be the fourth.
	patch(`{"metadata":{"annotations":{"example.com/unrelated":"x"}}}`)
	patch(`{"metadata":{"labels":{"` + gke.LabelActiveNodeMaintenance + `":"ONGOING"}}}`)
	waitFrames(4, "active-node-maintenance=ongoing")

	if err := api.Client.CoreV1().Nodes().Delete(context.Background(), "gke-a3-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFrames(5, "No nodes with maintenance pending")
	if n := len(frames()); n != 5 {
		t.Errorf("%d frames, want 5", n)
	}
}

// TestStatusOfMalformed: a garbage label or annotation announces no maintenance (as in the collectors and the
// actions service) and hides nothing else about the node.
func TestStatusOfMalformed(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-l4-9",
		Labels:      map[string]string{gke.LabelNodePool: "l4-serve", gke.LabelScheduledMaintenanceTime: "soon"},
		Annotations: map[string]string{gke.AnnotationUpcomingMaintenance: "{not json"}}}
	if s := StatusOf(n); s.Interesting() || s.MaintenanceStart != nil {
		t.Errorf("malformed signals: %+v, want nothing pending", s)
	}
	n.Spec.Unschedulable = true
	if s := StatusOf(n); !s.Interesting() || len(s.GKEState) != 1 || s.GKEState[0] != "cordoned" {
		t.Errorf("cordoned node with malformed signals: %+v", s)
	}
}
