package cloudmonitoring

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/types/known/timestamppb"

	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

// fleet records one interruption on each of nodes nodes, 16 to a pool, and returns an exporter that has counted
// them: the steady state, where every poll lists them again (they stay in the look-back window) and counts nothing.
func fleet(b *testing.B, nodes int) (*harness, *exporter) {
	b.Helper()
	h := newHarness(b, monsim.Options{})
	e := h.newExporter(testConfig())
	e.poll()
	h.clock.Add(10 * time.Second)
	for n := range nodes {
		h.record(monsim.Interruption{
			Node: fmt.Sprintf("gke-train-a3-%05d", n), NodePool: fmt.Sprintf("a3-%04d", n/16),
			Type: "MaintenanceEvent", Reason: "HW/SW Maintenance", Count: 1,
		})
	}
	h.clock.Add(50 * time.Second)
	e.poll()
	h.clock.Add(time.Minute)
	e.poll()
	return h, e
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPoll is one poll of both metrics in one project through the real client and the simulator over
// loopback: calls/poll is the API cost (one call per metric while the points fit a page), cpu-ms/poll the process
// CPU time, simulator included.
func BenchmarkPoll(b *testing.B) {
	for _, nodes := range []int{1000, 65000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			h, e := fleet(b, nodes)
			if got := len(e.values()); got != nodes+(nodes+15)/16 {
				b.Fatalf("%d series counted, want %d", got, nodes+(nodes+15)/16)
			}
			calls, cpu := h.sim.Calls(), cpuTime()
			b.ResetTimer()
			for range b.N {
				if err := e.c.Poll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(h.sim.Calls()-calls)/float64(b.N), "calls/poll")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/poll")
		})
	}
}

// BenchmarkCount is the collector's own share of a poll: reading the listed points of a fleet into the counters,
// with no call and no decoding.
func BenchmarkCount(b *testing.B) {
	for _, nodes := range []int{1000, 65000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			h, e := fleet(b, nodes)
			q := e.c.queries[0]
			now := h.clock.Now()
			it := e.c.client.ListTimeSeries(context.Background(), &monitoringpb.ListTimeSeriesRequest{
				Name:     "projects/p1",
				Filter:   q.filter,
				Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(now.Add(-time.Hour)), EndTime: timestamppb.New(now)},
				View:     monitoringpb.ListTimeSeriesRequest_FULL,
			}, gax.WithRetry(nil))
			var page []*monitoringpb.TimeSeries
			if _, err := iterator.NewPager(it, maxPageSize, "").NextPage(&page); err != nil {
				b.Fatal(err)
			}
			if len(page) != nodes {
				b.Fatalf("listed %d series, want %d", len(page), nodes)
			}
			b.ResetTimer()
			for range b.N {
				e.c.apply(q, page, now, false)
				e.c.mu.Lock()
				q.family.commit(now, e.c.horizonLocked(q.family, now))
				e.c.mu.Unlock()
			}
		})
	}
}
