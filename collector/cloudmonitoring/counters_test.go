package cloudmonitoring

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

var labels = []string{"p1", "us-central1", "train", "n1", "MaintenanceEvent", "HW/SW Maintenance"}

func value(t *testing.T, f *family) (float64, bool) {
	t.Helper()
	ms := f.metrics(nil)
	if len(ms) == 0 {
		return 0, false
	}
	if len(ms) > 1 {
		t.Fatalf("%d series, want at most 1", len(ms))
	}
	var m dto.Metric
	if err := ms[0].Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue(), true
}

func TestFamilyHoldsNewSeriesAtZeroThenCountsEachPointOnce(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Hour)
	end := t0.Add(time.Minute)
	now := t0.Add(3 * time.Minute)
	f.observe(labels, end, 2, now, false)
	f.observe(labels, end, 2, now, false) // the same point again, as the next page or window returns it
	f.commit(now, now.Add(-5*time.Minute))
	if v, ok := value(t, f); !ok || v != 0 {
		t.Fatalf("new series = %v (present %v), want 0 for one interval", v, ok)
	}
	now = now.Add(time.Minute)
	f.observe(labels, end, 2, now, false)
	f.observe(labels, end.Add(time.Minute), 1, now, false)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f); v != 3 {
		t.Errorf("after the hold = %v, want 3", v)
	}
	now = now.Add(time.Minute)
	f.observe(labels, end.Add(2*time.Minute), 4, now, false)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f); v != 7 {
		t.Errorf("an existing series counts at once: %v, want 7", v)
	}
}

func TestFamilyPrimingRemembersWithoutCounting(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Hour)
	now := t0.Add(5 * time.Minute)
	f.observe(labels, t0.Add(time.Minute), 5, now, true)
	f.commit(now, now.Add(-5*time.Minute))
	now = now.Add(time.Minute)
	f.observe(labels, t0.Add(time.Minute), 5, now, false)
	f.observe(labels, t0.Add(5*time.Minute), 1, now, false)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f); v != 1 {
		t.Errorf("after priming = %v, want 1 (the primed point is not counted)", v)
	}
}

func TestFamilyMemoryIsBounded(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Hour)
	now := t0
	for minute := range 24 * 60 {
		now = t0.Add(time.Duration(minute) * time.Minute)
		f.observe(labels, now, 1, now, false)
		f.commit(now, now.Add(-5*time.Minute))
	}
	c := f.series[strings.Join(labels, "\xff")+"\xff"]
	if len(c.seen) > 6 {
		t.Errorf("a day of points leaves %d end times remembered, want at most the 6 in the look-back window", len(c.seen))
	}
	if v, _ := value(t, f); v != 24*60 {
		t.Errorf("a day of points = %v, want %d", v, 24*60)
	}
}

func TestFamilyExpiresIdleSeriesOnlyOnceTheyRememberNothing(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Minute) // idle timeout shorter than the look-back
	f.observe(labels, t0, 1, t0, false)
	f.commit(t0.Add(3*time.Minute), t0.Add(-time.Minute)) // idle 3m, but the point may still be listed again
	if _, ok := value(t, f); !ok {
		t.Fatal("a series whose point may still be listed was dropped: the point would be counted again")
	}
	f.commit(t0.Add(4*time.Minute), t0.Add(time.Second))
	if _, ok := value(t, f); ok {
		t.Error("an idle series that remembers no point was kept")
	}
}

func TestBackoff(t *testing.T) {
	interval := time.Minute
	prev := time.Duration(0)
	for failures := 1; failures <= 12; failures++ {
		low, high := backoff(interval, failures, 0), backoff(interval, failures, 0.999999)
		if low < prev {
			t.Errorf("failure %d: backoff %v shrank from %v", failures, low, prev)
		}
		if high > 4*interval || low < interval/32 {
			t.Errorf("failure %d: backoff between %v and %v, want within [%v, %v]", failures, low, high, interval/32, 4*interval)
		}
		if high < low || high-low > low+time.Millisecond {
			t.Errorf("failure %d: jitter spreads %v to %v, want over the upper half", failures, low, high)
		}
		prev = low
	}
	if got := backoff(interval, 1, 0); got != interval/32 {
		t.Errorf("first retry after %v, want %v", got, interval/32)
	}
	if got := backoff(interval, 100, 0); got != 2*interval {
		t.Errorf("long storms retry after %v, want %v", got, 2*interval)
	}
}

func TestPointValue(t *testing.T) {
	end := timestamppb.New(t0)
	for name, tc := range map[string]struct {
		p    *monitoringpb.Point
		want float64
		ok   bool
	}{
		"int64":       {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}, Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: 3}}}, 3, true},
		"zero":        {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}, Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{}}}, 0, true},
		"double":      {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}, Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_DoubleValue{DoubleValue: 2}}}, 2, true},
		"negative":    {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}, Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: -1}}}, 0, false},
		"bool":        {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}, Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_BoolValue{BoolValue: true}}}, 0, false},
		"no value":    {&monitoringpb.Point{Interval: &monitoringpb.TimeInterval{EndTime: end}}, 0, false},
		"no end time": {&monitoringpb.Point{Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: 1}}}, 0, false},
	} {
		got, ok := pointValue(tc.p)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s: pointValue = %v, %v; want %v, %v", name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestListFilter(t *testing.T) {
	for _, tc := range []struct {
		clusters []string
		want     string
	}{
		{nil, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node"`},
		{[]string{"train"}, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node" AND (resource.labels.cluster_name = "train")`},
		{[]string{"a", `b"c`}, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node" AND (resource.labels.cluster_name = "a" OR resource.labels.cluster_name = "b\"c")`},
	} {
		if got := listFilter(MetricNodeInterruptions, resourceNode, tc.clusters); got != tc.want {
			t.Errorf("listFilter(%q):\n got %s\nwant %s", tc.clusters, got, tc.want)
		}
	}
	if MetricNodeInterruptions != monsim.MetricNodeInterruptions || MetricNodePoolInterruptions != monsim.MetricNodePoolInterruptions ||
		resourceNode != monsim.ResourceNode || resourceNodePool != monsim.ResourceNodePool {
		t.Error("the collector and the simulator disagree on metric or resource types")
	}
}
