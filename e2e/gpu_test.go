package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestGPUFaultsInTheLoop plays GPU faults of every kind the guard rails tell apart on the whole product, with
// dcgm-exporter as the rules' second source (testdata/gpu-faults.yaml): a failed GPU reported once and handed back,
// its fault lingering past the repair without a second one; an Xid 79 storm across one topology block held and
// paged once; a failed GPU on a machine type GKE cannot report drained instead; the pool's circuit breaker holding
// its second repair of the hour until an operator resets it; Xids that are the application's or side effects left
// alone.
func TestGPUFaultsInTheLoop(t *testing.T) {
	s, w, alive := startStack(t, "testdata/gpu-faults.yaml", "testdata/gpu-policy.yaml", map[string]any{
		"dcgm": map[string]any{"enabled": true, "selector": `job="dcgm-exporter"`, "xidErrorsCount": true},
		// Faults that start together are seen within a few scrapes: the default 10 min, scaled to 2 s, is shorter
		// than the scrapes and evaluations between the fault and the rules (production: 30 s intervals, 10 min).
		"gpuFaultsCorrelation": map[string]any{"nodes": 3, "window": "1h", "topologyLabel": "block"}})
	ctx := context.Background()
	begin := time.Now()
	train, block, serve := s.sc.NodeNames("a4-train"), s.sc.NodeNames("a4-block"), s.sc.NodeName("a2-serve", 0)
	failed, breaker := train[0], train[1]

	replaced := func(h []nodeView) error {
		last := h[len(h)-1]
		if last.state != string(nodeview.Done) || last.action != string(nodeview.ReportFaultyHost) || last.fault != "" ||
			last.report != string(gke.ReportOperationDone) || !last.ready || last.cordoned {
			return fmt.Errorf("not replaced and handed back: %s", last)
		}
		return nil
	}
	alive("the failed GPU's host reported, replaced and handed back", func() error { return w.check(failed, replaced) })
	alive("the fault lingering past the repair is over", func() error {
		v, err := s.value(ctx, fmt.Sprintf(`max(DCGM_FI_DEV_XID_ERRORS{Hostname=%q})`, failed))
		if err == nil && v != 0 {
			err = fmt.Errorf("dcgm-exporter still shows Xid %v", v)
		}
		return err
	})

	alive("an Xid 79 storm across one block pages once, its nodes' repairs inhibited", func() error {
		correlated, err := s.alertmanagerAlerts(ctx, "GKEGPUFaultsCorrelated")
		if err != nil {
			return err
		}
		if len(correlated) != 1 || correlated[0].Status.State != "active" || correlated[0].Labels["block"] == "" {
			return fmt.Errorf("GKEGPUFaultsCorrelated in Alertmanager: %+v, want one active alert of the block", correlated)
		}
		gpuFailed, err := s.alertmanagerAlerts(ctx, "GKENodeGPUFailed")
		if err != nil {
			return err
		}
		for _, node := range block {
			i := slices.IndexFunc(gpuFailed, func(a amAlert) bool { return a.Labels["node"] == node })
			if i < 0 || gpuFailed[i].Status.State != "suppressed" || len(gpuFailed[i].Status.InhibitedBy) == 0 {
				return fmt.Errorf("GKENodeGPUFailed of %s not inhibited: %+v", node, gpuFailed)
			}
		}
		return nil
	})

	alive("the failed GPU of a machine type GKE cannot report is drained", func() error {
		return w.check(serve, func(h []nodeView) error {
			last := h[len(h)-1]
			if last.action != string(nodeview.Drain) || !last.cordoned {
				return fmt.Errorf("not drained: %s", last)
			}
			return nil
		})
	})

	alive("the pool's breaker trips on its second repair of the hour and holds it", func() error {
		if v, err := s.value(ctx, `gke_disruption_repair_breaker_tripped{scope="pool/a4-train"}`); err != nil || v != 1 {
			return fmt.Errorf("breaker of pool a4-train: %v (%v), want tripped", v, err)
		}
		v, err := s.value(ctx, fmt.Sprintf(`gke_disruption_repairs_held{node=%q, reason=%q}`, breaker, "breaker"))
		if err == nil && v != 1 {
			err = fmt.Errorf("repair of %s held %v", breaker, v)
		}
		return err
	})
	if err := w.check(breaker, func(h []nodeView) error {
		if n := timesSet(h, func(v nodeView) bool { return v.disrupted() }); n != 0 {
			return fmt.Errorf("disrupted %d times while its repair was held", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := s.ResetRepairs(ctx); err != nil {
		t.Fatal(err)
	}
	alive("after the reset the held repair goes ahead", func() error { return w.check(breaker, replaced) })

	// Every case again, now that each has had the whole run to act twice or act where it should not.
	for _, node := range []string{failed, breaker} {
		if err := w.check(node, func(h []nodeView) error {
			if n := timesSet(h, func(v nodeView) bool { return v.fault != "" }); n != 1 {
				return fmt.Errorf("fault-behavior set %d times, want once", n)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		if n, err := s.events(ctx, node, "DisruptionHostReported"); err != nil || n != 1 {
			t.Errorf("node %s: %d DisruptionHostReported events (%v), want 1", node, n, err)
		}
	}
	if spans, err := s.firingSpans(ctx, "GKENodeGPUFailed", failed, begin); err != nil || spans != 1 {
		t.Errorf("GKENodeGPUFailed fired %d times for %s (%v), want once: the lingering fault is no new one", spans, failed, err)
	}
	untouched := append(slices.Clone(block), train[2], train[3])
	for _, node := range untouched {
		if err := w.check(node, func(h []nodeView) error {
			if n := timesSet(h, func(v nodeView) bool { return v.disrupted() || v.action != "" }); n != 0 {
				return fmt.Errorf("acted on %d times, want never", n)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	for _, node := range []string{train[2], train[3]} {
		if spans, err := s.firingSpans(ctx, "GKENodeGPUFailed", node, begin); err != nil || spans != 0 {
			t.Errorf("GKENodeGPUFailed fired %d times for %s (%v), whose Xid is the application's or a side effect", spans, node, err)
		}
	}
	// Its cordon stays while the fault is there, waiting for a person (GKENodeGPUFailed pages): no stall of ours.
	if spans, err := s.firingSpans(ctx, "GKEDisruptionActionsStalled", serve, begin); err != nil || spans != 0 {
		t.Errorf("GKEDisruptionActionsStalled fired %d times for %s (%v), whose drain holds the faulty node as it should", spans, serve, err)
	}
	if err := w.check(serve, func(h []nodeView) error {
		if n := timesSet(h, func(v nodeView) bool { return v.fault != "" || v.report != "" }); n != 0 {
			return fmt.Errorf("reported %d times, on a machine type GKE cannot report", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// amAlert is what the test reads of an alert in Alertmanager's API v2.
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// alertmanagerAlerts lists Alertmanager's alerts named alertname, active, inhibited or silenced.
func (s stack) alertmanagerAlerts(ctx context.Context, alertname string) ([]amAlert, error) {
	q := url.Values{"filter": {fmt.Sprintf("alertname=%q", alertname)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Alertmanager+"/api/v2/alerts?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("Alertmanager's alerts: %s", resp.Status)
	}
	var alerts []amAlert
	return alerts, json.NewDecoder(resp.Body).Decode(&alerts)
}

// firingSpans counts the times alertname started firing for node since begin, as Prometheus recorded it each second.
func (s stack) firingSpans(ctx context.Context, alertname, node string, begin time.Time) (int, error) {
	prom, err := s.PrometheusAPI()
	if err != nil {
		return 0, err
	}
	q := fmt.Sprintf(`ALERTS{alertname=%q, node=%q, alertstate="firing"}`, alertname, node)
	v, _, _, err := prom.QueryRange(ctx, q, promv1.Range{Start: begin, End: time.Now(), Step: time.Second})
	if err != nil {
		return 0, err
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return 0, fmt.Errorf("unexpected result %v", v)
	}
	spans := 0
	for _, series := range m {
		for i, p := range series.Values {
			if i == 0 || p.Timestamp-series.Values[i-1].Timestamp > 1500 {
				spans++
			}
		}
	}
	if spans > 1 {
		var labels []string
		for _, series := range m {
			labels = append(labels, series.Metric.String())
		}
		return spans, fmt.Errorf("series %s", strings.Join(labels, ", "))
	}
	return spans, nil
}
