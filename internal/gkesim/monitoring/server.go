// Package monitoring simulates the Cloud Monitoring API as GKE's interruption metrics are read from it: the gRPC
// MetricService's ListTimeSeries with its filter language (a subset, see filter.go), its (start, end] interval,
// FULL and HEADERS views, page sizes counted in points and opaque page tokens, points newest first, points that
// become visible only some time after their end time, and injected errors: failed calls (quota errors with the
// RetryInfo the real API sends) and partial answers that carry execution errors. Tests and the demo record interruptions through the Go API;
// the real client library reaches the simulator over loopback gRPC without credentials.
package monitoring

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	metricpb "google.golang.org/genproto/googleapis/api/metric"
	monitoredrespb "google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/grpcserve"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The metric and monitored-resource types GKE writes interruptions to.
const (
	MetricNodeInterruptions     = "kubernetes.io/node/interruption_count"
	MetricNodePoolInterruptions = "kubernetes.io/node_pool/interruption_count"
	ResourceNode                = "k8s_node"
	ResourceNodePool            = "k8s_node_pool"
)

const (
	// DefaultSamplePeriod is GKE's sampling period of the interruption metrics.
	DefaultSamplePeriod = time.Minute
	// MaxPageSize is the API's largest effective page size (in points for the FULL view).
	MaxPageSize = 100000
)

// Options configure a Server.
type Options struct {
	// Now is the simulator's clock; nil means time.Now. Visibility of points is judged by it.
	Now func() time.Time
	// Delay is how long after its end time a point becomes visible (GKE: up to about 150 s).
	Delay time.Duration
	// SamplePeriod aligns points' end times: an interruption counts in the sample ending at the first period
	// boundary at or after it. 0 means DefaultSamplePeriod.
	SamplePeriod time.Duration
	// MaxPageSize caps the page size a request may ask for, and is the size when it asks for none. 0 means
	// MaxPageSize.
	MaxPageSize int
}

// Interruption is what GKE records when a node is interrupted.
type Interruption struct {
	Project  string // resource label project_id; also the project that lists it
	Location string // resource label location (zone or region of the cluster)
	Cluster  string // resource label cluster_name
	Node     string // when set, counts on kubernetes.io/node/interruption_count of this node
	NodePool string // when set, counts on kubernetes.io/node_pool/interruption_count of this pool
	Type     string // metric label interruption_type, e.g. MaintenanceEvent
	Reason   string // metric label interruption_reason, e.g. "HW/SW Maintenance"
	Count    int64  // the point's value; 0 records an explicit zero sample
	Time     time.Time
}

// ErrPublished is returned when an interruption falls into a sample a ListTimeSeries response has already carried:
// published points are immutable, so a reader that has seen the point would never learn of the change. Samples no
// one has read yet can still be added to, so tests can script a history after the fact.
var ErrPublished = errors.New("the sample is already published")

type point struct {
	end       time.Time
	visibleAt time.Time
	value     int64
	served    bool // a response has carried it
}

type series struct {
	key            string
	metricType     string
	resourceType   string
	resourceLabels map[string]string // never changed after creation: responses share it
	metricLabels   map[string]string
	points         []point // oldest first
}

// Server is a simulated MetricService. Create it with New.
type Server struct {
	*grpcserve.Listeners // Serve, Start, Close

	monitoringpb.UnimplementedMetricServiceServer

	now         func() time.Time
	period      time.Duration
	maxPageSize int

	mu          sync.Mutex
	delay       time.Duration
	series      map[string]*series
	ordered     []*series // by key; nil when a series was added since the last sort
	failCode    codes.Code
	failLeft    int // calls left to fail; negative: all until Fail is called again
	retryDelay  time.Duration
	partialLeft int           // calls left to answer partially
	loopPages   bool          // every answer points back to the first page
	latency     time.Duration // before every answer
	calls       int
}

// New returns a simulator with no data.
func New(opts Options) *Server {
	s := &Server{
		now:         opts.Now,
		period:      opts.SamplePeriod,
		maxPageSize: opts.MaxPageSize,
		delay:       opts.Delay,
		series:      map[string]*series{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.period <= 0 {
		s.period = DefaultSamplePeriod
	}
	if s.maxPageSize <= 0 || s.maxPageSize > MaxPageSize {
		s.maxPageSize = MaxPageSize
	}
	s.Listeners = grpcserve.New(func(gs *grpc.Server) { monitoringpb.RegisterMetricServiceServer(gs, s) })
	return s
}

// Fail makes the next n ListTimeSeries calls fail with code, before any other handling. A negative n fails every
// call until Fail is called again; Fail(codes.OK, 0) ends a fault.
func (s *Server) Fail(code codes.Code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failLeft, s.retryDelay = code, n, 0
}

// FailQuota makes the next n ListTimeSeries calls fail with ResourceExhausted carrying a RetryInfo of delay, as
// the API does when a quota is exhausted.
func (s *Server) FailQuota(n int, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failLeft, s.retryDelay = codes.ResourceExhausted, n, delay
}

// Partial makes the next n ListTimeSeries calls answer partially, as the API does when some of its backends fail:
// every other series of the page is left out, and the response carries an execution error.
func (s *Server) Partial(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partialLeft = n
}

// LoopPages, while on, answers every call with a page token that leads back to the first page, as a buggy backend
// might: a client that follows page tokens without checking them lists forever.
func (s *Server) LoopPages(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loopPages = on
}

// SetLatency makes every ListTimeSeries call from now on wait d before it is answered (or its deadline passes).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls is the number of ListTimeSeries calls received, including failed and rejected ones.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Record counts an interruption on the node series, the node pool series, or both. The point it lands in becomes
// visible Delay after the end of its sample. Invalid input and ErrPublished record nothing.
func (s *Server) Record(i Interruption) error {
	if i.Project == "" || i.Location == "" || i.Cluster == "" {
		return errors.New("an interruption needs a project, a location and a cluster")
	}
	if i.Node == "" && i.NodePool == "" {
		return errors.New("an interruption needs a node, a node pool or both")
	}
	if i.Count < 0 {
		return fmt.Errorf("count %d: interruption counts cannot be negative", i.Count)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := i.Time
	if at.IsZero() {
		at = s.now()
	}
	end := at.Truncate(s.period)
	if end.Before(at) {
		end = end.Add(s.period)
	}
	metricLabels := map[string]string{"interruption_type": i.Type, "interruption_reason": i.Reason}
	type target struct {
		metricType, resourceType string
		resourceLabels           map[string]string
	}
	var targets []target
	if i.Node != "" {
		targets = append(targets, target{MetricNodeInterruptions, ResourceNode, map[string]string{
			"project_id": i.Project, "location": i.Location, "cluster_name": i.Cluster, "node_name": i.Node,
		}})
	}
	if i.NodePool != "" {
		targets = append(targets, target{MetricNodePoolInterruptions, ResourceNodePool, map[string]string{
			"project_id": i.Project, "location": i.Location, "cluster_name": i.Cluster, "node_pool_name": i.NodePool,
		}})
	}
	for _, t := range targets {
		if ser := s.series[seriesKey(t.metricType, t.resourceType, t.resourceLabels, metricLabels)]; ser != nil {
			if p := ser.pointAt(end); p != nil && p.served {
				return fmt.Errorf("%s sample ending %s: %w", t.metricType, end.UTC().Format(time.RFC3339), ErrPublished)
			}
		}
	}
	for _, t := range targets {
		key := seriesKey(t.metricType, t.resourceType, t.resourceLabels, metricLabels)
		ser := s.series[key]
		if ser == nil {
			ser = &series{key: key, metricType: t.metricType, resourceType: t.resourceType,
				resourceLabels: t.resourceLabels, metricLabels: metricLabels}
			s.series[key] = ser
			s.ordered = nil
		}
		if p := ser.pointAt(end); p != nil {
			p.value += i.Count
			continue
		}
		ser.points = append(ser.points, point{end: end, visibleAt: end.Add(s.delay), value: i.Count})
		sort.Slice(ser.points, func(a, b int) bool { return ser.points[a].end.Before(ser.points[b].end) })
	}
	return nil
}

func (ser *series) pointAt(end time.Time) *point {
	for k := range ser.points {
		if ser.points[k].end.Equal(end) {
			return &ser.points[k]
		}
	}
	return nil
}

func seriesKey(metricType, resourceType string, resourceLabels, metricLabels map[string]string) string {
	var b strings.Builder
	b.WriteString(metricType)
	b.WriteByte(0)
	b.WriteString(resourceType)
	for _, labels := range []map[string]string{resourceLabels, metricLabels} {
		names := make([]string, 0, len(labels))
		for k := range labels {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b.WriteByte(0)
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(labels[k])
		}
	}
	return b.String()
}

// query is a validated ListTimeSeries request.
type query struct {
	project    string
	filter     *filter
	start, end time.Time
	headers    bool
	pageSize   int
	hash       uint64
}

// ListTimeSeries lists the series matching the request's filter that have points in its interval, oldest series
// key first and each series' points newest first. A page holds up to page_size points (FULL view; a series may
// continue on the next page) or series (HEADERS view).
func (s *Server) ListTimeSeries(ctx context.Context, req *monitoringpb.ListTimeSeriesRequest) (*monitoringpb.ListTimeSeriesResponse, error) {
	s.mu.Lock()
	s.calls++
	latency := s.latency
	s.mu.Unlock()
	if latency > 0 {
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(latency):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failLeft != 0 {
		if s.failLeft > 0 {
			s.failLeft--
		}
		st := status.Newf(s.failCode, "simulated %s", s.failCode)
		if s.retryDelay > 0 {
			if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.retryDelay)}); err == nil {
				st = detailed
			}
		}
		return nil, st.Err()
	}
	q, err := s.parseRequest(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	asOf, offset := s.now(), 0
	if req.GetPageToken() != "" {
		if asOf, offset, err = parseToken(req.GetPageToken(), q.hash); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}

	if s.ordered == nil {
		s.ordered = make([]*series, 0, len(s.series))
		for _, ser := range s.series {
			s.ordered = append(s.ordered, ser)
		}
		sort.Slice(s.ordered, func(a, b int) bool { return s.ordered[a].key < s.ordered[b].key })
	}

	resp := &monitoringpb.ListTimeSeriesResponse{}
	unit, taken := 0, 0 // unit counts points (FULL) or series (HEADERS) across all matching series
	for _, ser := range s.ordered {
		if ser.resourceLabels["project_id"] != q.project || !q.filter.root.match(ser) {
			continue
		}
		points := ser.visiblePoints(q.start, q.end, asOf)
		if len(points) == 0 {
			continue
		}
		units := len(points)
		if q.headers {
			units = 1
		}
		if unit+units <= offset {
			unit += units
			continue
		}
		if taken == q.pageSize {
			resp.NextPageToken = makeToken(asOf, unit, q.hash)
			break
		}
		from := max(offset-unit, 0)
		n := min(units-from, q.pageSize-taken)
		ts := ser.header()
		if !q.headers {
			ts.Points = serve(points[from : from+n])
		}
		resp.TimeSeries = append(resp.TimeSeries, ts)
		unit += from + n
		taken += n
		if from+n < units {
			resp.NextPageToken = makeToken(asOf, unit, q.hash)
			break
		}
	}
	if s.loopPages {
		resp.NextPageToken = makeToken(asOf, 0, q.hash)
	}
	if s.partialLeft > 0 {
		s.partialLeft--
		var kept []*monitoringpb.TimeSeries
		for k, ts := range resp.TimeSeries {
			if k%2 == 0 {
				kept = append(kept, ts)
			}
		}
		resp.TimeSeries = kept
		resp.ExecutionErrors = append(resp.ExecutionErrors,
			&rpcstatus.Status{Code: int32(codes.Unavailable), Message: "simulated: some data could not be read"})
	}
	return resp, nil
}

func (s *Server) parseRequest(req *monitoringpb.ListTimeSeriesRequest) (*query, error) {
	project, ok := strings.CutPrefix(req.GetName(), "projects/")
	if !ok || project == "" || strings.Contains(project, "/") {
		return nil, fmt.Errorf("name %q: want projects/PROJECT_ID", req.GetName())
	}
	f, err := parseFilter(req.GetFilter())
	if err != nil {
		return nil, fmt.Errorf("filter %q: %w", req.GetFilter(), err)
	}
	if req.GetAggregation() != nil || req.GetSecondaryAggregation() != nil {
		return nil, errors.New("aggregation is not supported by the simulator: it returns raw points")
	}
	if req.GetOrderBy() != "" {
		return nil, errors.New("order_by must be left blank")
	}
	iv := req.GetInterval()
	if iv.GetEndTime() == nil {
		return nil, errors.New("interval.end_time is required")
	}
	if err := iv.GetEndTime().CheckValid(); err != nil {
		return nil, fmt.Errorf("interval.end_time: %w", err)
	}
	end := iv.GetEndTime().AsTime()
	start := end
	if iv.GetStartTime() != nil {
		if err := iv.GetStartTime().CheckValid(); err != nil {
			return nil, fmt.Errorf("interval.start_time: %w", err)
		}
		start = iv.GetStartTime().AsTime()
	}
	if start.After(end) {
		return nil, errors.New("interval.start_time is later than interval.end_time")
	}
	var headers bool
	switch req.GetView() {
	case monitoringpb.ListTimeSeriesRequest_FULL:
	case monitoringpb.ListTimeSeriesRequest_HEADERS:
		headers = true
	default:
		return nil, fmt.Errorf("unknown view %v", req.GetView())
	}
	pageSize := int(req.GetPageSize())
	if pageSize < 0 {
		return nil, fmt.Errorf("page_size %d is negative", pageSize)
	}
	if pageSize == 0 || pageSize > s.maxPageSize {
		pageSize = s.maxPageSize
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%v", req.GetName(), req.GetFilter(), start.UnixNano(), end.UnixNano(), req.GetView())
	return &query{project: project, filter: f, start: start, end: end, headers: headers, pageSize: pageSize, hash: h.Sum64()}, nil
}

// visiblePoints are the points ending in (start, end] visible at asOf, newest first. As in the API, the start is
// excluded, unless it equals the end: then the interval is that one instant.
func (ser *series) visiblePoints(start, end, asOf time.Time) []*point {
	var out []*point
	for k := len(ser.points) - 1; k >= 0; k-- {
		p := &ser.points[k]
		inside := p.end.After(start) || (start.Equal(end) && p.end.Equal(end))
		if inside && !p.end.After(end) && !asOf.Before(p.visibleAt) {
			out = append(out, p)
		}
	}
	return out
}

// serve renders points for a response and marks them as read.
func serve(points []*point) []*monitoringpb.Point {
	out := make([]*monitoringpb.Point, len(points))
	for k, p := range points {
		p.served = true
		ts := timestamppb.New(p.end)
		out[k] = &monitoringpb.Point{
			Interval: &monitoringpb.TimeInterval{StartTime: ts, EndTime: ts},
			Value:    &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: p.value}},
		}
	}
	return out
}

func (ser *series) header() *monitoringpb.TimeSeries {
	return &monitoringpb.TimeSeries{
		Metric:     &metricpb.Metric{Type: ser.metricType, Labels: ser.metricLabels},
		Resource:   &monitoredrespb.MonitoredResource{Type: ser.resourceType, Labels: ser.resourceLabels},
		MetricKind: metricpb.MetricDescriptor_GAUGE,
		ValueType:  metricpb.MetricDescriptor_INT64,
		Unit:       "1",
	}
}

// A page token carries the time the first page was listed at (so later pages see the same points), the offset of
// the next unit, and a hash of the request it belongs to.
func makeToken(asOf time.Time, offset int, hash uint64) string {
	raw := strconv.FormatInt(asOf.UnixNano(), 10) + ":" + strconv.Itoa(offset) + ":" + strconv.FormatUint(hash, 16)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseToken(token string, hash uint64) (time.Time, int, error) {
	bad := errors.New("invalid page token")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return time.Time{}, 0, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 {
		return time.Time{}, 0, bad
	}
	nanos, err1 := strconv.ParseInt(parts[0], 10, 64)
	offset, err2 := strconv.Atoi(parts[1])
	h, err3 := strconv.ParseUint(parts[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || offset < 0 {
		return time.Time{}, 0, bad
	}
	if h != hash {
		return time.Time{}, 0, errors.New("the page token belongs to a different request")
	}
	return time.Unix(0, nanos), offset, nil
}
