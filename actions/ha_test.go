package actions

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/alertmanager/template"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// testTwoReplicas feeds two replicas the same alerts concurrently and over and over, as Alertmanager does with
// retries and repeat_interval, kills the leader half-way, and checks from every watch event that the pool's budget
// (maxUnavailable 1) is never exceeded and that every node is claimed exactly once.
func testTwoReplicas(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("ha")
	ns := api.Namespace("ha")
	var names []string
	for i := range 4 {
		name := fmt.Sprintf("%s-node-%d", pool, i)
		c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
		c.pod(ns, fmt.Sprintf("work-%d", i), name, grace(1))
		names = append(names, name)
	}
	budget := watchPool(t, api, pool, 1)
	replicas := startReplicaPair(t, api, poolPolicy(pool, ""))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	// GKE: maintenance begins on a drained node and ends a moment later.
	playGKE(ctx, &wg, c, names, simulateGKE)

	// Alertmanager: the same four alerts to both replicas at once, again and again.
	var alerts = payload(t, func() (out []template.Alert) {
		for _, n := range names {
			out = append(out, alert(n, nodeview.Drain, false, startsAt))
		}
		return out
	}()...)
	var codesMu sync.Mutex
	codes := map[string]map[int]int{}
	for _, r := range replicas {
		codes[r.identity] = map[int]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if code := send(ctx, r.url, alerts); code != 0 {
					codesMu.Lock()
					codes[r.identity][code]++
					codesMu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(300 * time.Millisecond):
				}
			}
		}()
	}

	// Half-way, the leader dies; the other replica must resume without double work.
	testenv.Eventually(t, waitLong, "first node finished", func() error {
		for _, name := range names {
			if r := nodeview.Of(c.get(name)).Record; r.Phase == nodeview.Done && r.CordonedBy == "" {
				return nil
			}
		}
		return fmt.Errorf("no node finished yet")
	})
	stopLeader(t, replicas)
	for _, name := range names {
		c.waitNode(name, "node "+name+" drained, maintained and uncordoned", func(n *corev1.Node) error {
			r := nodeview.Of(n).Record
			if r.Phase != nodeview.Done || n.Spec.Unschedulable || r.CordonedBy != "" {
				return fmt.Errorf("state %q, unschedulable %v, cordoned-by %q", r.Phase, n.Spec.Unschedulable, r.CordonedBy)
			}
			return nil
		})
	}
	cancel()
	wg.Wait()

	budget.check(t, names, 1)
	c.acceptedAtMostOnce(names)
	codesMu.Lock()
	defer codesMu.Unlock()
	for id, byCode := range codes {
		if byCode[http.StatusServiceUnavailable] == 0 && byCode[http.StatusOK] == 0 {
			t.Errorf("replica %s answered nothing useful: %v", id, byCode)
		}
	}
	if codes["replica-a"][http.StatusServiceUnavailable]+codes["replica-b"][http.StatusServiceUnavailable] == 0 {
		t.Errorf("the follower never answered 503: %v", codes)
	}
}

// startReplicaPair starts replica-a and replica-b on one Lease with the same policy.
func startReplicaPair(t *testing.T, api *testenv.APIServer, policy string) []*replica {
	lease := unique("lease")
	return []*replica{
		startReplica(t, api, policy, replicaOpts{identity: "replica-a", lease: lease}),
		startReplica(t, api, policy, replicaOpts{identity: "replica-b", lease: lease}),
	}
}

// playGKE runs simulate over the nodes every 200ms until ctx ends.
func playGKE(ctx context.Context, wg *sync.WaitGroup, c *cluster, names []string, simulate func(context.Context, *cluster, string)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, name := range names {
				simulate(ctx, c, name)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// stopLeader stops the leading replica, half-way through the work; the other must resume it.
func stopLeader(t *testing.T, replicas []*replica) {
	t.Helper()
	stopped := 0
	for _, r := range replicas {
		if r.svc.Leading() {
			r.stop()
			stopped++
		}
	}
	if stopped != 1 {
		t.Fatalf("%d replicas leading, want 1", stopped)
	}
}

// acceptedAtMostOnce: Events are best effort (a replica stopped mid-way may not deliver its last ones), but never
// doubled.
func (c *cluster) acceptedAtMostOnce(names []string) {
	c.t.Helper()
	for _, name := range names {
		if got := c.countEvents(name, "DisruptionActionAccepted"); got > 1 {
			c.t.Errorf("node %s accepted %d times: %q", name, got, c.events(name))
		}
	}
}

// simulateGKE moves one node along as GKE would after our drain: maintenance starts on a drained node and, once the
// service has noticed it, ends. Errors are left for the next round.
func simulateGKE(ctx context.Context, c *cluster, name string) {
	n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	r := nodeview.Of(n).Record
	if r.Phase != nodeview.Done || r.CordonedBy == "" {
		return
	}
	_, inMaintenance := n.Labels[gke.LabelActiveNodeMaintenance]
	switch {
	case !inMaintenance && !r.MaintenanceSeen:
		n.Labels[gke.LabelActiveNodeMaintenance] = "ONGOING"
	case inMaintenance && r.MaintenanceSeen:
		delete(n.Labels, gke.LabelActiveNodeMaintenance)
		delete(n.Labels, gke.LabelScheduledMaintenanceTime)
	default:
		return
	}
	_, _ = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
}

// send posts a webhook body and returns the status, or 0 when the replica is gone.
func send(ctx context.Context, url string, body []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+webhook.Path, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
