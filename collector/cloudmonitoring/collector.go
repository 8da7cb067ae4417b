// Package cloudmonitoring turns GKE's interruption metrics in Cloud Monitoring, kubernetes.io/node/interruption_count
// and kubernetes.io/node_pool/interruption_count, into the counters gke_node_interruptions_total and
// gke_node_pool_interruptions_total.
//
// Both metrics are GAUGE INT64 series whose points each count the interruptions since the previous sample, and
// points become visible up to about 150 s after their end time. A counter is a pure function of that history: the
// sum of its series' points that end in the current UTC day (the anchor, switching --cloudmonitoring.lookback after
// midnight so the day's late points still count). At start the collector lists the whole day, page by page, and
// counts it; then it lists each metric once per project and poll interval over a window reaching back the look-back
// before the previous successful listing (never before the day), and adds every point to its counter exactly once
// (by series and point end time). So two exporters show the same values however far apart they started, and a
// restarted exporter counts what the previous one did, including points that arrived in between. A failed or
// partial listing does not move the window; the next one reaches back to the last complete listing.
package cloudmonitoring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	gax "github.com/googleapis/gax-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/googleapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// The Cloud Monitoring metric and resource types read.
const (
	MetricNodeInterruptions     = "kubernetes.io/node/interruption_count"
	MetricNodePoolInterruptions = "kubernetes.io/node_pool/interruption_count"
	resourceNode                = "k8s_node"
	resourceNodePool            = "k8s_node_pool"
)

// maxPageSize is the API's largest page, in points.
const maxPageSize = 100000

// defaultMaxPages bounds one listing: at the API's largest page, a day of one-minute points of some 70,000 series.
const defaultMaxPages = 1000

// minListingTimeout is the shortest default deadline of one listing, however short the interval.
const minListingTimeout = time.Minute

var (
	nodeDesc = prometheus.NewDesc("gke_node_interruptions_total",
		"Node interruptions reported by Cloud Monitoring (kubernetes.io/node/interruption_count).",
		[]string{"cluster_project_id", "cluster_location", "cluster_name", "node", "interruption_type", "interruption_reason"}, nil)
	nodePoolDesc = prometheus.NewDesc("gke_node_pool_interruptions_total",
		"Node pool interruptions reported by Cloud Monitoring (kubernetes.io/node_pool/interruption_count).",
		[]string{"cluster_project_id", "cluster_location", "cluster_name", "node_pool", "interruption_type", "interruption_reason"}, nil)
)

// Cluster is one cluster whose interruptions are kept: resource labels cluster_name and, when set, location.
type Cluster struct {
	Location string // empty matches a cluster of this name in any location
	Name     string
}

// ParseCluster reads "location/name" or a plain "name" (any location).
func ParseCluster(s string) (Cluster, error) {
	location, name, found := strings.Cut(s, "/")
	if !found {
		location, name = "", s
	}
	switch {
	case name == "" || (found && location == ""):
		return Cluster{}, fmt.Errorf("cluster %q: want location/name or name", s)
	case strings.ContainsAny(name, "/ \t\n") || strings.ContainsAny(location, " \t\n"):
		return Cluster{}, fmt.Errorf("cluster %q: want location/name or name", s)
	}
	return Cluster{Location: location, Name: name}, nil
}

func (c Cluster) String() string {
	if c.Location == "" {
		return c.Name
	}
	return c.Location + "/" + c.Name
}

// Config says what to list and how often.
type Config struct {
	Projects       []string      // projects whose metrics are listed, each with its own calls
	Clusters       []Cluster     // clusters to keep; empty keeps all
	Interval       time.Duration // between listings of one metric and project
	Lookback       time.Duration // how late a point may turn up and still be counted
	IdleTimeout    time.Duration // a series without points in the current day is dropped after this long idle
	PageSize       int           // points per page; 0 means the API's largest
	MaxPages       int           // pages one listing may take before it is abandoned; 0 means defaultMaxPages
	ListingTimeout time.Duration // deadline of one listing, all pages; 0 means the interval, at least minListingTimeout
	ClusterSource  string        // where Clusters came from, for the cluster_info series: a Source* value
}

// Where the listed clusters came from.
const (
	SourceFlag     = "flag"     // --cloudmonitoring.cluster (the default with clusters)
	SourceMetadata = "metadata" // the metadata server's cluster-name and cluster-location
	SourceAll      = "all"      // none known: every cluster of the projects (the default without clusters)
)

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if len(c.Projects) == 0 {
		return errors.New("no project given")
	}
	for i, p := range c.Projects {
		if p == "" || strings.ContainsAny(p, "/ \t\n") {
			return fmt.Errorf("project %q: want a project ID or number", p)
		}
		if slices.Contains(c.Projects[:i], p) {
			return fmt.Errorf("project %q given twice", p)
		}
	}
	for i, cluster := range c.Clusters {
		if cluster.Name == "" {
			return errors.New("empty cluster name")
		}
		if slices.Contains(c.Clusters[:i], cluster) {
			return fmt.Errorf("cluster %s given twice", cluster)
		}
	}
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("interval %v: must be positive", c.Interval)
	case c.Lookback <= 0 || c.Lookback >= day:
		return fmt.Errorf("look-back window %v: must be positive and under a day", c.Lookback)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("idle timeout %v: must be positive", c.IdleTimeout)
	case c.PageSize < 0 || c.PageSize > maxPageSize:
		return fmt.Errorf("page size %d: must be between 0 and %d", c.PageSize, maxPageSize)
	case c.MaxPages < 0:
		return fmt.Errorf("page limit %d: must not be negative", c.MaxPages)
	case c.ListingTimeout < 0:
		return fmt.Errorf("listing timeout %v: must not be negative", c.ListingTimeout)
	}
	return nil
}

// NewClient connects to Cloud Monitoring with Application Default Credentials (Workload Identity on GKE), or, with
// plaintext, to endpoint over unencrypted gRPC without credentials (the simulator).
func NewClient(ctx context.Context, endpoint string, plaintext bool) (*monitoring.MetricClient, error) {
	opts, err := googleapi.ClientOptions(endpoint, plaintext, "--cloudmonitoring.endpoint", "--cloudmonitoring.insecure")
	if err != nil {
		return nil, err
	}
	client, err := monitoring.NewMetricClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating Cloud Monitoring client: %w", err)
	}
	return client, nil
}

// query is the listing of one metric in one project.
type query struct {
	metricType string
	project    string
	filter     string
	family     *family
	labels     func(dst []string, ts *monitoringpb.TimeSeries, project string) []string

	succeeded bool      // a listing has completed in full
	listed    time.Time // end of the last complete listing
	lastErr   error     // of the latest attempt; nil after a success
	attempted bool
	failures  int       // consecutive retryable failures, for the backoff
	due       time.Time // next attempt, for Run
}

// Collector keeps the interruption counters current by polling; a scrape only reads them.
type Collector struct {
	logger   *slog.Logger
	client   *monitoring.MetricClient
	cfg      Config
	now      func() time.Time
	jitter   func() float64 // in [0, 1)
	families []*family

	requests    *prometheus.CounterVec
	lastSuccess prometheus.Gauge

	mu      sync.Mutex
	queries []*query
}

// New builds a collector listing through client; Run polls. Its request counter and last-success gauge register
// with reg.
func New(logger *slog.Logger, client *monitoring.MetricClient, cfg Config, reg prometheus.Registerer) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Collector{
		logger: logger,
		client: client,
		cfg:    cfg,
		now:    time.Now,
		jitter: rand.Float64,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "cloudmonitoring_requests_total",
			Help:      "Cloud Monitoring ListTimeSeries calls (one per page), by metric type and gRPC code.",
		}, []string{"metric", "code"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace,
			Name:      "cloudmonitoring_last_success_timestamp_seconds",
			Help:      "When the latest listings of every metric and project had all succeeded, in seconds since the epoch.",
		}),
	}
	nodes := newFamily(nodeDesc, cfg.Interval, cfg.IdleTimeout, cfg.Lookback)
	pools := newFamily(nodePoolDesc, cfg.Interval, cfg.IdleTimeout, cfg.Lookback)
	c.families = []*family{nodes, pools}
	for _, project := range cfg.Projects {
		c.queries = append(c.queries,
			&query{metricType: MetricNodeInterruptions, project: project, family: nodes, labels: nodeLabels,
				filter: listFilter(MetricNodeInterruptions, resourceNode, cfg.Clusters)},
			&query{metricType: MetricNodePoolInterruptions, project: project, family: pools, labels: nodePoolLabels,
				filter: listFilter(MetricNodePoolInterruptions, resourceNodePool, cfg.Clusters)})
	}
	for _, metric := range []string{MetricNodeInterruptions, MetricNodePoolInterruptions} {
		c.requests.WithLabelValues(metric, codes.OK.String())
	}
	clusters := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: nodeview.Namespace,
		Name:      "cloudmonitoring_cluster_info",
		Help:      "The clusters whose interruptions are listed (1 each; cluster_location empty: any), and where the choice came from (source: flag, metadata, or all: every cluster of the projects).",
	}, []string{"cluster_location", "cluster_name", "source"})
	source := cfg.ClusterSource
	switch {
	case source != "":
	case len(cfg.Clusters) == 0:
		source = SourceAll
	default:
		source = SourceFlag
	}
	if len(cfg.Clusters) == 0 {
		clusters.WithLabelValues("", "", source).Set(1)
	}
	for _, cluster := range cfg.Clusters {
		clusters.WithLabelValues(cluster.Location, cluster.Name, source).Set(1)
	}
	for _, m := range []prometheus.Collector{c.requests, c.lastSuccess, clusters} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// listFilter selects one metric and resource type, and the clusters (each in its location, if given) asked for.
func listFilter(metricType, resourceType string, clusters []Cluster) string {
	f := "metric.type = " + strconv.Quote(metricType) + " AND resource.type = " + strconv.Quote(resourceType)
	if len(clusters) == 0 {
		return f
	}
	alternatives := make([]string, len(clusters))
	for i, cluster := range clusters {
		alternatives[i] = "resource.labels.cluster_name = " + strconv.Quote(cluster.Name)
		if cluster.Location != "" {
			alternatives[i] = "(" + alternatives[i] + " AND resource.labels.location = " + strconv.Quote(cluster.Location) + ")"
		}
	}
	return f + " AND (" + strings.Join(alternatives, " OR ") + ")"
}

func nodeLabels(dst []string, ts *monitoringpb.TimeSeries, project string) []string {
	return seriesLabels(dst, ts, project, ts.GetResource().GetLabels()["node_name"])
}

func nodePoolLabels(dst []string, ts *monitoringpb.TimeSeries, project string) []string {
	return seriesLabels(dst, ts, project, ts.GetResource().GetLabels()["node_pool_name"])
}

// seriesLabels appends the exported label values, in descriptor order, to dst; cluster_project_id falls back to
// the listed project.
func seriesLabels(dst []string, ts *monitoringpb.TimeSeries, project, object string) []string {
	r := ts.GetResource().GetLabels()
	m := ts.GetMetric().GetLabels()
	if p := r["project_id"]; p != "" {
		project = p
	}
	return append(dst, project, r["location"], r["cluster_name"], object, m["interruption_type"], m["interruption_reason"])
}

// Run polls every metric and project on the interval until ctx ends, retrying throttled and unavailable listings
// sooner, with backoff and jitter.
func (c *Collector) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		var next time.Time
		for _, q := range c.queries {
			if !c.now().Before(q.due) {
				c.poll(ctx, q)
			}
			if next.IsZero() || q.due.Before(next) {
				next = q.due
			}
		}
		timer.Reset(next.Sub(c.now()))
	}
}

// Poll lists every metric and project once, now, and returns the errors of the listings that failed.
func (c *Collector) Poll(ctx context.Context) error {
	var errs []error
	for _, q := range c.queries {
		errs = append(errs, c.poll(ctx, q))
	}
	return errors.Join(errs...)
}

// errPartial is a listing the API answered with execution errors: some of the data may be missing.
var errPartial = errors.New("partial answer")

// codePartial counts, in requests_total, calls answered with execution errors.
const codePartial = "Partial"

// errUnbounded is a listing abandoned because its pages did not end: a page token came back a second time, or the
// pages went past the limit. Listing on would call the API forever and burn the project's shared quota.
var errUnbounded = errors.New("listing abandoned")

// Codes counted, in requests_total, for the call whose answer ended a listing that did not end by itself.
const (
	codeRepeatedPageToken = "RepeatedPageToken"
	codeTooManyPages      = "TooManyPages"
)

func (c *Collector) maxPages() int {
	if c.cfg.MaxPages > 0 {
		return c.cfg.MaxPages
	}
	return defaultMaxPages
}

func (c *Collector) listingTimeout() time.Duration {
	if c.cfg.ListingTimeout > 0 {
		return c.cfg.ListingTimeout
	}
	return max(c.cfg.Interval, minListingTimeout)
}

// windowStartLocked is where q's next listing starts (exclusive): the look-back before its last complete listing,
// never before the exposed day nor the idle time, which bound a catch-up after an outage; the whole day at first.
func (c *Collector) windowStartLocked(q *query, now time.Time) time.Time {
	base := anchorAt(now, c.cfg.Lookback)
	if idle := now.Add(-c.cfg.IdleTimeout); idle.Before(base) {
		base = idle
	}
	if q.succeeded {
		if from := q.listed.Add(-c.cfg.Lookback); from.After(base) {
			return from
		}
	}
	return base
}

// poll lists q's window page by page, counts the new points, and schedules q's next attempt.
func (c *Collector) poll(ctx context.Context, q *query) error {
	now := c.now()
	c.mu.Lock()
	fresh := q.succeeded
	from := c.windowStartLocked(q, now)
	c.mu.Unlock()

	req := &monitoringpb.ListTimeSeriesRequest{
		Name:     "projects/" + q.project,
		Filter:   q.filter,
		Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(from), EndTime: timestamppb.New(now)},
		View:     monitoringpb.ListTimeSeriesRequest_FULL,
		PageSize: int32(c.cfg.PageSize),
	}
	// The client's own retries are off: this loop backs off itself. Each page is fetched with one call, so that every
	// call is counted by its code and every response is checked for execution errors (the iterator's own paging
	// may make several calls per page it hands out). A listing has a deadline and a page limit, and stops at a
	// page token it has seen: whatever the API answers, a listing ends.
	listCtx, cancel := context.WithTimeout(ctx, c.listingTimeout())
	defer cancel()
	it := c.client.ListTimeSeries(listCtx, req, gax.WithRetry(nil))
	var err error
	var ignored int
	token := ""
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		page, next, pageErr := it.InternalFetch(c.cfg.PageSize, token)
		code := googleapi.Code(pageErr).String()
		var partial []string
		if resp, ok := it.Response.(*monitoringpb.ListTimeSeriesResponse); ok && pageErr == nil {
			for _, e := range resp.GetExecutionErrors() {
				partial = append(partial, codes.Code(e.GetCode()).String()+": "+e.GetMessage())
			}
		}
		var unbounded error
		switch {
		case pageErr != nil:
		case next != "" && seen[next]:
			code = codeRepeatedPageToken
			unbounded = fmt.Errorf("%w: page token %q came back after %d pages", errUnbounded, next, pages)
		case next != "" && pages >= c.maxPages():
			code = codeTooManyPages
			unbounded = fmt.Errorf("%w: more than %d pages", errUnbounded, c.maxPages())
		case len(partial) > 0:
			code = codePartial
		}
		c.requests.WithLabelValues(q.metricType, code).Inc()
		if pageErr != nil {
			err = fmt.Errorf("listing %s in project %s: %w", q.metricType, q.project, pageErr)
			break
		}
		// Points of a partial or abandoned listing are real: counting them is safe, since the window stays and a
		// point is counted once however often it is listed.
		ignored += c.apply(q, page, now, fresh)
		if len(partial) > 0 && err == nil {
			err = fmt.Errorf("listing %s in project %s: %w: %s", q.metricType, q.project, errPartial, strings.Join(partial, "; "))
		}
		if unbounded != nil {
			err = fmt.Errorf("listing %s in project %s: %w", q.metricType, q.project, unbounded)
			break
		}
		if next == "" {
			break
		}
		seen[next] = true
		token = next
	}
	if ignored > 0 {
		c.logger.Warn("ignored points without an end time or with a value that is not a non-negative number",
			"metric", q.metricType, "project", q.project, "points", ignored)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	q.attempted = true
	q.lastErr = err
	code := googleapi.Code(err)
	switch {
	case err == nil:
		q.succeeded = true
		q.listed = now
		q.failures = 0
		q.due = now.Add(c.cfg.Interval)
	case errors.Is(err, errPartial) || retryable(code):
		q.failures++
		q.due = now.Add(max(backoff(c.cfg.Interval, q.failures, c.jitter()), retryDelay(err)))
	default:
		q.failures = 0
		q.due = now.Add(c.cfg.Interval)
	}
	q.family.commit(now, c.horizonLocked(q.family, now))
	if err != nil {
		if ctx.Err() == nil {
			logCode := code.String()
			switch {
			case errors.Is(err, errUnbounded):
				logCode = "Unbounded"
			case errors.Is(err, errPartial):
				logCode = codePartial
			}
			c.logger.Error("Cloud Monitoring listing failed", "metric", q.metricType, "project", q.project,
				"code", logCode, "retry_in", q.due.Sub(now).String(), "err", err)
		}
		return err
	}
	if c.allSucceededLocked() {
		c.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	}
	return nil
}

// apply counts the points of one page and returns how many it could not read.
func (c *Collector) apply(q *query, page []*monitoringpb.TimeSeries, now time.Time, fresh bool) (ignored int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var labels []string
	for _, ts := range page {
		labels = q.labels(labels[:0], ts, q.project)
		for _, p := range ts.GetPoints() {
			value, ok := pointValue(p)
			if !ok {
				ignored++
				continue
			}
			q.family.observe(labels, p.GetInterval().GetEndTime().AsTime(), value, now, fresh)
		}
	}
	return ignored
}

// pointValue reads a point's count. Points are GAUGE INT64; a double is taken as well. Counts cannot be negative.
func pointValue(p *monitoringpb.Point) (float64, bool) {
	if p.GetInterval().GetEndTime() == nil {
		return 0, false
	}
	var v float64
	switch tv := p.GetValue().GetValue().(type) {
	case *monitoringpb.TypedValue_Int64Value:
		v = float64(tv.Int64Value)
	case *monitoringpb.TypedValue_DoubleValue:
		v = tv.DoubleValue
	default:
		return 0, false
	}
	return v, v >= 0
}

// horizonLocked is the latest end time no listing of f will return again: the earliest start of the next window of
// its queries.
func (c *Collector) horizonLocked(f *family, now time.Time) time.Time {
	horizon := now
	for _, q := range c.queries {
		if q.family == f {
			if from := c.windowStartLocked(q, now); from.Before(horizon) {
				horizon = from
			}
		}
	}
	return horizon
}

func (c *Collector) allSucceededLocked() bool {
	for _, q := range c.queries {
		if !q.attempted || q.lastErr != nil {
			return false
		}
	}
	return true
}

var errNotPolled = errors.New("Cloud Monitoring not listed yet")

// Update sends the counters as of the latest listings. It fails while any metric and project has not been listed,
// or its latest listing failed; the counters keep their values meanwhile.
func (c *Collector) Update(ch chan<- prometheus.Metric) error {
	now := c.now()
	c.mu.Lock()
	var metrics []prometheus.Metric
	for _, f := range c.families {
		metrics = f.metrics(metrics, now)
	}
	var errs []error
	for _, q := range c.queries {
		switch {
		case !q.attempted:
			errs = append(errs, fmt.Errorf("%s in project %s: %w", q.metricType, q.project, errNotPolled))
		case q.lastErr != nil:
			errs = append(errs, q.lastErr)
		}
	}
	c.mu.Unlock()
	for _, m := range metrics {
		ch <- m
	}
	return errors.Join(errs...)
}
