package driver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// A driver told to wait registers the cluster, its node Ready, and plays nothing of the story, not even what happens
// at its start, until it begins.
func TestBeginHoldsTheStory(t *testing.T) {
	api := testenv.StartAPIServer(t)
	sc, err := Parse([]byte(`
cluster: {project: sim-project, location: us-central1, name: sim}
timeScale: 300
nodePools:
  - {name: l4-serve, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 1}
events:
  - at: 0s
    maintenance: {nodePool: l4-serve, nodes: [0], windowStartsIn: 168h, canReschedule: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	begin := make(chan struct{})
	d, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Client: api.Client, Scenario: sc, Begin: begin})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
	})
	select {
	case <-d.Registered():
	case err := <-done:
		t.Fatalf("driver stopped before registering the cluster: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the driver did not register the cluster within 60s")
	}
	node := sc.NodeName("l4-serve", 0)
	scheduled := func() (bool, error) {
		n, err := api.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !nodeReady(n) {
			t.Errorf("node %s registered not Ready", node)
		}
		return n.Labels[LabelScheduledMaintenance] != "", nil
	}
	// Two seconds are ten story minutes: the event at 0s would be long played.
	select {
	case <-d.Started():
		t.Fatal("the story started before it was begun")
	case <-time.After(2 * time.Second):
	}
	if s, err := scheduled(); err != nil || s {
		t.Fatalf("maintenance scheduled before the story began: %t (%v)", s, err)
	}
	close(begin)
	select {
	case <-d.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("the story did not start once begun")
	}
	testenv.Eventually(t, 10*time.Second, "the event at the story's start played", func() error {
		if s, err := scheduled(); err != nil || !s {
			return fmt.Errorf("maintenance not scheduled (%v)", err)
		}
		return nil
	})
}
