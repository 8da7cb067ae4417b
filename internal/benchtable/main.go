// Command benchtable reads `go test -bench` output on stdin and prints one table row per benchmark: time, memory,
// allocations and every custom unit a benchmark reports. Lines that are not results pass to stderr unchanged, so
// failures stay visible.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

type result struct {
	pkg, name string
	metrics   []metric
}

type metric struct{ value, unit string }

func main() {
	results, failed := parse(os.Stdin, os.Stderr)
	write(os.Stdout, results)
	if failed {
		os.Exit(1)
	}
}

func parse(in io.Reader, passthrough io.Writer) ([]result, bool) {
	var results []result
	var pkg string
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
		case len(fields) >= 4 && strings.HasPrefix(fields[0], "Benchmark") && len(fields)%2 == 0:
			r := result{pkg: pkg, name: trimProcs(fields[0])}
			for i := 2; i+1 < len(fields); i += 2 {
				r.metrics = append(r.metrics, metric{value: fields[i], unit: fields[i+1]})
			}
			results = append(results, r)
		case strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL"):
			failed = true
			fmt.Fprintln(passthrough, line)
		case strings.HasPrefix(line, "goos:"), strings.HasPrefix(line, "goarch:"), strings.HasPrefix(line, "cpu:"),
			strings.HasPrefix(line, "ok "), line == "PASS":
		default:
			fmt.Fprintln(passthrough, line)
		}
	}
	return results, failed
}

// trimProcs drops the -GOMAXPROCS suffix.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
		return name[:i]
	}
	return name
}

func write(out io.Writer, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tresults\t")
	for _, r := range results {
		parts := make([]string, len(r.metrics))
		for i, m := range r.metrics {
			parts[i] = m.value + " " + m.unit
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", strings.TrimPrefix(r.pkg, "github.com/gke-disruption-exporter/gke-disruption-exporter/"), r.name, strings.Join(parts, "   "))
	}
	tw.Flush()
}
