package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

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
