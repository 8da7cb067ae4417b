package metadata

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

// BenchmarkChangeToSeriesLatency measures how long a maintenance-event change on the metadata server takes to reach
// the collector's series, with the agent's hanging GET parked as in steady state (target: at most 1 s).
func BenchmarkChangeToSeriesLatency(b *testing.B) {
	sim := gkesim.New(testInstance)
	startSim(b, sim)
	a := startAgent(b, testConfig)
	events := []string{gkesim.EventTerminate, gkesim.EventNone}
	event := func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.state.event
	}

	var (
		total, worst time.Duration
		changes      int
	)
	for b.Loop() {
		b.StopTimer()
		waitParked(b, sim, gkesim.KeyMaintenanceEvent)
		want := events[changes%len(events)]
		b.StartTimer()

		begin := time.Now()
		sim.Set(gkesim.KeyMaintenanceEvent, want)
		waitFor(b, a.Collector, "series showing "+want, func() bool { return event() == want },
			func() string { return "series show " + event() })
		latency := time.Since(begin)

		total += latency
		worst = max(worst, latency)
		changes++
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(changes), "ms/change")
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
}

// BenchmarkIdleResidentMemory builds the real binary, runs `node` against the simulator until it is ready and has
// been scraped, and reports its resident memory at idle (target: VmRSS at most 20 MiB). anon-MiB is the part that
// is the process's own (heap, stacks); the rest is pages of the executable mapped in by start-up.
func BenchmarkIdleResidentMemory(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc/PID/status")
	}
	bin := buildBinary(b)
	sim := gkesim.New(testInstance)
	startSim(b, sim)
	sim.ScheduleMaintenance(gkesim.Maintenance{Type: "SCHEDULED", CanReschedule: true, WindowStart: window})

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "node", "--node.name="+testNode, "--web.listen-address=127.0.0.1:0", "--log.format=json")
	cmd.Env = append(os.Environ(), "GCE_METADATA_HOST="+os.Getenv("GCE_METADATA_HOST"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := listenAddress(b, stderr)

	poll(b, "the agent answering /-/ready", func() bool {
		res, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	for range 3 {
		body := get(b, "http://"+addr+"/metrics")
		if !strings.Contains(body, "gce_instance_upcoming_maintenance_info{") {
			b.Fatalf("scrape lacks the scheduled maintenance:\n%s", body)
		}
	}

	var rss, anon float64
	for b.Loop() {
		status := procStatus(b, cmd.Process.Pid)
		rss, anon = max(rss, status["VmRSS"]), max(anon, status["RssAnon"])
	}
	b.ReportMetric(rss, "MiB")
	b.ReportMetric(anon, "anon-MiB")
}

func buildBinary(b *testing.B) string {
	b.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("building the binary needs the go command on PATH: %v", err)
	}
	bin := filepath.Join(b.TempDir(), "gke-disruption-exporter")
	build := exec.Command(goTool, "build", "-o", bin, "github.com/gke-disruption-exporter/gke-disruption-exporter/cmd/gke-disruption-exporter")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the binary: %v\n%s", err, out)
	}
	return bin
}

// listenAddress reads the JSON log until the web server says where it listens, then drains the rest.
func listenAddress(b *testing.B, stderr io.Reader) string {
	b.Helper()
	lines := bufio.NewScanner(stderr)
	found := make(chan string, 1)
	go func() {
		sent := false
		for lines.Scan() {
			var entry struct{ Msg, Address string }
			if !sent && json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Msg == "Listening on" {
				found <- entry.Address
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			b.Fatal("the agent exited before listening")
		}
		return addr
	case <-time.After(30 * time.Second):
		b.Fatal("the agent did not log its listen address")
	}
	return ""
}

func get(b *testing.B, url string) string {
	b.Helper()
	res, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(body)
}

// procStatus returns the memory fields of /proc/PID/status in MiB.
func procStatus(b *testing.B, pid int) map[string]float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := map[string]float64{}
	for line := range strings.Lines(string(status)) {
		name, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		if !ok || !strings.HasSuffix(value, " kB") {
			continue
		}
		kib, err := strconv.ParseFloat(strings.TrimSuffix(value, " kB"), 64)
		if err != nil {
			b.Fatalf("reading %q: %v", line, err)
		}
		fields[name] = kib / 1024
	}
	if _, ok := fields["VmRSS"]; !ok {
		b.Fatal("no VmRSS in /proc status")
	}
	return fields
}
