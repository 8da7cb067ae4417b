package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

func TestNodeCommand(t *testing.T) {
	sim := gkesim.New(gkesim.Instance{Name: "gke-tpu-pool-9x", ID: "1", Zone: "us-east5-a", ProjectID: "p", NumericProjectID: "1"})
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		ts.Close()
	})
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
	t.Setenv("NODE_NAME", "gke-tpu-pool-9x")
	sim.Preempt()

	addr := freeAddress(t)
	// NODE_NAME stands in for --node.name.
	startCommand(t, nodeCommand, "node", "--web.listen-address="+addr)
	testenv.Eventually(t, 20*time.Second, "/-/ready answering 200", func() error {
		if code, _, err := get("http://" + addr + "/-/ready"); err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, %v", code, err)
		}
		return nil
	})
	_, body, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`gce_instance_preempted{node="gke-tpu-pool-9x"} 1`,
		`gce_instance_maintenance_event{event="NONE",node="gke-tpu-pool-9x"} 1`,
		`gke_disruption_collector_success{collector="metadata"} 1`,
		`gke_disruption_metadata_requests_total{code="200",path="instance/preempted"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestNodeCommandRequiresNodeName(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	app := kingpin.New(name, "")
	nodeCommand(app)
	if _, err := app.Parse([]string{"node"}); err == nil {
		t.Error("node command started without --node.name or NODE_NAME")
	}
}

// TestNodeServesAfterSIGTERM runs the built binary on a preempted Spot VM: after the SIGTERM that the VM's shutdown
// sends, scrapes still see gce_instance_preempted 1 until the shutdown delay ends, and then the process exits.
func TestNodeServesAfterSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	sim := gkesim.New(gkesim.Instance{Name: "gke-spot-1", ID: "1", Zone: "us-east5-a", ProjectID: "p", NumericProjectID: "1"})
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		ts.Close()
	})
	addr := freeAddress(t)
	cmd := exec.Command(bin, "node", "--node.name=gke-spot-1", "--web.listen-address="+addr, "--web.shutdown-delay=30s")
	cmd.Env = append(os.Environ(), "GCE_METADATA_HOST="+strings.TrimPrefix(ts.URL, "http://"))
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	testenv.Eventually(t, 20*time.Second, "/-/ready answering 200", func() error {
		if code, _, err := get("http://" + addr + "/-/ready"); err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, %v", code, err)
		}
		return nil
	})

	// The SIGTERM and the preemption notice come together; the notice reaching the agent after the SIGTERM
	// shows that it keeps watching as well as serving.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sim.Preempt()
	const want = `gce_instance_preempted{node="gke-spot-1"} 1`
	testenv.Eventually(t, 20*time.Second, "a scrape after SIGTERM seeing the preemption", func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("the agent exited: %v", err)
		default:
		}
		_, body, err := get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(body, want) {
			return fmt.Errorf("/metrics lacks %s", want)
		}
		return nil
	})
}

func TestNodeExitsAfterTheShutdownDelay(t *testing.T) {
	sim := gkesim.New(gkesim.Instance{Name: "n", ID: "1", Zone: "z", ProjectID: "p", NumericProjectID: "1"})
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		ts.Close()
	})
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
	app := kingpin.New(name, "")
	run := nodeCommand(app)
	if _, err := app.Parse([]string{"node", "--node.name=n", "--web.listen-address=" + freeAddress(t), "--web.shutdown-delay=100ms"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, promslog.NewNopLogger()) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("node command: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node command did not stop after its shutdown delay")
	}
}
