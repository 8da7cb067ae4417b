package upgrades

import (
	"strings"
	"testing"
	"time"
)

func TestLedger(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var l Ledger
	l.Put("a3", Entry{Members: map[string]string{"n1": "m1", "n2": "m2"}, State: Requested, RequestedAt: now}, now)
	if _, ok := l.Find("a3", "n1", "m1"); !ok {
		t.Fatal("entry not found for its member")
	}
	for _, miss := range [][3]string{{"a3", "n1", "other"}, {"a3", "n3", "m1"}, {"l4", "n1", "m1"}} {
		if _, ok := l.Find(miss[0], miss[1], miss[2]); ok {
			t.Errorf("found an entry for %v", miss)
		}
	}
	if !l.End("a3", "n2", "m2", Done, "ok", now) {
		t.Fatal("a requested entry did not end")
	}
	if l.End("a3", "n1", "m1", Failed, "late", now) {
		t.Error("an ended entry ended again: counted twice")
	}
	if e := l.Pools["a3"]; e.State != Done || e.Reason != "ok" {
		t.Errorf("entry %+v", e)
	}
	// An ended entry older than Keep goes when another is put; a running one stays however old.
	l.Put("l4", Entry{Members: map[string]string{"n9": "m9"}, State: Requested, RequestedAt: now}, now)
	l.Put("b", Entry{State: Requested}, now.Add(Keep+time.Hour))
	if _, ok := l.Pools["a3"]; ok {
		t.Error("an old ended entry kept")
	}
	if _, ok := l.Pools["l4"]; !ok {
		t.Error("a running entry forgotten")
	}
	back, err := Decode(l.Encode())
	if err != nil || len(back.Pools) != len(l.Pools) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if _, err := Decode("{not json"); err == nil || !strings.Contains(err.Error(), DataKey) {
		t.Errorf("bad ledger: %v", err)
	}
	if l, err := Decode(""); err != nil || len(l.Pools) != 0 {
		t.Errorf("empty ledger: %+v, %v", l, err)
	}
}
