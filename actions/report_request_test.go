package actions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestReportRequestEdges attacks the faulty-host request kept on its node with what real setups produce: repeats
// and resolves in every order, garbage in the annotation, reloads, restarts across the start deadline, another
// instance whose owner is gone, API errors on the withdrawal.
func TestReportRequestEdges(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("RepeatsResolvesAndNewIncident", func(t *testing.T) { testRequestResolveOrders(t, api) })
	t.Run("ResolvedWhileClaimed", func(t *testing.T) { testRequestResolvedWhileClaimed(t, api) })
	t.Run("GarbageAnnotation", func(t *testing.T) { testRequestGarbage(t, api) })
	t.Run("DryRunReloadedWhileKept", func(t *testing.T) { testRequestDryRunReload(t, api) })
	t.Run("NodeRecreated", func(t *testing.T) { testRequestNodeRecreated(t, api) })
	t.Run("StartDeadlineEdges", func(t *testing.T) { testReportDeadlineEdges(t, api) })
	t.Run("WithdrawalConflict", func(t *testing.T) { testRequestWithdrawalConflict(t, api) })
	t.Run("OwnerGoneAdoptedByOtherInstance", func(t *testing.T) { testRequestOwnerGone(t, api) })
	t.Run("BusyClientKeepsTheLease", func(t *testing.T) { testBusyClientKeepsLease(t, api) })
	t.Run("BusyClientRefusedRepeats", func(t *testing.T) { testBusyClientRefusedRepeats(t, api) })
}

// testBusyClientRefusedRepeats: at 5 QPS, a batch of reports on machine types GKE cannot report, larger than can be
// kept before the webhook answers 500, is retried as Alertmanager does. A request refused already is not kept again
// (it would only be removed again), so the retries make progress and the batch is answered 200 in the end.
func testBusyClientRefusedRepeats(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-refused-flood")
	var alerts []template.Alert
	for i := range 120 {
		name := fmt.Sprintf("%s-%03d", pool, i)
		c.node(name, map[string]string{"pool": pool, gke.LabelInstanceType: "a3-highgpu-4g"})
		alerts = append(alerts, reportAlert(name, "XID", startsAt))
	}
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{qps: 5, burst: 10})
	r.waitLeading()
	retryUntilAnswered(t, r, alerts)
	r.waitMetric("every request refused once", "gke_disruption_actions_total",
		map[string]string{"action": "report-faulty-host", "result": "skipped"}, float64(len(alerts)))
	for _, a := range alerts {
		notReported(t, c, a.Labels["node"])
	}
}

// testBusyClientKeepsLease: at client-go's default 5 QPS, a flood of reports keeps the node client busy for far
// longer than the Lease lasts. The Lease is renewed by a client of its own, so the leader stays leader throughout,
// and every request is kept in the end (Alertmanager retries the batches answered 500).
func testBusyClientKeepsLease(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-flood")
	var alerts []template.Alert
	for i := range 120 {
		name := fmt.Sprintf("%s-%03d", pool, i)
		c.node(name, a4Node(pool))
		alerts = append(alerts, reportAlert(name, "XID", startsAt))
	}
	// One repair slot: one host is reported, the other requests wait, kept on their nodes.
	r := startReplica(t, api, repairPolicy(pool, ""), replicaOpts{qps: 5, burst: 10})
	r.waitLeading()
	ctx, cancel := context.WithCancel(context.Background())
	var lost atomic.Int64
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for ctx.Err() == nil {
			if !r.svc.Leading() {
				lost.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	retryUntilAnswered(t, r, alerts)
	cancel()
	watched.Wait()
	if n := lost.Load(); n > 0 {
		t.Errorf("the leader stopped leading %d times (sampled every 50ms) while its node client was busy", n)
	}
	kept := 0
	for _, a := range alerts {
		n := c.get(a.Labels["node"])
		if v := nodeview.Of(n); v.Record.Request != nil || v.Record.Incident != "" {
			kept++
		}
	}
	if kept != len(alerts) {
		t.Errorf("%d of %d requests kept or claimed once the batch was answered 200", kept, len(alerts))
	}
}

// requestFor checks that the node keeps the request of the incident that began at startsAt.
func requestFor(startsAt time.Time, behavior string) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		req := nodeview.Of(n).Record.Request
		if req == nil || !req.StartsAt.Equal(startsAt) || req.FaultBehavior != behavior {
			return fmt.Errorf("kept request %+v, want incident %s (%s): %v", req, startsAt, behavior, n.Annotations[nodeview.AnnotationReportRequest])
		}
		return nil
	}
}

// notReported requires that the node was neither claimed nor labelled, and keeps no request.
func notReported(t *testing.T, c *cluster, name string) {
	t.Helper()
	n := c.get(name)
	if r := nodeview.Of(n).Record; r.Phase != "" || r.Request != nil || n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("%s: state %q, request %+v, labels %v", name, r.Phase, r.Request, n.Labels)
	}
}

// resolve posts the alert as resolved and requires 200.
func resolveAlert(t *testing.T, r *replica, node, behavior string, startsAt time.Time) {
	t.Helper()
	a := reportAlert(node, behavior, startsAt)
	a.Status = "resolved"
	if code, _ := post(t, r.url, payload(t, a), postOpts{}); code != http.StatusOK {
		t.Fatalf("resolved alert for %s (%s) answered %d", node, startsAt, code)
	}
}

// busyPool starts a replica on a pool with one repair slot, taken by a's report, so b's requests wait.
func busyPool(t *testing.T, api *testenv.APIServer, prefix, a, b string, o replicaOpts) (c *cluster, r *replica, policy string) {
	t.Helper()
	c = newCluster(t, api)
	pool := unique(prefix)
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	policy = repairPolicy(pool, "")
	r = startReplica(t, api, policy, o)
	r.waitLeading()
	mustAccept(t, r, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	return c, r, policy
}

// testRequestResolveOrders: repeats keep the request as it is; a resolve of an older incident leaves the kept one;
// a new incident replaces the kept one, and the resolve of the old incident that follows does not withdraw it; the
// new incident is the one reported.
func testRequestResolveOrders(t *testing.T, api *testenv.APIServer) {
	a, b := unique("a4-a"), unique("a4-b")
	c, r, _ := busyPool(t, api, "req-orders", a, b, replicaOpts{})
	first := startsAt.Add(time.Hour)
	mustAccept(t, r, reportAlert(b, "XID", first))
	c.waitNode(b, "first incident kept", requestFor(first, "XID"))
	mustAccept(t, r, reportAlert(b, "XID", first)) // a repeat; it may write the request again if the watch lags
	resolveAlert(t, r, b, "XID", startsAt)         // an older incident's resolve
	settle()
	if err := requestFor(first, "XID")(c.get(b)); err != nil {
		t.Fatalf("after a repeat and an older resolve: %v", err)
	}

	second := startsAt.Add(2 * time.Hour)
	mustAccept(t, r, reportAlert(b, "PERFORMANCE", second))
	c.waitNode(b, "the new incident replaces the kept one", requestFor(second, "PERFORMANCE"))
	resolveAlert(t, r, b, "XID", first)
	settle()
	if err := requestFor(second, "PERFORMANCE")(c.get(b)); err != nil {
		t.Fatalf("the old incident's resolve withdrew the new one: %v", err)
	}

	c.setReportStatus(a, gke.ReportOperationDone)
	n := c.waitNode(b, "the new incident reported", hostReported("PERFORMANCE"))
	if r := nodeview.Of(n).Record; r.Incident != nodeview.IncidentKey(second) || r.Request != nil {
		t.Errorf("incident %q, request %+v; want %q and none", r.Incident, r.Request, nodeview.IncidentKey(second))
	}
}

// onRequest runs hook once before a request of method on the path ending in suffix (whose body contains marker) is
// sent: another writer acting between the service's read and its write.
type onRequest struct {
	next   http.RoundTripper
	method string
	suffix string
	marker string
	once   *sync.Once
	hook   func()
}

func (o onRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == o.method && strings.HasSuffix(req.URL.Path, o.suffix) {
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if bytes.Contains(body, []byte(o.marker)) {
			o.once.Do(o.hook)
		}
	}
	return o.next.RoundTrip(req)
}

// testRequestResolvedWhileClaimed: the alert resolves while the leader claims the node for it (after its read,
// before its write lands). The resolve is answered, the claim written on the node as read fails, and the host is not
// reported: the withdrawal wins, nothing is left kept.
func testRequestResolvedWhileClaimed(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("req-claimrace")
	node := unique("a4")
	c.node(node, a4Node(pool))
	var r *replica
	resolved := make(chan int, 1)
	hook := func() {
		a := reportAlert(node, "XID", startsAt)
		a.Status = "resolved"
		code, _ := post(t, r.url, payload(t, a), postOpts{})
		resolved <- code
	}
	r = startReplica(t, api, poolPolicy(pool, ""), replicaOpts{wrapTransport: func(next http.RoundTripper) http.RoundTripper {
		return onRequest{next: next, method: http.MethodPatch, suffix: "/nodes/" + node, marker: nodeview.AnnotationIncident, once: &sync.Once{}, hook: hook}
	}})
	r.waitLeading()
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	select {
	case code := <-resolved:
		if code != http.StatusOK {
			t.Fatalf("resolve during the claim answered %d", code)
		}
	case <-time.After(waitLong):
		t.Fatal("the node was never claimed")
	}
	settle()
	notReported(t, c, node)
}

// testRequestGarbage: an annotation the service cannot read is replaced by the next request; a kept request whose
// owner names no Lease (edited by hand, say) is not left to that owner for ever.
func testRequestGarbage(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("req-garbage")
	unreadable, ownerless := unique("a4-u"), unique("a4-o")
	c.node(unreadable, a4Node(pool), func(n *corev1.Node) {
		n.Annotations = map[string]string{nodeview.AnnotationReportRequest: `{"startsAt": "yesterday"`}
	})
	req := nodeview.ReportRequest{StartsAt: startsAt, FaultBehavior: "XID", Owner: "someone", ReceivedAt: time.Now()}
	c.node(ownerless, a4Node(pool), func(n *corev1.Node) {
		n.Annotations = map[string]string{nodeview.AnnotationReportRequest: req.Encode()}
	})
	r := startReplica(t, api, repairSlots(pool, 2, ""), replicaOpts{})
	r.waitLeading()
	reportByCLI(t, r, unreadable, gke.FaultSDC, time.Now())
	c.waitNode(unreadable, "reported over the unreadable annotation", hostReported("SDC"))
	c.waitNode(unreadable, "the unreadable annotation gone with the claim", func(n *corev1.Node) error {
		if v, ok := n.Annotations[nodeview.AnnotationReportRequest]; ok {
			return fmt.Errorf("annotation left: %q", v)
		}
		return nil
	})
	c.waitNode(ownerless, "the request of an owner that names no Lease taken up", hostReported("XID"))
}

// testRequestDryRunReload: dry run switched on by a reload while a request waits writes nothing and leaves the request
// kept; switched off again, the request is reported.
func testRequestDryRunReload(t *testing.T, api *testenv.APIServer) {
	a, b := unique("a4-a"), unique("a4-b")
	c, r, policy := busyPool(t, api, "req-dryrun", a, b, replicaOpts{})
	reportByCLI(t, r, b, gke.FaultXID, time.Now())
	c.waitNode(b, "kept", requestKept(true, "default/"+leaseOf(t, r)))
	r.svc.SetConfig(mustParse(t, "dryRun: true\n"+policy))
	c.setReportStatus(a, gke.ReportOperationDone)
	settle()
	if n := c.get(b); nodeview.Of(n).Record.Phase != "" || n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Request == nil {
		t.Fatalf("under dry run: annotations %v, labels %v", n.Annotations, n.Labels)
	}
	r.svc.SetConfig(mustParse(t, policy))
	c.waitNode(b, "reported once dry run is off", hostReported("XID"))
}

// repairSlots is poolPolicy with n repair slots.
func repairSlots(pool string, n int, extra string) string {
	return strings.Replace(poolPolicy(pool, extra), "    maxUnavailable: 1\n", fmt.Sprintf("    maxUnavailable: 1\n    repair: {maxConcurrent: %d}\n", n), 1)
}

func mustParse(t *testing.T, policy string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testRequestNodeRecreated: a request is left on a node by an instance that was removed; while the leader takes it
// up, the node is deleted and re-created under the same name (a new VM). The request was the old VM's: the new one
// is not reported.
func testRequestNodeRecreated(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("req-recreated")
	node, gone := unique("a4"), unique("removed")
	req := nodeview.ReportRequest{StartsAt: time.Now(), FaultBehavior: "XID", Owner: "default/" + gone, ReceivedAt: time.Now()}
	old := c.node(node, a4Node(pool), func(n *corev1.Node) {
		n.Annotations = map[string]string{nodeview.AnnotationReportRequest: req.Encode()}
	})
	var leader atomic.Pointer[replica]
	recreate := func() { // as the leader asks whether the removed instance still holds its Lease
		if err := c.client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
			return
		}
		recreated := c.node(node, a4Node(pool))
		testenv.Eventually(t, waitLong, "the leader's watch shows the new node", func() error {
			r := leader.Load()
			if r == nil {
				return fmt.Errorf("not started")
			}
			for _, v := range r.svc.executor.Nodes() {
				if v.Name == node && v.UID == recreated.UID {
					return nil
				}
			}
			return fmt.Errorf("not yet")
		})
	}
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{wrapTransport: func(next http.RoundTripper) http.RoundTripper {
		return onRequest{next: next, method: http.MethodGet, suffix: "/leases/" + gone, once: &sync.Once{}, hook: recreate}
	}})
	leader.Store(r)
	r.waitLeading()
	c.waitNode(node, "re-created", func(n *corev1.Node) error {
		if n.UID == old.UID {
			return fmt.Errorf("not re-created yet")
		}
		return nil
	})
	settle()
	notReported(t, c, node)
}

// testReportDeadlineEdges: the start deadline counts from the requested-at annotation across a restart, a reload
// that shortens it applies to a report under way, and a status that arrives as the deadline passes wins.
func testReportDeadlineEdges(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-deadline")
	restarted, reloaded, raced := unique("a4-restart"), unique("a4-reload"), unique("a4-race")
	for _, n := range []string{restarted, reloaded, raced} {
		c.node(n, a4Node(pool))
	}
	hourly := repairSlots(pool, 3, "reportFaultyHost: {startDeadline: 1h}\n")
	lease := unique("lease")
	r := startReplica(t, api, hourly, replicaOpts{lease: lease})
	r.waitLeading()
	mustAccept(t, r, reportAlert(restarted, "XID", startsAt))
	c.waitNode(restarted, "reported", hostReported("XID"))
	r.stop()
	c.updateNode(restarted, "requested two hours ago", func(n *corev1.Node) {
		n.Annotations[nodeview.AnnotationRequestedAt] = nodeview.FormatTime(time.Now().Add(-2 * time.Hour))
	})
	r = startReplica(t, api, hourly, replicaOpts{lease: lease})
	r.waitLeading()
	n := c.waitNode(restarted, "past its deadline after the restart", inState(nodeview.Failed))
	if rec := nodeview.Of(n).Record; !strings.HasPrefix(rec.Reason, reasonNotStartedPrefix) || n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("reason %q, labels %v", rec.Reason, n.Labels)
	}

	mustAccept(t, r, reportAlert(reloaded, "XID", startsAt))
	c.waitNode(reloaded, "reported", hostReported("XID"))
	r.svc.SetConfig(mustParse(t, strings.Replace(hourly, "startDeadline: 1h", "startDeadline: 1s", 1)))
	c.waitNode(reloaded, "the shortened deadline applies", inState(nodeview.Failed))
	r.stop()

	quick := strings.Replace(hourly, "startDeadline: 1h", "startDeadline: 2s", 1)
	r = startReplica(t, api, quick, replicaOpts{lease: lease, wrapTransport: func(next http.RoundTripper) http.RoundTripper {
		return onRequest{next: next, method: http.MethodPatch, suffix: "/nodes/" + raced, marker: reasonNotStartedPrefix, once: &sync.Once{}, hook: func() {
			c.setReportStatus(raced, gke.ReportOperationRunning)
		}}
	}})
	r.waitLeading()
	mustAccept(t, r, reportAlert(raced, "XID", startsAt))
	c.waitNode(raced, "the status that came with the deadline noted", reportStatusNoted(gke.ReportOperationRunning))
	if n := c.get(raced); nodeview.Of(n).Record.Phase != nodeview.HostReported || n.Labels[gke.LabelFaultBehavior] != "XID" {
		t.Errorf("a report GKE started was ended: state %q, labels %v", nodeview.Of(n).Record.Phase, n.Labels)
	}
}

const reasonNotStartedPrefix = "not_started"

// conflictOnce answers 409 to the first PATCH of node whose body contains marker: a node that changed between the
// service's read and its conditional write (a kubelet status update, another controller's label).
type conflictOnce struct {
	next   http.RoundTripper
	node   string
	marker string
	once   *sync.Once
}

func (f conflictOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/nodes/"+f.node) && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		conflict := false
		if bytes.Contains(body, []byte(f.marker)) {
			f.once.Do(func() { conflict = true })
		}
		if conflict {
			msg := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Operation cannot be fulfilled on nodes \"` + f.node +
				`\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","code":409}`
			return &http.Response{StatusCode: http.StatusConflict, Header: http.Header{"Content-Type": []string{"application/json"}},
				Body: io.NopCloser(strings.NewReader(msg)), Request: req}, nil
		}
	}
	return f.next.RoundTrip(req)
}

// testRequestWithdrawalConflict: the node changes between the read and the conditional removal of a resolved
// alert's request. The withdrawal is made on the node as it is now, and the resolve answered 200.
func testRequestWithdrawalConflict(t *testing.T, api *testenv.APIServer) {
	b := unique("a4-b")
	c, r, _ := busyPool(t, api, "req-conflict", unique("a4-a"), b, replicaOpts{wrapTransport: func(next http.RoundTripper) http.RoundTripper {
		return conflictOnce{next: next, node: b, marker: `"` + nodeview.AnnotationReportRequest + `":null`, once: &sync.Once{}}
	}})
	mustAccept(t, r, reportAlert(b, "XID", startsAt.Add(time.Hour)))
	c.waitNode(b, "kept", requestFor(startsAt.Add(time.Hour), "XID"))
	resolveAlert(t, r, b, "XID", startsAt.Add(time.Hour))
	c.waitNode(b, "withdrawn", requestKept(false, ""))
}

// testRequestOwnerGone: two instances (Leases in different namespaces) select the same pool; the one that took a
// waiting request is removed. Once its Lease has expired, the other instance takes up its work and the request.
func testRequestOwnerGone(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("req-ownergone")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	policy := repairPolicy(pool, "")
	taker := startReplica(t, api, policy, replicaOpts{identity: "taker-0", lease: unique("taker")})
	taker.waitLeading()
	mustAccept(t, taker, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	reportByCLI(t, taker, b, gke.FaultSDC, time.Now())
	c.waitNode(b, "kept", requestKept(true, "default/"+leaseOf(t, taker)))

	other := startReplica(t, api, policy, replicaOpts{identity: "other-0", lease: unique("other"), leaseNamespace: "kube-system"})
	other.waitLeading()
	settle()
	taker.stop()
	stopped := time.Now()
	c.setReportStatus(a, gke.ReportOperationDone)
	n := c.waitNode(b, "the request taken up by the other instance", hostReported("SDC"))
	if r := nodeview.Of(n).Record; r.ClaimedBy != "other-0" {
		t.Errorf("claimed by %q", r.ClaimedBy)
	}
	t.Logf("taken up %s after the owner stopped", time.Since(stopped).Round(time.Second))
}

// retryUntilAnswered posts the alerts as one notification again and again, as Alertmanager retries a failed one,
// until the replica answers 200.
func retryUntilAnswered(t *testing.T, r *replica, alerts []template.Alert) {
	t.Helper()
	body := payload(t, alerts...)
	deadline := time.Now().Add(3 * time.Minute)
	for code := 0; code != http.StatusOK; {
		if time.Now().After(deadline) {
			t.Fatalf("the notification was never answered 200 (last %d)", code)
		}
		code = send(context.Background(), r.url, body)
	}
}
