package actions

import (
	"fmt"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestGroupMembersStopWaiting: every node of a parallel pool of 8 has its own alert, waiting for the cluster cap. When
// the cap makes room, one decision claims the whole pool (more alerts than workers: some members are reconciled
// only after the claim). The members' alerts are no longer waiting (their nodes are
// draining), so gke_disruption_actions_waiting must drop to 0, and resolving those alerts must not count the
// actions as skipped.
func TestGroupMembersStopWaiting(t *testing.T) {
	api := testenv.StartAPIServer(t)
	kl := startKubelet(t, api.Client)
	kl.setPaused(true) // drains stay in progress while the gauges are read
	c := newCluster(t, api)
	pool := unique("waitgroup")
	ns := api.Namespace("waitgroup")
	var nodes []string
	for i := range 8 {
		nodes = append(nodes, fmt.Sprintf("%s-%d", pool, i))
		c.node(nodes[i], map[string]string{"pool": pool}, withScheduledMaintenance)
		c.pod(ns, fmt.Sprintf("worker-%d", i), nodes[i], grace(30))
	}
	policy := func(maxDisrupted int) string {
		return fmt.Sprintf(`
maxDisruptedNodes: %d
pools:
  - name: %[2]s
    nodeSelector: {pool: %[2]s}
    strategy: parallel
drain:
  timeout: 5m
  evictionRetryDelay: 200ms
  maxGracePeriod: 10s
`, maxDisrupted, pool)
	}
	r := startReplica(t, api, policy(7), replicaOpts{})
	r.waitLeading()
	for _, n := range nodes {
		mustAccept(t, r, alert(n, nodeview.Drain, false, startsAt))
	}
	waiting := map[string]string{"action": "drain", "pool": pool, "reason": "cluster_cap"}
	r.waitMetric("all eight wait for the cap", "gke_disruption_actions_waiting", waiting, 8)

	cfg, err := config.Parse([]byte(policy(8)))
	if err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(cfg)
	for _, n := range nodes {
		c.waitNode(n, "the pool drains as one operation", inState(nodeview.Draining))
	}
	r.waitMetric("no alert is waiting once its node is draining", "gke_disruption_actions_waiting", waiting, 0)

	// The alerts resolve while the drains run: nothing was withdrawn.
	var resolved []string
	for _, n := range nodes {
		a := alert(n, nodeview.Drain, false, startsAt)
		a.Status, a.EndsAt = "resolved", time.Now()
		code, _ := post(t, r.url, payload(t, a), postOpts{})
		if code != 200 {
			t.Fatalf("resolve: %d", code)
		}
		resolved = append(resolved, n)
	}
	settle()
	if got := r.metric("gke_disruption_actions_total", map[string]string{"action": "drain", "result": "skipped"}); got != 0 {
		t.Errorf("resolving the alerts of %v, all draining, counted %v drains as skipped", resolved, got)
	}
}
