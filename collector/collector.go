// Package collector holds what every collector shares: the --collector.<name> switches, the per-collector
// success/duration series, and the /metrics handler that serves client_golang metrics next to pre-rendered text.
package collector

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Collector is one switchable source of series. Update reads only state the collector keeps current on its own
// (a watch, a poll, a hanging GET): a scrape never calls out.
type Collector interface {
	Update(ch chan<- prometheus.Metric) error
}

// TextCollector keeps its bulk series rendered in the text exposition format, so a scrape of tens of thousands of
// nodes is a byte copy. Its Update still runs, for the few series it serves through client_golang. The rendered
// families are gauges whose help has no quote, so the same bytes are valid OpenMetrics too.
type TextCollector interface {
	Collector
	WriteText(w io.Writer) error
}

// EnableFlag adds --collector.<name> (and --no-collector.<name>) to cmd, as node_exporter does.
func EnableFlag(cmd *kingpin.CmdClause, name string, enabledByDefault bool) *bool {
	state := "disabled"
	if enabledByDefault {
		state = "enabled"
	}
	return cmd.Flag("collector."+name, "Enable the "+name+" collector (default: "+state+").").
		Default(boolString(enabledByDefault)).Bool()
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

var (
	scrapeDurationDesc = prometheus.NewDesc(
		prometheus.BuildFQName(nodeview.Namespace, "collector", "duration_seconds"),
		"Duration of a collector's part of the scrape.",
		[]string{"collector"}, nil,
	)
	scrapeSuccessDesc = prometheus.NewDesc(
		prometheus.BuildFQName(nodeview.Namespace, "collector", "success"),
		"Whether a collector's part of the scrape succeeded.",
		[]string{"collector"}, nil,
	)
)

// Set is the enabled collectors of one command.
type Set struct {
	logger     *slog.Logger
	collectors map[string]Collector
	gatherer   prometheus.Gatherer
	// text holds a scrape's rendered part. It is kept, not pooled: a pool is emptied by every GC, and regrowing
	// tens of MB per scrape is most of a large cluster's garbage. A scrape that finds it in use takes its own.
	textMu sync.Mutex
	text   bytes.Buffer
}

// NewSet serves collectors next to the series of gatherer (the command's self-monitoring registry).
func NewSet(logger *slog.Logger, gatherer prometheus.Gatherer, collectors map[string]Collector) *Set {
	return &Set{
		logger:     logger,
		collectors: collectors,
		gatherer:   gatherer,
	}
}

type result struct {
	duration time.Duration
	err      error
}

// scrape is one scrape's client_golang side: each collector's Update plus its success/duration, counting the time
// its text part took.
type scrape struct {
	set  *Set
	text map[string]result
}

func (s scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeDurationDesc
	ch <- scrapeSuccessDesc
}

func (s scrape) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for name, c := range s.set.collectors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			begin := time.Now()
			err := c.Update(ch)
			duration := time.Since(begin)
			if r, ok := s.text[name]; ok {
				duration += r.duration
				if err == nil {
					err = r.err
				}
			}
			success := 1.0
			if err != nil {
				success = 0
				s.set.logger.Error("collector failed", "collector", name, "duration_seconds", duration.Seconds(), "err", err)
			}
			ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, duration.Seconds(), name)
			ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, success, name)
		}()
	}
	wg.Wait()
}

// ServeHTTP writes every series in the text format 0.0.4, or OpenMetrics when the scrape asks for it: first the
// client_golang ones, then the rendered text.
func (s *Set) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	text := new(bytes.Buffer)
	if s.textMu.TryLock() {
		text = &s.text
		defer func() { text.Reset(); s.textMu.Unlock() }()
	}

	results := make(map[string]result)
	for name, c := range s.collectors {
		tc, ok := c.(TextCollector)
		if !ok {
			continue
		}
		begin := time.Now()
		mark := text.Len()
		err := tc.WriteText(text)
		if err != nil {
			text.Truncate(mark) // a half-written part would corrupt the exposition
		}
		results[name] = result{duration: time.Since(begin), err: err}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(scrape{set: s, text: results})
	families, err := prometheus.Gatherers{s.gatherer, reg}.Gather()
	if err != nil && len(families) == 0 {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if err != nil {
		s.logger.Error("gathering metrics", "err", err)
	}

	format := expfmt.NegotiateAccept(r.Header, acceptedFormats...)
	header := w.Header()
	header.Set("Content-Type", string(format))
	header.Add("Vary", "Accept")
	header.Add("Vary", "Accept-Encoding")
	var out io.Writer = w
	if acceptsGzip(r) {
		header.Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	// Counters made with a created timestamp (the interruption counters' day start) carry it as a _created sample.
	enc := expfmt.NewEncoder(out, format, expfmt.WithCreatedLines())
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			s.logger.Error("encoding metrics", "err", err)
			return
		}
	}
	if _, err := out.Write(text.Bytes()); err != nil {
		s.logger.Debug("writing metrics", "err", err)
		return
	}
	// OpenMetrics ends with # EOF; the text format's Close writes nothing.
	if err := enc.(expfmt.Closer).Close(); err != nil {
		s.logger.Debug("writing metrics", "err", err)
	}
}

// acceptedFormats are the formats a scrape may ask for, the server's preference first. Both text formats only: the
// rendered families are sample lines common to the two, which no protobuf encoder could take.
var acceptedFormats = []expfmt.Format{expfmt.FmtOpenMetrics_1_0_0, expfmt.FmtOpenMetrics_0_0_1, expfmt.FmtText}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(strings.SplitN(part, ";", 2)[0]) == "gzip" {
			return true
		}
	}
	return false
}
