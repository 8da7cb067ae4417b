// Package collector holds what every collector shares: the --collector.<name> switches, the per-collector
// success/duration series, and the /metrics handler that serves client_golang metrics next to pre-rendered text.
package collector

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
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

// CachedTextCollector is a TextCollector whose text changes only when its generation does, so a scrape serves the
// bytes, and their compression, that an earlier scrape made for the same generation: a scrape of a cluster that did
// not change is a copy.
type CachedTextCollector interface {
	TextCollector
	// TextGeneration numbers the text WriteText writes now. A scrape reads it before WriteText, so a change in
	// between only makes the next scrape render again.
	TextGeneration() uint64
}

// Set is the enabled collectors of one command.
type Set struct {
	logger     *slog.Logger
	collectors map[string]Collector
	gatherer   prometheus.Gatherer
	// texts are the text collectors' parts, by name: a scrape writes them in this order, after the client_golang
	// series.
	texts []*textPart
	// buffers hold a scrape's client_golang series and uncached text; flaters compress what is not cached.
	buffers sync.Pool
	flaters sync.Pool
}

// textPart is one text collector's place in the exposition, with its latest cacheable rendering.
type textPart struct {
	name string
	c    TextCollector
	mu   sync.Mutex
	last *rendering // nil until a CachedTextCollector rendered without error
}

// rendering is a text collector's text as one scrape renders it.
type rendering struct {
	cached     bool // kept for later scrapes of the same generation
	generation uint64
	text       []byte
	// users are the scrapes writing text (under textPart.mu): a rendering none uses lends its buffer to the next,
	// so a change does not cost tens of MB of garbage.
	users int
	// deflated is text compressed as deflate blocks that end in a sync flush, so they follow any other such
	// blocks in one stream; made by the first scrape that asks for gzip.
	deflateOnce sync.Once
	deflated    []byte
}

// NewSet serves collectors next to the series of gatherer (the command's self-monitoring registry).
func NewSet(logger *slog.Logger, gatherer prometheus.Gatherer, collectors map[string]Collector) *Set {
	s := &Set{
		logger:     logger,
		collectors: collectors,
		gatherer:   gatherer,
		buffers:    sync.Pool{New: func() any { return new(bytes.Buffer) }},
		flaters: sync.Pool{New: func() any {
			// Fast: the bulk of a large exposition is compressed once per change, and the rest is small.
			w, _ := flate.NewWriter(nil, flate.BestSpeed)
			return w
		}},
	}
	for name, c := range collectors {
		if tc, ok := c.(TextCollector); ok {
			s.texts = append(s.texts, &textPart{name: name, c: tc})
		}
	}
	slices.SortFunc(s.texts, func(a, b *textPart) int { return strings.Compare(a.name, b.name) })
	return s
}

// render is the part's text for this scrape: the cached rendering when its generation is current, else a new one.
// A failed collector's text is dropped, since a half-written part would corrupt the exposition. done releases it.
func (s *Set) render(p *textPart) (r *rendering, done func(), err error) {
	cc, cacheable := p.c.(CachedTextCollector)
	if !cacheable {
		buf := s.buffers.Get().(*bytes.Buffer)
		if err := p.c.WriteText(buf); err != nil {
			buf.Reset()
			return &rendering{}, func() { s.buffers.Put(buf) }, err
		}
		return &rendering{text: buf.Bytes()}, func() { buf.Reset(); s.buffers.Put(buf) }, nil
	}
	generation := cc.TextGeneration()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || p.last.generation != generation {
		var buf []byte
		if p.last != nil {
			if p.last.users == 0 {
				buf = p.last.text[:0]
			} else {
				buf = make([]byte, 0, len(p.last.text))
			}
		}
		out := bytes.NewBuffer(buf)
		p.last = nil
		if err := p.c.WriteText(out); err != nil {
			return &rendering{}, func() {}, err
		}
		p.last = &rendering{cached: true, generation: generation, text: out.Bytes()}
	}
	r = p.last
	r.users++
	return r, func() { p.mu.Lock(); r.users--; p.mu.Unlock() }, nil
}

// deflate is the rendering's cached compression.
func (s *Set) deflate(r *rendering) []byte {
	r.deflateOnce.Do(func() {
		var out bytes.Buffer
		zw := s.flaters.Get().(*flate.Writer)
		defer s.flaters.Put(zw)
		zw.Reset(&out)
		_, _ = zw.Write(r.text)
		_ = zw.Flush()
		r.deflated = out.Bytes()
	})
	return r.deflated
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
	results := make(map[string]result)
	texts := make([]*rendering, len(s.texts))
	for i, p := range s.texts {
		begin := time.Now()
		rendered, done, err := s.render(p)
		defer done()
		texts[i] = rendered
		results[p.name] = result{duration: time.Since(begin), err: err}
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
	buf := s.buffers.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); s.buffers.Put(buf) }()
	// Counters made with a created timestamp (the interruption counters' day start) carry it as a _created sample.
	enc := expfmt.NewEncoder(buf, format, expfmt.WithCreatedLines())
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			s.logger.Error("encoding metrics", "err", err)
			http.Error(w, "encoding metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	mark := buf.Len()
	// OpenMetrics ends with # EOF; the text format's Close writes nothing.
	if err := enc.(expfmt.Closer).Close(); err != nil {
		s.logger.Error("encoding metrics", "err", err)
	}
	head, tail := buf.Bytes()[:mark], buf.Bytes()[mark:]

	header := w.Header()
	header.Set("Content-Type", string(format))
	header.Add("Vary", "Accept")
	header.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		header.Set("Content-Encoding", "gzip")
		err = s.writeGzip(w, head, texts, tail)
	} else {
		size := len(head) + len(tail)
		for _, t := range texts {
			size += len(t.text)
		}
		header.Set("Content-Length", strconv.Itoa(size))
		err = writeAll(w, head, texts, tail)
	}
	if err != nil {
		s.logger.Debug("writing metrics", "err", err)
	}
}

func writeAll(w io.Writer, head []byte, texts []*rendering, tail []byte) error {
	if _, err := w.Write(head); err != nil {
		return err
	}
	for _, t := range texts {
		if _, err := w.Write(t.text); err != nil {
			return err
		}
	}
	_, err := w.Write(tail)
	return err
}

// gzipHeader is a gzip member's header with no name, time or flags (RFC 1952), as compress/gzip writes it.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

// writeGzip writes one gzip member whose deflate stream is head, the texts and tail, each compressed on its own and
// ending in a sync flush, so the cached compression of an unchanged text is copied, not made again. compress/gzip
// cannot take compressed blocks, so the header and trailer are written here.
func (s *Set) writeGzip(w io.Writer, head []byte, texts []*rendering, tail []byte) error {
	zw := s.flaters.Get().(*flate.Writer)
	defer s.flaters.Put(zw)
	if _, err := w.Write(gzipHeader); err != nil {
		return err
	}
	compress := func(b []byte, last bool) error {
		zw.Reset(w)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		if last {
			return zw.Close()
		}
		return zw.Flush()
	}
	if err := compress(head, false); err != nil {
		return err
	}
	crc, size := crc32.ChecksumIEEE(head), len(head)
	for _, t := range texts {
		var err error
		if t.cached {
			_, err = w.Write(s.deflate(t))
		} else {
			err = compress(t.text, false)
		}
		if err != nil {
			return err
		}
		crc, size = crc32.Update(crc, crc32.IEEETable, t.text), size+len(t.text)
	}
	if err := compress(tail, true); err != nil {
		return err
	}
	crc, size = crc32.Update(crc, crc32.IEEETable, tail), size+len(tail)
	_, err := w.Write(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, crc), uint32(size)))
	return err
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
