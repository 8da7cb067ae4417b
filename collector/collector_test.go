package collector

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
)

type fakeCollector struct {
	err error
}

var fakeDesc = prometheus.NewDesc("fake_value", "A value.", nil, nil)

func (f fakeCollector) Update(ch chan<- prometheus.Metric) error {
	if f.err != nil {
		return f.err
	}
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 42)
	return nil
}

const textFamily = "# HELP text_value A rendered value.\n# TYPE text_value gauge\ntext_value{node=\"a\"} 1\n"

func serve(t *testing.T, collectors map[string]Collector) string {
	t.Helper()
	srv := httptest.NewServer(NewSet(promslog.NewNopLogger(), prometheus.NewRegistry(), collectors))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSetServesBothKindsWithSuccess(t *testing.T) {
	url := serve(t, map[string]Collector{
		"plain":  fakeCollector{},
		"text":   textOnly{text: textFamily},
		"broken": fakeCollector{err: errors.New("boom")},
	})
	want := `# HELP fake_value A value.
# TYPE fake_value gauge
fake_value 42
# HELP gke_disruption_collector_success Whether a collector's part of the scrape succeeded.
# TYPE gke_disruption_collector_success gauge
gke_disruption_collector_success{collector="broken"} 0
gke_disruption_collector_success{collector="plain"} 1
gke_disruption_collector_success{collector="text"} 1
# HELP text_value A rendered value.
# TYPE text_value gauge
text_value{node="a"} 1
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "fake_value", "gke_disruption_collector_success", "text_value"); err != nil {
		t.Fatal(err)
	}
}

// textOnly serves only rendered text.
type textOnly struct {
	text    string
	textErr error
}

func (textOnly) Update(chan<- prometheus.Metric) error { return nil }

func (c textOnly) WriteText(w io.Writer) error {
	_, _ = io.WriteString(w, c.text)
	return c.textErr
}

func TestFailedTextIsDroppedAndReported(t *testing.T) {
	url := serve(t, map[string]Collector{
		"text": textOnly{text: "# HELP half_written", textErr: errors.New("store closed")},
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "half_written") {
		t.Errorf("a failed collector's partial text was served:\n%s", body)
	}
	if !strings.Contains(string(body), `gke_disruption_collector_success{collector="text"} 0`) {
		t.Errorf("failure not reported:\n%s", body)
	}
}

func TestGzipWhenAsked(t *testing.T) {
	url := serve(t, map[string]Collector{"text": textOnly{text: textFamily}})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept-Encoding", "gzip;q=1.0, identity;q=0.5")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(zr)
	if !strings.Contains(string(body), `text_value{node="a"} 1`) {
		t.Errorf("gzip body:\n%s", body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestAppendSampleEscapes(t *testing.T) {
	got := string(AppendSample(nil, "m", 1.5, "a", "x\"y\\z\nw", "b", ""))
	want := `m{a="x\"y\\z\nw",b=""} 1.5` + "\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := string(AppendSample(nil, "m", 2)); got != "m 2\n" {
		t.Errorf("no labels: %q", got)
	}
}

// TestSetNegotiatesOpenMetrics: a scrape asking for OpenMetrics gets it, counters with their created timestamp as a
// _created sample, the rendered families unchanged, and # EOF last; one asking for nothing still gets text 0.0.4.
func TestSetNegotiatesOpenMetrics(t *testing.T) {
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	counterDesc := prometheus.NewDesc("things_total", "Things counted since the day's start.", []string{"node"}, nil)
	reg.MustRegister(constCollector{prometheus.MustNewConstMetricWithCreatedTimestamp(counterDesc, prometheus.CounterValue, 3, created, "a")})
	srv := httptest.NewServer(NewSet(promslog.NewNopLogger(), reg, map[string]Collector{"text": textOnly{text: textFamily}}))
	t.Cleanup(srv.Close)

	scrape := func(accept string) (string, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Content-Type"), string(body)
	}

	// What Prometheus sends by default, minus protobuf.
	ct, body := scrape("application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
	if !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
		t.Errorf("Content-Type = %q, want OpenMetrics 1.0.0", ct)
	}
	for _, want := range []string{
		"# TYPE things counter\n",
		`things_total{node="a"} 3.0` + "\n",
		`things_created{node="a"} ` + strconv.FormatFloat(float64(created.Unix()), 'g', -1, 64) + "\n",
		textFamily + "# EOF\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("OpenMetrics lacks %q:\n%s", want, body)
		}
	}
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Errorf("OpenMetrics does not end with # EOF:\n%s", body)
	}

	ct, body = scrape("")
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type without Accept = %q", ct)
	}
	if strings.Contains(body, "_created") || strings.Contains(body, "# EOF") {
		t.Errorf("the text format carries OpenMetrics lines:\n%s", body)
	}
}

type constCollector struct{ m prometheus.Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(ch chan<- prometheus.Metric) { ch <- c.m }

// generational serves text that changes only with its generation, counting how often it is rendered.
type generational struct {
	mu         sync.Mutex
	generation uint64
	text       string
	renders    int
}

func (*generational) Update(chan<- prometheus.Metric) error { return nil }

func (g *generational) TextGeneration() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation
}

func (g *generational) WriteText(w io.Writer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.renders++
	_, err := io.WriteString(w, g.text)
	return err
}

func (g *generational) set(text string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.generation++
	g.text = text
}

// get scrapes url as Prometheus does, asking for OpenMetrics and, when gzipped, for gzip; a gzip body must be one
// gzip member whose checksum and size hold.
func get(t *testing.T, url string, gzipped bool) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3")
	req.Header.Set("Accept-Encoding", "identity")
	if gzipped {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Encoding") == "gzip"; got != gzipped {
		t.Fatalf("gzip asked %v, Content-Encoding %q", gzipped, resp.Header.Get("Content-Encoding"))
	}
	if !gzipped {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != int64(len(body)) {
			t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(body))
		}
		return string(body)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("reading the gzip body: %v", err)
	}
	if rest, _ := io.ReadAll(resp.Body); len(rest) > 0 {
		t.Errorf("%d bytes after the gzip member", len(rest))
	}
	return string(body)
}

// withoutSelf drops the lines that differ between any two scrapes (the collectors' durations).
func withoutSelf(body string) string {
	var kept []string
	for _, line := range strings.SplitAfter(body, "\n") {
		if !strings.HasPrefix(line, "gke_disruption_collector_duration_seconds{") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// TestCachedTextServedUntilItChanges: a collector's text is rendered once per generation, and gzip and identity
// scrapes serve the same exposition, the text parts in their collectors' name order before # EOF, as the generation
// changes, next to a text collector without generations.
func TestCachedTextServedUntilItChanges(t *testing.T) {
	cached := &generational{text: textFamily}
	plain := textOnly{text: "# HELP plain_value A value.\n# TYPE plain_value gauge\nplain_value 2\n"}
	url := serve(t, map[string]Collector{"cached": cached, "plain": plain, "fake": fakeCollector{}})

	check := func(wantText string) {
		t.Helper()
		identity := get(t, url, false)
		for _, want := range []string{"fake_value 42.0\n", wantText + plain.text + "# EOF\n",
			`gke_disruption_collector_success{collector="cached"} 1.0` + "\n"} {
			if !strings.Contains(identity, want) {
				t.Errorf("identity scrape lacks %q:\n%s", want, identity)
			}
		}
		for range 2 {
			if gzipped := get(t, url, true); withoutSelf(gzipped) != withoutSelf(identity) {
				t.Errorf("gzip scrape differs from identity:\n%s\nidentity:\n%s", gzipped, identity)
			}
		}
	}
	check(textFamily)
	if cached.renders != 1 {
		t.Errorf("text rendered %d times for one generation, want 1", cached.renders)
	}
	changed := "# HELP text_value A rendered value.\n# TYPE text_value gauge\ntext_value{node=\"b\"} 2\n"
	cached.set(changed)
	check(changed)
	if cached.renders != 2 {
		t.Errorf("text rendered %d times for two generations, want 2", cached.renders)
	}
}

// TestCachedTextConcurrentScrapes: scrapes at once, while the text changes, each serve one whole generation.
func TestCachedTextConcurrentScrapes(t *testing.T) {
	cached := &generational{}
	text := func(i int) string {
		return "# HELP text_value A rendered value.\n# TYPE text_value gauge\n" +
			strings.Repeat("text_value{node=\"n"+strconv.Itoa(i)+"\"} 1\n", 1000)
	}
	cached.set(text(0))
	url := serve(t, map[string]Collector{"cached": cached})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 20 {
				body := get(t, url, w%2 == 0)
				i := strings.Index(body, "# HELP text_value")
				if i < 0 {
					t.Errorf("no text in:\n%s", body)
					return
				}
				part := strings.TrimSuffix(body[i:], "# EOF\n")
				if part != text(0) && part != text(1) && part != text(2) {
					t.Errorf("scrape serves no whole generation:\n%.300s", part)
					return
				}
			}
		})
	}
	cached.set(text(1))
	cached.set(text(2))
	wg.Wait()
}
