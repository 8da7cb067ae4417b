package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `goos: linux
pkg: github.com/gke-disruption-exporter/gke-disruption-exporter/collector/nodes
BenchmarkScrape/nodes=1000-2   	      20	     18648 ns/op	    226202 bytes/scrape	     720 B/op	       4 allocs/op
some log line
--- FAIL: BenchmarkBroken
PASS
`
	var stderr, stdout bytes.Buffer
	results, failed := parse(strings.NewReader(in), &stderr)
	if !failed {
		t.Error("a failing benchmark must fail the table")
	}
	if len(results) != 1 || results[0].name != "BenchmarkScrape/nodes=1000" || len(results[0].metrics) != 4 {
		t.Fatalf("results: %+v", results)
	}
	if !strings.Contains(stderr.String(), "some log line") {
		t.Errorf("non-result lines must pass through, got %q", stderr.String())
	}
	write(&stdout, results)
	if !strings.Contains(stdout.String(), "collector/nodes") || !strings.Contains(stdout.String(), "226202 bytes/scrape") {
		t.Errorf("table:\n%s", stdout.String())
	}
}
