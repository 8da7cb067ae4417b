package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

// nodeLogs collects JSON log lines written by the command under test.
type nodeLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *nodeLogs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// listenAddress returns the address the web server logged, if it has.
func (b *nodeLogs) listenAddress() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for line := range strings.Lines(b.buf.String()) {
		var entry struct{ Msg, Address string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "Listening on" {
			return entry.Address
		}
	}
	return ""
}

func pollNode(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

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

	app := kingpin.New(name, "")
	run := nodeCommand(app)
	if _, err := app.Parse([]string{"node", "--web.listen-address=127.0.0.1:0"}); err != nil {
		t.Fatalf("parsing flags with NODE_NAME set: %v", err)
	}
	logs := &nodeLogs{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, slog.New(slog.NewJSONHandler(logs, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node command: %v", err)
		}
	})

	var addr string
	pollNode(t, "the web server listening", func() bool { addr = logs.listenAddress(); return addr != "" })
	pollNode(t, "/-/ready answering 200", func() bool {
		res, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`gce_instance_preempted{node="gke-tpu-pool-9x"} 1`,
		`gce_instance_maintenance_event{event="NONE",node="gke-tpu-pool-9x"} 1`,
		`gke_disruption_collector_success{collector="metadata"} 1`,
		`gke_disruption_metadata_requests_total{code="200",path="instance/preempted"}`,
	} {
		if !strings.Contains(string(body), want) {
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
