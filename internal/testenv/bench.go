package testenv

import (
	"bytes"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time this process has used: benchmarks report it next to wall time, which stays
// meaningful only while nothing else shares the machine.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HeapInUse is the live heap after two collections, for retained-memory benchmarks.
func HeapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkScrape measures one collector's text rendering (a scrape): CPU per scrape and bytes per scrape.
func BenchmarkScrape(b *testing.B, store interface{ WriteText(io.Writer) error }) {
	b.Helper()
	var buf bytes.Buffer
	if err := store.WriteText(&buf); err != nil {
		b.Fatal(err)
	}
	size := buf.Len()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := ProcessCPU()
	for b.Loop() {
		buf.Reset()
		if err := store.WriteText(&buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((ProcessCPU()-cpu).Nanoseconds())/1e6/float64(b.N), "cpu-ms/scrape")
	b.ReportMetric(float64(size), "bytes/scrape")
}
