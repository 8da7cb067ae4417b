package monitoring

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// start serves a simulator on loopback and returns it with a real client connected to it.
func start(t *testing.T, opts Options) (*Server, *monitoring.MetricClient) {
	t.Helper()
	sim, client, _ := startRaw(t, opts)
	return sim, client
}

// startRaw is start plus a bare gRPC stub, for looking at single pages and tokens.
func startRaw(t *testing.T, opts Options) (*Server, *monitoring.MetricClient, monitoringpb.MetricServiceClient) {
	t.Helper()
	sim := New(opts)
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	client, err := monitoring.NewMetricClient(context.Background(),
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sim, client, monitoringpb.NewMetricServiceClient(conn)
}

func request(filter string, start, end time.Time) *monitoringpb.ListTimeSeriesRequest {
	return &monitoringpb.ListTimeSeriesRequest{
		Name:   "projects/p1",
		Filter: filter,
		Interval: &monitoringpb.TimeInterval{
			StartTime: timestamppb.New(start),
			EndTime:   timestamppb.New(end),
		},
		View: monitoringpb.ListTimeSeriesRequest_FULL,
	}
}

// list reads every page, without the client's own retries so injected errors surface.
func list(client *monitoring.MetricClient, req *monitoringpb.ListTimeSeriesRequest) ([]*monitoringpb.TimeSeries, error) {
	it := client.ListTimeSeries(context.Background(), req, gax.WithRetry(nil))
	var out []*monitoringpb.TimeSeries
	for {
		ts, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ts)
	}
}

// render is a compact description of series: resource labels, metric labels and points (end time offset from t0
// in minutes, value), as the client received them.
func render(series []*monitoringpb.TimeSeries) []string {
	var out []string
	for _, ts := range series {
		r := ts.GetResource().GetLabels()
		m := ts.GetMetric().GetLabels()
		s := fmt.Sprintf("%s %s/%s/%s/%s%s %s/%s:", ts.GetResource().GetType(), r["project_id"], r["location"],
			r["cluster_name"], r["node_name"], r["node_pool_name"], m["interruption_type"], m["interruption_reason"])
		for _, p := range ts.GetPoints() {
			s += fmt.Sprintf(" %v=%d", p.GetInterval().GetEndTime().AsTime().Sub(t0), p.GetValue().GetInt64Value())
		}
		out = append(out, s)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const (
	nodeFilter = `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node"`
	poolFilter = `metric.type = "kubernetes.io/node_pool/interruption_count" AND resource.type = "k8s_node_pool"`
)

func mustRecord(t *testing.T, sim *Server, i Interruption) {
	t.Helper()
	if err := sim.Record(i); err != nil {
		t.Fatalf("Record(%+v): %v", i, err)
	}
}

func TestListTimeSeriesThroughClient(t *testing.T) {
	c := testenv.NewClock(t0.Add(10 * time.Minute))
	sim, client := start(t, Options{Now: c.Now})
	base := Interruption{Project: "p1", Location: "us-central1", Cluster: "train", Type: "MaintenanceEvent", Reason: "HW/SW Maintenance"}
	for _, i := range []Interruption{
		{Node: "n1", NodePool: "a3", Count: 1, Time: t0.Add(time.Minute)},
		{Node: "n1", NodePool: "a3", Count: 2, Time: t0.Add(3 * time.Minute)},
		{Node: "n2", NodePool: "a3", Count: 1, Time: t0.Add(2*time.Minute + 30*time.Second)}, // lands in the 3m sample
	} {
		i.Project, i.Location, i.Cluster, i.Type, i.Reason = base.Project, base.Location, base.Cluster, base.Type, base.Reason
		mustRecord(t, sim, i)
	}
	mustRecord(t, sim, Interruption{Project: "p2", Location: "us-east1", Cluster: "other", Node: "x", Type: "PreemptionEvent", Reason: "Other", Count: 1, Time: t0})

	got, err := list(client, request(nodeFilter, t0, c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"k8s_node p1/us-central1/train/n1 MaintenanceEvent/HW/SW Maintenance: 3m0s=2 1m0s=1",
		"k8s_node p1/us-central1/train/n2 MaintenanceEvent/HW/SW Maintenance: 3m0s=1",
	}
	if r := render(got); !equal(r, want) {
		t.Errorf("node series:\n got %q\nwant %q", r, want)
	}
	for _, ts := range got {
		if ts.GetMetricKind().String() != "GAUGE" || ts.GetValueType().String() != "INT64" || ts.GetMetric().GetType() != MetricNodeInterruptions {
			t.Errorf("series kind %v type %v metric %q, want GAUGE INT64 %s", ts.GetMetricKind(), ts.GetValueType(), ts.GetMetric().GetType(), MetricNodeInterruptions)
		}
	}

	got, err = list(client, request(poolFilter, t0, c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"k8s_node_pool p1/us-central1/train/a3 MaintenanceEvent/HW/SW Maintenance: 3m0s=3 1m0s=1"}
	if r := render(got); !equal(r, want) {
		t.Errorf("pool series:\n got %q\nwant %q", r, want)
	}

	// The interval is closed at both ends.
	got, err = list(client, request(nodeFilter, t0.Add(3*time.Minute), t0.Add(3*time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"k8s_node p1/us-central1/train/n1 MaintenanceEvent/HW/SW Maintenance: 3m0s=2",
		"k8s_node p1/us-central1/train/n2 MaintenanceEvent/HW/SW Maintenance: 3m0s=1",
	}
	if r := render(got); !equal(r, want) {
		t.Errorf("series at 3m:\n got %q\nwant %q", r, want)
	}
}

func TestLateDelivery(t *testing.T) {
	c := testenv.NewClock(t0)
	sim, client := start(t, Options{Now: c.Now, Delay: 150 * time.Second})
	mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n1", Type: "TerminationEvent", Reason: "HostError", Count: 1})

	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 0}, {149 * time.Second, 0}, {time.Second, 1}} {
		c.Add(step.advance)
		got, err := list(client, request(nodeFilter, t0.Add(-time.Hour), c.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != step.want {
			t.Errorf("at %v after the interruption: %d series visible, want %d", c.Now().Sub(t0), len(got), step.want)
		}
	}

	// A sample a reader has seen cannot change any more; one not yet visible can.
	err := sim.Record(Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n1", Type: "TerminationEvent", Reason: "HostError", Count: 1, Time: t0})
	if !errors.Is(err, ErrPublished) {
		t.Errorf("recording into a published sample: err = %v, want ErrPublished", err)
	}
	mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n1", Type: "TerminationEvent", Reason: "HostError", Count: 1})
	mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n1", Type: "TerminationEvent", Reason: "HostError", Count: 4})
	c.Add(3 * time.Minute) // the 3m sample is visible from 5m30s
	got, err := list(client, request(nodeFilter, t0.Add(-time.Hour), c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k8s_node p1/l/c/n1 TerminationEvent/HostError: 3m0s=5 0s=1"}
	if r := render(got); !equal(r, want) {
		t.Errorf("after merging into an unpublished sample:\n got %q\nwant %q", r, want)
	}
}

func TestPagination(t *testing.T) {
	c := testenv.NewClock(t0.Add(time.Hour))
	sim, client, raw := startRaw(t, Options{Now: c.Now, Delay: time.Minute})
	// Three nodes with 1, 3 and 2 points: 6 points in all.
	for node, minutes := range map[string][]int{"a": {1}, "b": {1, 2, 3}, "c": {4, 5}} {
		for _, m := range minutes {
			mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: node, Type: "T", Reason: "R", Count: int64(m), Time: t0.Add(time.Duration(m) * time.Minute)})
		}
	}
	wantPoints := []string{"a@1m0s", "b@3m0s", "b@2m0s", "b@1m0s", "c@5m0s", "c@4m0s"}
	for _, size := range []int{1, 2, 4, 5, 6, 7, 0} {
		req := request(nodeFilter, t0, c.Now())
		req.PageSize = int32(size)
		before := sim.Calls()
		var got []string
		pages := 0
		for token := ""; ; {
			req.PageToken = token
			resp, err := raw.ListTimeSeries(context.Background(), req)
			if err != nil {
				t.Fatalf("page size %d, page %d: %v", size, pages+1, err)
			}
			pages++
			n := 0
			for _, ts := range resp.GetTimeSeries() {
				n += len(ts.GetPoints())
			}
			if size > 0 && n > size {
				t.Errorf("page size %d: page %d holds %d points", size, pages, n)
			}
			got = append(got, pointNames(resp.GetTimeSeries())...)
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
			if pages > 10 {
				t.Fatalf("page size %d: pagination does not end", size)
			}
		}
		wantPages := 1
		if size > 0 {
			wantPages = (len(wantPoints) + size - 1) / size
		}
		if pages != wantPages || sim.Calls()-before != wantPages {
			t.Errorf("page size %d: %d pages in %d calls, want %d", size, pages, sim.Calls()-before, wantPages)
		}
		if !equal(got, wantPoints) {
			t.Errorf("page size %d: points %q, want %q", size, got, wantPoints)
		}

		// The client library's iterator follows the tokens to the same result.
		req.PageToken = ""
		series, err := list(client, req)
		if err != nil {
			t.Fatalf("page size %d through the client: %v", size, err)
		}
		if got := pointNames(series); !equal(got, wantPoints) {
			t.Errorf("page size %d through the client: points %q, want %q", size, got, wantPoints)
		}
	}

	// Later pages list what was visible when the first page was listed, so nothing shifts between pages.
	mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "a", Type: "T", Reason: "R", Count: 1, Time: c.Now().Add(-30 * time.Second)})
	req := request(nodeFilter, t0, c.Now())
	req.PageSize = 3
	first, err := raw.ListTimeSeries(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute) // the new point becomes visible
	req.PageToken = first.GetNextPageToken()
	second, err := raw.ListTimeSeries(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := append(pointNames(first.GetTimeSeries()), pointNames(second.GetTimeSeries())...)
	if !equal(got, wantPoints) {
		t.Errorf("pages across a change: points %q, want %q", got, wantPoints)
	}

	// A token only continues the request it came from.
	other := request(poolFilter, t0, c.Now())
	other.PageToken = first.GetNextPageToken()
	if _, err := raw.ListTimeSeries(context.Background(), other); status.Code(err) != codes.InvalidArgument {
		t.Errorf("token of another request: err = %v, want InvalidArgument", err)
	}
	req.PageToken = "not-a-token"
	if _, err := raw.ListTimeSeries(context.Background(), req); status.Code(err) != codes.InvalidArgument {
		t.Errorf("garbage token: err = %v, want InvalidArgument", err)
	}
}

func pointNames(series []*monitoringpb.TimeSeries) []string {
	var out []string
	for _, ts := range series {
		for _, p := range ts.GetPoints() {
			out = append(out, fmt.Sprintf("%s@%v", ts.GetResource().GetLabels()["node_name"], p.GetInterval().GetEndTime().AsTime().Sub(t0)))
		}
	}
	return out
}

func TestHeadersView(t *testing.T) {
	c := testenv.NewClock(t0.Add(time.Hour))
	sim, _, raw := startRaw(t, Options{Now: c.Now})
	for _, node := range []string{"a", "b", "c"} {
		for m := 1; m <= 3; m++ {
			mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: node, Type: "T", Reason: "R", Count: 1, Time: t0.Add(time.Duration(m) * time.Minute)})
		}
	}
	req := request(nodeFilter, t0, c.Now())
	req.View = monitoringpb.ListTimeSeriesRequest_HEADERS
	req.PageSize = 2
	resp, err := raw.ListTimeSeries(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetTimeSeries()) != 2 || resp.GetNextPageToken() == "" {
		t.Fatalf("headers page of 2: %d series, token %q; want 2 series and a token", len(resp.GetTimeSeries()), resp.GetNextPageToken())
	}
	for _, ts := range resp.GetTimeSeries() {
		if len(ts.GetPoints()) != 0 {
			t.Errorf("headers view returned %d points for %v", len(ts.GetPoints()), ts.GetResource().GetLabels())
		}
	}
}

func TestFilterSelectsClusterAndProject(t *testing.T) {
	c := testenv.NewClock(t0.Add(time.Hour))
	sim, client := start(t, Options{Now: c.Now})
	for _, i := range []Interruption{
		{Project: "p1", Location: "l", Cluster: "train", Node: "t1", NodePool: "a3"},
		{Project: "p1", Location: "l", Cluster: "serve", Node: "s1", NodePool: "l4"},
		{Project: "p2", Location: "l", Cluster: "train", Node: "x1", NodePool: "a3"},
	} {
		i.Type, i.Reason, i.Count, i.Time = "T", "R", 1, t0
		mustRecord(t, sim, i)
	}
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{nodeFilter, []string{"k8s_node p1/l/serve/s1 T/R: 0s=1", "k8s_node p1/l/train/t1 T/R: 0s=1"}},
		{nodeFilter + ` AND resource.labels.cluster_name = "train"`, []string{"k8s_node p1/l/train/t1 T/R: 0s=1"}},
		{poolFilter + ` AND resource.labels.cluster_name = one_of("serve")`, []string{"k8s_node_pool p1/l/serve/l4 T/R: 0s=1"}},
		{poolFilter + ` AND resource.labels.node_pool_name = "a3"`, []string{"k8s_node_pool p1/l/train/a3 T/R: 0s=1"}},
	} {
		got, err := list(client, request(tc.filter, t0.Add(-time.Minute), c.Now()))
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if r := render(got); !equal(r, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.filter, r, tc.want)
		}
	}
}

func TestInjectedErrors(t *testing.T) {
	c := testenv.NewClock(t0)
	sim, _, raw := startRaw(t, Options{Now: c.Now})
	req := request(nodeFilter, t0, t0)
	call := func() codes.Code {
		_, err := raw.ListTimeSeries(context.Background(), req)
		return status.Code(err)
	}

	sim.Fail(codes.Unavailable, 2)
	got := []codes.Code{call(), call(), call()}
	if want := []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("two injected failures: codes %v, want %v", got, want)
	}
	sim.Fail(codes.ResourceExhausted, -1)
	for range 5 {
		if code := call(); code != codes.ResourceExhausted {
			t.Fatalf("persistent fault: code %v, want ResourceExhausted", code)
		}
	}
	sim.Fail(codes.OK, 0)
	if code := call(); code != codes.OK {
		t.Errorf("after the fault ended: code %v, want OK", code)
	}
	if sim.Calls() != 9 {
		t.Errorf("calls = %d, want 9", sim.Calls())
	}
}

func TestRejectsRequestsItDoesNotUnderstand(t *testing.T) {
	_, _, raw := startRaw(t, Options{})
	valid := func() *monitoringpb.ListTimeSeriesRequest { return request(nodeFilter, t0, t0.Add(time.Minute)) }
	for name, mutate := range map[string]func(r *monitoringpb.ListTimeSeriesRequest){
		"organization name": func(r *monitoringpb.ListTimeSeriesRequest) { r.Name = "organizations/1" },
		"empty project":     func(r *monitoringpb.ListTimeSeriesRequest) { r.Name = "projects/" },
		"no metric type":    func(r *monitoringpb.ListTimeSeriesRequest) { r.Filter = `resource.type = "k8s_node"` },
		"regular expression": func(r *monitoringpb.ListTimeSeriesRequest) {
			r.Filter += ` AND resource.labels.x = monitoring.regex.full_match("a.*")`
		},
		"no interval":        func(r *monitoringpb.ListTimeSeriesRequest) { r.Interval = nil },
		"start after end":    func(r *monitoringpb.ListTimeSeriesRequest) { r.Interval.StartTime = timestamppb.New(t0.Add(time.Hour)) },
		"aggregation":        func(r *monitoringpb.ListTimeSeriesRequest) { r.Aggregation = &monitoringpb.Aggregation{} },
		"order by":           func(r *monitoringpb.ListTimeSeriesRequest) { r.OrderBy = "time" },
		"negative page size": func(r *monitoringpb.ListTimeSeriesRequest) { r.PageSize = -1 },
		"invalid end time":   func(r *monitoringpb.ListTimeSeriesRequest) { r.Interval.EndTime.Nanos = -1 },
		"invalid start time": func(r *monitoringpb.ListTimeSeriesRequest) { r.Interval.StartTime.Nanos = 2e9 },
	} {
		req := valid()
		mutate(req)
		if _, err := raw.ListTimeSeries(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", name, err)
		}
	}
	req := valid()
	req.Interval.StartTime = nil // a point in time is a valid interval
	if _, err := raw.ListTimeSeries(context.Background(), req); err != nil {
		t.Errorf("interval without start time: %v", err)
	}
}

func TestRecordRejectsIncompleteInterruptions(t *testing.T) {
	sim := New(Options{})
	for name, i := range map[string]Interruption{
		"no project":       {Location: "l", Cluster: "c", Node: "n"},
		"no location":      {Project: "p", Cluster: "c", Node: "n"},
		"no cluster":       {Project: "p", Location: "l", Node: "n"},
		"no node nor pool": {Project: "p", Location: "l", Cluster: "c"},
		"negative count":   {Project: "p", Location: "l", Cluster: "c", Node: "n", Count: -1},
	} {
		if err := sim.Record(i); err == nil {
			t.Errorf("%s: Record accepted %+v", name, i)
		}
	}
	if sim.Calls() != 0 || len(sim.series) != 0 {
		t.Errorf("rejected interruptions left %d series", len(sim.series))
	}
}

func TestIntervalExcludesItsStart(t *testing.T) {
	c := testenv.NewClock(t0.Add(10 * time.Minute))
	sim, client := start(t, Options{Now: c.Now})
	for _, m := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: "n", Type: "T", Reason: "R", Count: 1, Time: t0.Add(m)})
	}
	for _, tc := range []struct {
		start, end time.Duration
		want       []string
	}{
		{time.Minute, 3 * time.Minute, []string{"k8s_node p1/l/c/n T/R: 3m0s=1 2m0s=1"}},
		{0, 2 * time.Minute, []string{"k8s_node p1/l/c/n T/R: 2m0s=1 1m0s=1"}},
		{2 * time.Minute, 2 * time.Minute, []string{"k8s_node p1/l/c/n T/R: 2m0s=1"}}, // one instant
		{3 * time.Minute, 4 * time.Minute, nil},
	} {
		got, err := list(client, request(nodeFilter, t0.Add(tc.start), t0.Add(tc.end)))
		if err != nil {
			t.Fatal(err)
		}
		if r := render(got); !equal(r, tc.want) {
			t.Errorf("(%v, %v]: got %q, want %q", tc.start, tc.end, r, tc.want)
		}
	}
}

func TestPartialAnswers(t *testing.T) {
	c := testenv.NewClock(t0.Add(10 * time.Minute))
	sim, _, stub := startRaw(t, Options{Now: c.Now})
	for _, node := range []string{"a", "b", "c", "d"} {
		mustRecord(t, sim, Interruption{Project: "p1", Location: "l", Cluster: "c", Node: node, Type: "T", Reason: "R", Count: 1, Time: t0})
	}
	sim.Partial(1)
	resp, err := stub.ListTimeSeries(context.Background(), request(nodeFilter, t0.Add(-time.Hour), c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetTimeSeries()) != 2 || len(resp.GetExecutionErrors()) != 1 {
		t.Errorf("partial answer: %d series, %d execution errors; want 2 and 1", len(resp.GetTimeSeries()), len(resp.GetExecutionErrors()))
	}
	resp, err = stub.ListTimeSeries(context.Background(), request(nodeFilter, t0.Add(-time.Hour), c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetTimeSeries()) != 4 || len(resp.GetExecutionErrors()) != 0 {
		t.Errorf("after the partial answer: %d series, %d execution errors; want 4 and 0", len(resp.GetTimeSeries()), len(resp.GetExecutionErrors()))
	}
}

func TestQuotaErrorCarriesRetryInfo(t *testing.T) {
	sim, client := start(t, Options{})
	sim.FailQuota(1, 42*time.Second)
	_, err := list(client, request(nodeFilter, t0, t0.Add(time.Minute)))
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 42*time.Second {
		t.Errorf("retry delay %v, want 42s (details %v)", delay, st.Details())
	}
	if _, err := list(client, request(nodeFilter, t0, t0.Add(time.Minute))); err != nil {
		t.Errorf("after the quota error: %v", err)
	}
}
