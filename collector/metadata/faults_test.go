package metadata

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

// proxy stands between the agent and the simulator, to fail the network rather than the server: frozen, it keeps
// accepting and reading but delivers nothing back (a connection that died silently, or a listener that accepts and
// never answers); cut closes every open connection (dropped mid-wait).
type proxy struct {
	l       net.Listener
	backend string

	mu     sync.Mutex
	frozen bool
	conns  map[net.Conn]struct{}
}

func startProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		l.Close()
		p.cut()
	})
	go p.accept()
	t.Setenv("GCE_METADATA_HOST", l.Addr().String())
	return p
}

func (p *proxy) accept() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.backend)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.copy(server, client)
		go p.copy(client, server)
	}
}

// copy forwards src to dst, dropping what arrives while frozen.
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isFrozen() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *proxy) freeze(frozen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = frozen
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func updateErr(a *agent) error { return a.Update(make(chan prometheus.Metric, 100)) }

func lastSuccess(a *agent, path string) float64 {
	return testutil.ToFloat64(a.lastSuccess.WithLabelValues(path))
}

func TestUnreachableServerIsAFailure(t *testing.T) {
	sim := gkesim.New(testInstance)
	ts := httptest.NewServer(sim)
	t.Cleanup(sim.Close)
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
	a := startAgent(t, testConfig)
	expectGolden(t, a, "healthy")
	if err := updateErr(a); err != nil {
		t.Fatalf("healthy agent reports a failure: %v", err)
	}
	before := map[string]float64{}
	for _, p := range watchedPaths {
		before[p.name] = lastSuccess(a, p.name)
		if before[p.name] == 0 {
			t.Errorf("%s: no last success after answers", p.name)
		}
	}

	// The server goes away: parked requests end with a 503, every later one is refused.
	sim.Close()
	ts.Close()
	poll(t, "the failure reported", func() bool { return updateErr(a) != nil })
	errorsBefore := testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "error"))
	poll(t, "more failed requests", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "error")) >= errorsBefore+3
	})
	if err := updateErr(a); err == nil {
		t.Error("success while every request fails")
	}
	for _, p := range watchedPaths {
		if got := lastSuccess(a, p.name); got != before[p.name] {
			t.Errorf("%s: last success moved from %v to %v without an answer", p.name, before[p.name], got)
		}
	}
	// The last known state stays.
	if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "healthy"))); err != nil {
		t.Errorf("series while unreachable: %v", err)
	}
}

func TestUnreachableFromTheStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("GCE_METADATA_HOST", addr)
	a := startAgentUnready(t, testConfig)
	poll(t, "a refused request", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathPreempted, "error")) >= 1
	})
	if err := updateErr(a); err == nil {
		t.Error("success without a single answer")
	}
	if n, _ := testutil.GatherAndCount(a.reg, "gke_disruption_metadata_last_success_timestamp_seconds"); n != 0 {
		t.Errorf("%d last-success series without a single answer", n)
	}
}

// TestNotFoundOnMaintenanceEventIsAFailure: a 404 on maintenance-event is no reason to stop asking, since GCE gives
// its 60 s warning only to a VM that queries the key. The state is kept and the path asked again within MaxBackoff
// (1 s by default), so the warning shows as soon as the server answers again.
func TestNotFoundOnMaintenanceEventIsAFailure(t *testing.T) {
	for _, key := range []string{gkesim.KeyMaintenanceEvent, gkesim.KeyPreempted} {
		t.Run(key, func(t *testing.T) {
			sim := gkesim.New(testInstance)
			startSim(t, sim)
			cfg := testConfig
			cfg.MinBackoff, cfg.MaxBackoff = 0, 0 // the defaults
			cfg.UnsupportedRecheck = 10 * time.Minute
			a := startAgent(t, cfg)
			expectGolden(t, a, "healthy")

			sim.Delete(key)
			poll(t, "the 404 reported as a failure", func() bool { return updateErr(a) != nil })
			if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "healthy"))); err != nil {
				t.Errorf("series after a 404: %v", err)
			}
			if got := testutil.ToFloat64(a.supported.WithLabelValues(key)); got != 1 {
				t.Errorf("path_supported after a 404 = %v, want 1 (only upcoming-maintenance may be unsupported)", got)
			}
			notFound := testutil.ToFloat64(a.requests.WithLabelValues(key, "404"))
			poll(t, "the path asked again", func() bool {
				return testutil.ToFloat64(a.requests.WithLabelValues(key, "404")) >= notFound+2
			})

			sim.Reset()
			sim.StartMaintenance()
			sim.Preempt()
			expectGolden(t, a, "terminate_preempted")
			poll(t, "success again", func() bool { return updateErr(a) == nil })
		})
	}
}

func TestServiceUnavailableStormKeepsTermination(t *testing.T) {
	sim := gkesim.New(testInstance)
	startSim(t, sim)
	cfg := testConfig
	cfg.TimeoutSec = 1 // the parked hanging GET answers (unchanged) within a second; the next ones hit the storm
	a := startAgent(t, cfg)
	sim.StartMaintenance()
	expectGolden(t, a, "terminate")

	const storm = 20
	sim.Fail(gkesim.KeyMaintenanceEvent, http.StatusServiceUnavailable, storm)
	failed := func() float64 { return testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "503")) }
	poll(t, "the storm reaching the agent", func() bool { return failed() >= 1 })
	if err := updateErr(a); err == nil && failed() < storm {
		t.Error("success during a 503 storm")
	}
	poll(t, "the storm over", func() bool { return failed() == storm })
	if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "terminate"))); err != nil {
		t.Errorf("series after the storm: %v", err)
	}
	poll(t, "success again", func() bool { return updateErr(a) == nil })
}

// TestHungConnection: the network stops delivering answers without closing anything. The agent notices within
// the hanging GET's timeout plus the slack, and once answers flow again the change made meanwhile shows.
func TestHungConnection(t *testing.T) {
	sim := gkesim.New(testInstance)
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); ts.Close() })
	p := startProxy(t, strings.TrimPrefix(ts.URL, "http://"))
	cfg := testConfig
	cfg.TimeoutSec = 1
	cfg.Slack = 500 * time.Millisecond
	a := startAgent(t, cfg)
	expectGolden(t, a, "healthy")

	waitParked(t, sim, gkesim.KeyMaintenanceEvent)
	p.freeze(true)
	sim.StartMaintenance() // the parked request answers into the void
	poll(t, "the dead connection noticed", func() bool { return updateErr(a) != nil })
	if err := testutil.CollectAndCompare(series{a.Collector}, strings.NewReader(golden(t, "healthy"))); err != nil {
		t.Errorf("series while blind: %v", err)
	}
	p.freeze(false)
	expectGolden(t, a, "terminate")
	poll(t, "success again", func() bool { return updateErr(a) == nil })
}

// TestConnectionDroppedMidWait: every connection closes while the hanging GETs are parked; a change made right
// after is seen on reconnect.
func TestConnectionDroppedMidWait(t *testing.T) {
	sim := gkesim.New(testInstance)
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); ts.Close() })
	p := startProxy(t, strings.TrimPrefix(ts.URL, "http://"))
	a := startAgent(t, testConfig) // hanging GETs of 5 s: only the drop ends them early
	expectGolden(t, a, "healthy")

	waitParked(t, sim, gkesim.KeyMaintenanceEvent)
	p.cut()
	sim.StartMaintenance()
	expectGolden(t, a, "terminate")
}

// TestListenerThatNeverAnswers: a server that accepts connections and never answers is a failure from the start,
// noticed within the hanging GET's timeout plus the slack, never success.
func TestListenerThatNeverAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Setenv("GCE_METADATA_HOST", l.Addr().String())
	cfg := testConfig
	cfg.Slack = 300 * time.Millisecond
	a := startAgentUnready(t, cfg)
	poll(t, "requests abandoned", func() bool {
		for _, p := range watchedPaths {
			if testutil.ToFloat64(a.requests.WithLabelValues(p.name, "error")) < 1 {
				return false
			}
		}
		return true
	})
	err = updateErr(a)
	if err == nil || !errors.Is(err, errNotAnswered) && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("Update = %v, want a failure", err)
	}
}

// TestRecoveryShowsAtOnce: after a failure the agent reads the value plainly before it waits again, so success
// returns as soon as the server answers, not when a hanging GET with the old ETag times out (here a minute).
func TestRecoveryShowsAtOnce(t *testing.T) {
	sim := gkesim.New(testInstance)
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); ts.Close() })
	p := startProxy(t, strings.TrimPrefix(ts.URL, "http://"))
	cfg := testConfig
	cfg.TimeoutSec = 60
	a := startAgent(t, cfg)
	expectGolden(t, a, "healthy")

	waitParked(t, sim, gkesim.KeyMaintenanceEvent)
	sim.Fail(gkesim.KeyMaintenanceEvent, http.StatusServiceUnavailable, 3)
	p.cut()
	poll(t, "the outage seen", func() bool {
		return testutil.ToFloat64(a.requests.WithLabelValues(pathMaintenanceEvent, "503")) == 3
	})
	poll(t, "success again well before the hanging GET's timeout", func() bool { return updateErr(a) == nil })
}
