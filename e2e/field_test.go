package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestFieldReplay plays a failed GPU as GKE does in the field (testdata/field.yaml): the repair announced with
// FAILURE_* reasons 7 days out, and GKE's measured answer to perform-maintenance=true. The product asks for the
// repair once, within minutes of the notice, drains only before the request, pages nobody during a normal repair,
// and hands the node back uncordoned.
func TestFieldReplay(t *testing.T) {
	s, w, alive := startStack(t, "testdata/field.yaml", "testdata/field-policy.yaml", nil)
	ctx := context.Background()
	node := s.sc.NodeName("a4-train", 0)
	begin := time.Now()

	alive("GKENodeHardwareFailureMaintenance fires for "+node, func() error {
		return s.firedAlert(ctx, "GKENodeHardwareFailureMaintenance", node)
	})
	var requested time.Time
	alive("the repair is requested", func() error {
		return w.check(node, func(h []nodeView) error {
			for _, v := range h {
				if v.perform {
					requested = v.at
					return nil
				}
			}
			return fmt.Errorf("perform-maintenance not set")
		})
	})
	// 7 story days before the window (the field's operator took 16 h 50 m). Scrapes, rule evaluations and
	// Alertmanager's grouping run on the wall clock here, so the wall-clock figure is the one to read.
	t.Logf("notice to request: %s", requested.Sub(begin).Round(time.Second))

	alive("GKE repairs the host and the node is handed back", func() error {
		return w.check(node, func(h []nodeView) error {
			down := false
			for _, v := range h {
				down = down || !v.ready
			}
			last := h[len(h)-1]
			if !down || last.maintenance != "" || last.perform || last.cordoned || !last.ready || last.state != string(nodeview.Done) {
				return fmt.Errorf("not repaired and back in service with the action done: %s", last)
			}
			return nil
		})
	})

	if err := w.check(node, func(h []nodeView) error {
		cordons := timesSet(h, func(v nodeView) bool { return v.cordoned })
		requests := timesSet(h, func(v nodeView) bool { return v.perform })
		if cordons != 1 || requests != 1 {
			return fmt.Errorf("cordoned %d times and perform-maintenance set %d times, want once each", cordons, requests)
		}
		for _, v := range h {
			if v.action != "" && v.action != string(nodeview.PerformMaintenance) {
				return fmt.Errorf("the work became %s", v.action)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	for reason, want := range map[string]int{
		"DisruptionActionAccepted":       1,
		"DisruptionMaintenanceRequested": 1,
		"DisruptionDrainStarted":         1, // drainFirst, before the request; the rewritten window drains nothing
	} {
		if n, err := s.events(ctx, node, reason); err != nil || n != want {
			t.Errorf("%d %s events (%v), want %d", n, reason, err, want)
		}
	}
	prom, err := s.PrometheusAPI()
	if err != nil {
		t.Fatal(err)
	}
	// From the request until the node went down, every scrape says the node is requested or in maintenance: GKE
	// consumes the label before it shows passthrough, and the actions service's request bridges that.
	var down time.Time
	_ = w.check(node, func(h []nodeView) error {
		for _, v := range h {
			if !v.ready && v.at.After(requested) {
				down = v.at
				break
			}
		}
		return nil
	})
	if down.IsZero() {
		t.Fatal("the node never went down")
	}
	r := promv1.Range{Start: requested.Add(3 * time.Second), End: down, Step: time.Second}
	q := fmt.Sprintf(`count(gke_node_perform_maintenance_requested{node=%[1]q} or gke_node_maintenance_state{node=%[1]q})`, node)
	if m, _, _, err := prom.QueryRange(ctx, q, r); err != nil {
		t.Fatal(err)
	} else if mat, ok := m.(model.Matrix); !ok || len(mat) != 1 || len(mat[0].Values) < int(r.End.Sub(r.Start)/time.Second) {
		t.Errorf("from the request to the node going down, a scrape said the node was neither requested nor in maintenance: %v", m)
	}
	window := fmt.Sprintf("%ds", int(time.Since(begin).Seconds())+5)
	for _, alertname := range []string{"GKENodeMaintenanceStuck", "GKEDisruptionActionFailed", "GKEDisruptionActionsStalled"} {
		q := fmt.Sprintf(`max_over_time(ALERTS{alertname=%q, alertstate="firing"}[%s])`, alertname, window)
		v, _, _, err := prom.Query(ctx, q, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if vec, ok := v.(model.Vector); !ok || len(vec) > 0 {
			t.Errorf("%s fired during a normal repair: %v", alertname, v)
		}
	}
	if other := s.sc.NodeName("a4-train", 1); w.check(other, func(h []nodeView) error {
		if timesSet(h, func(v nodeView) bool { return v.cordoned || v.perform }) > 0 {
			return fmt.Errorf("touched")
		}
		return nil
	}) != nil {
		t.Errorf("%s, with no failure, was touched", other)
	}
}
