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

func value(t *testing.T, f *family, now time.Time) (float64, bool) {
	t.Helper()
	ms := f.metrics(nil, now)
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
	f := newFamily(nodeDesc, time.Minute, time.Hour, 5*time.Minute)
	end := t0.Add(time.Minute)
	now := t0.Add(3 * time.Minute)
	f.observe(labels, end, 2, now, true)
	f.observe(labels, end, 2, now, true) // the same point again, as the next page or window returns it
	f.commit(now, now.Add(-5*time.Minute))
	if v, ok := value(t, f, now); !ok || v != 0 {
		t.Fatalf("new series = %v (present %v), want 0 for one interval", v, ok)
	}
	now = now.Add(time.Minute)
	f.observe(labels, end, 2, now, true)
	f.observe(labels, end.Add(time.Minute), 1, now, true)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f, now); v != 3 {
		t.Errorf("after the hold = %v, want 3", v)
	}
	now = now.Add(time.Minute)
	f.observe(labels, end.Add(2*time.Minute), 4, now, true)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f, now); v != 7 {
		t.Errorf("an existing series counts at once: %v, want 7", v)
	}
}

func TestFamilyCountsTheFirstListingAtOnce(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Hour, 5*time.Minute)
	now := t0.Add(5 * time.Minute)
	f.observe(labels, t0.Add(time.Minute), 5, now, false)
	f.commit(now, now.Add(-5*time.Minute))
	if v, _ := value(t, f, now); v != 5 {
		t.Errorf("history listed at start = %v, want 5: the previous process exposed it too", v)
	}
}

func TestFamilyMemoryIsBounded(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Hour, 5*time.Minute)
	day := t0.Truncate(24 * time.Hour)
	now := day
	for minute := 1; minute <= 24*60; minute++ {
		now = day.Add(time.Duration(minute) * time.Minute)
		f.observe(labels, now, 1, now, true)
		f.commit(now, now.Add(-5*time.Minute))
	}
	c := f.series[strings.Join(labels, "\xff")+"\xff"]
	if len(c.seen) > 5 {
		t.Errorf("a day of points leaves %d end times remembered, want at most the 5 in the look-back window", len(c.seen))
	}
	if len(c.counts) > 2 {
		t.Errorf("%d days of counts kept, want at most 2", len(c.counts))
	}
	if v, _ := value(t, f, now); v != 24*60 {
		t.Errorf("a day of points = %v, want %d", v, 24*60)
	}
}

func TestFamilyExpiresIdleSeriesOnlyOnceTheyRememberNothing(t *testing.T) {
	f := newFamily(nodeDesc, time.Minute, time.Minute, 5*time.Minute) // idle timeout shorter than the look-back
	yesterday := t0.Add(-24 * time.Hour)
	f.observe(labels, yesterday, 1, t0, true) // a point of a closed day: the series shows, at zero
	f.commit(t0.Add(3*time.Minute), yesterday.Add(-time.Minute))
	if _, ok := f.series[strings.Join(labels, "\xff")+"\xff"]; !ok {
		t.Fatal("a series whose point may still be listed was dropped: the point would be counted again")
	}
	f.commit(t0.Add(4*time.Minute), t0)
	if len(f.series) != 0 {
		t.Error("an idle series that remembers no point was kept")
	}
}

func TestDayOf(t *testing.T) {
	midnight := t0.Truncate(24 * time.Hour)
	for end, want := range map[time.Time]time.Time{
		midnight:                       midnight.Add(-24 * time.Hour),
		midnight.Add(time.Nanosecond):  midnight,
		midnight.Add(24 * time.Hour):   midnight,
		midnight.Add(-time.Nanosecond): midnight.Add(-24 * time.Hour),
	} {
		if got := dayOf(end); !got.Equal(want) {
			t.Errorf("dayOf(%v) = %v, want %v", end, got, want)
		}
	}
	if got := anchorAt(midnight.Add(4*time.Minute), 5*time.Minute); !got.Equal(midnight.Add(-24 * time.Hour)) {
		t.Errorf("anchor 4m after midnight with a 5m look-back = %v, want the day before", got)
	}
	if got := anchorAt(midnight.Add(5*time.Minute), 5*time.Minute); !got.Equal(midnight) {
		t.Errorf("anchor 5m after midnight with a 5m look-back = %v, want midnight", got)
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
		clusters []Cluster
		want     string
	}{
		{nil, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node"`},
		{[]Cluster{{Name: "train"}}, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node" AND (resource.labels.cluster_name = "train")`},
		{[]Cluster{{Location: "us-central1", Name: "train"}}, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node" AND ((resource.labels.cluster_name = "train" AND resource.labels.location = "us-central1"))`},
		{[]Cluster{{Name: "a"}, {Location: "europe-west4", Name: `b"c`}}, `metric.type = "kubernetes.io/node/interruption_count" AND resource.type = "k8s_node" AND (resource.labels.cluster_name = "a" OR (resource.labels.cluster_name = "b\"c" AND resource.labels.location = "europe-west4"))`},
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
