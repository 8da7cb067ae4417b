package e2e

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestReportFaultyInTheLoop: the operator runs report-faulty (the real binary, through the web config's basic auth)
// while the pool's one repair slot is taken by a failed GPU's repair. The request waits, kept on the node; the host
// is reported once, only after that repair, GKE replaces it, and the work ends done.
func TestReportFaultyInTheLoop(t *testing.T) {
	s, w, alive := startStack(t, "testdata/report.yaml", "testdata/field-policy.yaml", nil)
	ctx := context.Background()
	repaired, reported := s.sc.NodeName("a4-train", 0), s.sc.NodeName("a4-train", 1)

	alive("the failed GPU's repair requested", func() error {
		return w.check(repaired, func(h []nodeView) error {
			if timesSet(h, func(v nodeView) bool { return v.perform }) == 0 {
				return fmt.Errorf("perform-maintenance not set")
			}
			return nil
		})
	})
	if err := s.ReportFaulty(ctx, reported, gke.FaultXID); err != nil {
		t.Fatal(err)
	}

	alive("the request waits for the repair slot, kept on the node", func() error {
		n, err := s.Client.CoreV1().Nodes().Get(ctx, reported, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if nodeview.Of(n).Record.Request == nil {
			return fmt.Errorf("no request kept: %v", n.Annotations)
		}
		return nil
	})
	alive("the host reported and replaced", func() error {
		return w.check(reported, func(h []nodeView) error {
			last := h[len(h)-1]
			if last.state != string(nodeview.Done) || last.action != string(nodeview.ReportFaultyHost) || last.fault != "" ||
				last.report != string(gke.ReportOperationDone) || !last.ready {
				return fmt.Errorf("not replaced and done: %s", last)
			}
			return nil
		})
	})

	var labelledAt nodeView
	if err := w.check(reported, func(h []nodeView) error {
		if n := timesSet(h, func(v nodeView) bool { return v.fault != "" }); n != 1 {
			return fmt.Errorf("fault-behavior set %d times, want once", n)
		}
		for _, v := range h {
			if v.fault != "" {
				labelledAt = v
				return nil
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := w.check(repaired, func(h []nodeView) error {
		var before nodeView
		for _, v := range h {
			if v.at.After(labelledAt.at) {
				break
			}
			before = v
		}
		if before.disrupted() || before.state != string(nodeview.Done) {
			return fmt.Errorf("the host was reported while the repair held the pool's one slot: the repaired node was %s", before)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	w.mu.Lock()
	most := w.maxDisrupted["a4-train"]
	w.mu.Unlock()
	if most != 1 {
		t.Errorf("at most %d nodes of the pool out of service at once, want 1 (one repair slot)", most)
	}
	if n, err := s.events(ctx, reported, "DisruptionHostReported"); err != nil || n != 1 {
		t.Errorf("%d DisruptionHostReported events (%v), want 1", n, err)
	}
}
