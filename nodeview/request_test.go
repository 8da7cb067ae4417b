package nodeview

import (
	"testing"
	"time"
)

func TestReportRequestRoundTrip(t *testing.T) {
	at := time.Date(2026, 8, 3, 4, 5, 6, 789000000, time.UTC)
	want := ReportRequest{StartsAt: at, FaultBehavior: "XID", Owner: "ns/actions", ReceivedAt: at.Add(time.Second)}
	got, ok := ReadReportRequest(map[string]string{AnnotationReportRequest: want.Encode()})
	if !ok || !got.StartsAt.Equal(want.StartsAt) || got.FaultBehavior != "XID" || got.Owner != want.Owner ||
		!got.ReceivedAt.Equal(want.ReceivedAt) {
		t.Fatalf("got %+v, %v; want %+v", got, ok, want)
	}
	if got.Incident() != IncidentKey(at) {
		t.Errorf("incident %q", got.Incident())
	}
}

func TestReportRequestUnreadable(t *testing.T) {
	for _, v := range []string{"", "XID", "{}", `{"startsAt":"yesterday"}`, `[1,2]`} {
		if r, ok := ReadReportRequest(map[string]string{AnnotationReportRequest: v}); ok {
			t.Errorf("%q read as %+v", v, r)
		}
	}
	if _, ok := ReadReportRequest(nil); ok {
		t.Error("no annotation read as a request")
	}
}
