package repairs

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func TestRecordReplacesAnIncidentAndForgetsOldEntries(t *testing.T) {
	var l Ledger
	l.Record(Entry{Node: "a", Incident: "gpu/b1/xid/79", At: t0})
	l.Record(Entry{Node: "b", Incident: "gpu/b2/xid/79", At: t0.Add(time.Hour), Held: HoldBreaker})
	l.Record(Entry{Node: "b", Incident: "gpu/b2/xid/79", At: t0.Add(2 * time.Hour)})
	if len(l.Entries) != 2 {
		t.Fatalf("entries %+v, want a and b once each", l.Entries)
	}
	if e, ok := l.Find("b", "gpu/b2/xid/79"); !ok || !e.Repaired() || !e.At.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("b's incident %+v, %v: want the later decision", e, ok)
	}
	l.Record(Entry{Node: "c", Incident: "gpu/b3/xid/48", At: t0.Add(Keep + time.Minute)})
	if _, ok := l.Find("a", "gpu/b1/xid/79"); ok {
		t.Error("an entry older than Keep is kept")
	}
	back, err := Decode(l.Encode())
	if err != nil || len(back.Entries) != len(l.Entries) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if _, err := Decode("{"); err == nil {
		t.Error("a broken ledger read without error")
	}
}

func TestBreakerStaysTrippedUntilReset(t *testing.T) {
	var l Ledger
	l.Trip(PoolScope("train"), t0, "3 repairs in an hour")
	l.Trip(PoolScope("train"), t0.Add(time.Hour), "again")
	if b := l.Breakers[PoolScope("train")]; !b.Tripped() || !b.TrippedAt.Equal(t0) {
		t.Errorf("breaker %+v: want the first trip kept", b)
	}
	l.Trip(ScopeCluster, t0, "cluster")
	if got := l.Tripped(); !slices.Equal(got, []string{ScopeCluster, PoolScope("train")}) {
		t.Errorf("tripped %v", got)
	}
	if got := l.Reset([]string{PoolScope("other")}, t0, "op"); len(got) != 0 {
		t.Errorf("reset a breaker never tripped: %v", got)
	}
	if got := l.Reset(nil, t0.Add(2*time.Hour), "op"); !slices.Equal(got, []string{ScopeCluster, PoolScope("train")}) {
		t.Errorf("reset all: %v", got)
	}
	if b := l.Breakers[ScopeCluster]; b.Tripped() || !b.ResetAt.Equal(t0.Add(2*time.Hour)) || b.ResetBy != "op" {
		t.Errorf("after reset %+v", b)
	}
}
