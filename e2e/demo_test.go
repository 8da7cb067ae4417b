package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/demo"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// demoPool is the demo's pool whose story is a failed GPU's repair and, meanwhile, a host reported as faulty.
const demoPool = "a4-train"

// demoFaultyHostStory is the demo scenario cut to its faulty-host story: the A4 pool with its workloads, its
// events moved forward so the first one opens the story, and the story's end moved with them. Everything else
// (time scale, GKE's durations, the policy, the rules) is the demo's.
func demoFaultyHostStory(t *testing.T) (*driver.Scenario, time.Duration) {
	t.Helper()
	sc, err := driver.LoadNamed("demo")
	if err != nil {
		t.Fatal(err)
	}
	pool := *sc.Pool(demoPool)
	sc.NodePools = []driver.NodePool{pool}
	var workloads []driver.Workload
	for _, w := range sc.Workloads {
		switch {
		case slices.Contains(w.NodePools, demoPool):
			w.NodePools = []string{demoPool}
		case len(w.NodePools) > 0:
			continue
		}
		workloads = append(workloads, w)
	}
	sc.Workloads = workloads
	var events []driver.Event
	for _, e := range sc.Events {
		if (e.GPUFault != nil && e.GPUFault.NodePool == demoPool) || (e.Maintenance != nil && e.Maintenance.NodePool == demoPool) ||
			(e.Report != nil && e.Report.NodePool == demoPool) {
			events = append(events, e)
		}
	}
	if len(events) < 2 || events[0].GPUFault == nil || events[len(events)-1].Report == nil {
		t.Fatalf("the demo's %s story is no longer a GPU fault then a report: %+v", demoPool, events)
	}
	shift := events[0].At
	for i := range events {
		events[i].At -= shift
	}
	sc.Events = events
	end := time.Duration(float64(24*time.Hour-time.Duration(shift)) / sc.TimeScale)
	return sc, end
}

// TestDemoFaultyHostStoryEnds plays the demo's faulty-host story to its end: the failed GPU's repair and the
// reported host's replacement are both done before the story's day is over, the nodes are back in service, GKE's
// report status is final, and no alert says the product itself is stuck or failing.
func TestDemoFaultyHostStoryEnds(t *testing.T) {
	sc, end := demoFaultyHostStory(t)
	policy := filepath.Join(testenv.RepoRoot(), "examples", "demo-policy.yaml")
	s, w, _ := startScenario(t, sc, policy, demo.Rules(sc.TimeScale).Config)
	ctx := context.Background()
	begin := time.Now()
	repaired, reported := sc.NodeName(demoPool, 1), sc.NodeName(demoPool, 0)

	done := func(node string, action nodeview.Action, report gke.ReportStatus) error {
		return w.check(node, func(h []nodeView) error {
			if len(h) == 0 {
				return fmt.Errorf("not seen")
			}
			last := h[len(h)-1]
			if last.action != string(action) || last.state != string(nodeview.Done) || last.report != string(report) ||
				last.fault != "" || last.perform || last.maintenance != "" || last.cordoned || !last.ready {
				return fmt.Errorf("not back in service with its %s done: %s", action, last)
			}
			return nil
		})
	}
	testenv.Eventually(t, end, "every repair done before the story ends", func() error {
		if msg := s.Exited(); msg != "" {
			t.Fatalf("a component stopped: %s", msg)
		}
		if err := done(repaired, nodeview.ReportFaultyHost, gke.ReportOperationDone); err != nil {
			return err
		}
		return done(reported, nodeview.ReportFaultyHost, gke.ReportOperationDone)
	})
	t.Logf("both repairs done %s into the story's %s", time.Since(begin).Round(time.Second), end)

	// Nothing stalled, failed or got stuck on the way, and at the end no alert is firing about the product itself
	// or either node. (The cluster's readiness finding, a missing graceful-termination ConfigMap, is the story's.)
	prom, err := s.PrometheusAPI()
	if err != nil {
		t.Fatal(err)
	}
	lookback := model.Duration(time.Since(begin) + time.Minute)
	testenv.Eventually(t, time.Minute, "no alert of the product or the nodes firing at the end, none stalled ever", func() error {
		for _, q := range []string{
			fmt.Sprintf(`max_over_time(ALERTS{alertstate="firing", alertname=~"GKEDisruptionActionsStalled|GKEDisruptionActionFailed|GKENodeReportFaultyHostFailed|GKENodeMaintenanceStuck"}[%s])`, lookback),
			fmt.Sprintf(`ALERTS{alertstate="firing", alertname=~"GKEDisruption.*|GKENodeAgentMissing"} or ALERTS{alertstate="firing", node=~"%s|%s"}`, repaired, reported),
		} {
			v, _, _, err := prom.Query(ctx, q, time.Now())
			if err != nil {
				return err
			}
			if vec, ok := v.(model.Vector); !ok || len(vec) > 0 {
				return fmt.Errorf("%s: %v", q, v)
			}
		}
		return nil
	})
}
