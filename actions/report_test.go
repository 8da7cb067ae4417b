package actions

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	promconfig "github.com/prometheus/common/config"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// TestReportFaultyHost runs faulty-host reports against one real kube-apiserver, the test playing GKE's part
// through the labels GKE documents (fault-behavior consumed, report-and-replace-status advancing).
func TestReportFaultyHost(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("ExactlyOnceThroughRepeatsRestartAndLeaderChange", func(t *testing.T) { testReportExactlyOnce(t, api) })
	t.Run("UnsupportedMachineTypeRefused", func(t *testing.T) { testReportUnsupported(t, api) })
	t.Run("ErrorSurfaced", func(t *testing.T) { testReportError(t, api) })
	t.Run("SecondReportWaitsForRepairBudget", func(t *testing.T) { testReportWaitsForBudget(t, api) })
	t.Run("DryRunWritesNothing", func(t *testing.T) { testReportDryRun(t, api) })
	t.Run("RequestedByCLI", func(t *testing.T) { testReportByCLI(t, api) })
	t.Run("RequestKeptThroughLeaderChange", func(t *testing.T) { testReportRequestKept(t, api) })
	t.Run("WithdrawnRequestNotResumed", func(t *testing.T) { testReportRequestWithdrawn(t, api) })
	t.Run("RequestOfAnotherLiveInstanceLeftToIt", func(t *testing.T) { testReportRequestOwned(t, api) })
	t.Run("GKENeverActs", func(t *testing.T) { testReportNotStarted(t, api) })
	t.Run("RequestNotKeptIsNotTaken", func(t *testing.T) { testReportRequestNotKept(t, api) })
}

func a4Node(pool string) map[string]string {
	return map[string]string{"pool": pool, gke.LabelInstanceType: "a4-highgpu-8g"}
}

// reportAlert is an operator's alert asking for a faulty-host report, e.g. from DCGM's Xid metrics.
func reportAlert(node, behavior string, startsAt time.Time) template.Alert {
	labels := template.KV{"alertname": "GPUXidErrors", "severity": "critical", "node": node,
		"gke_disruption_action": string(nodeview.ReportFaultyHost), "fault_behavior": behavior}
	return template.Alert{Status: "firing", Labels: labels, Annotations: template.KV{}, StartsAt: startsAt,
		Fingerprint: node + "-xid"}
}

// setReportStatus plays GKE: the report's status (and operation), and with a final status the fault-behavior
// label removed, as GKE does after the repair and on an error.
func (c *cluster) setReportStatus(name string, status gke.ReportStatus) {
	c.t.Helper()
	c.updateNode(name, "GKE report status "+string(status), func(n *corev1.Node) {
		n.Labels[gke.LabelReportAndReplaceStatus] = string(status)
		n.Labels[gke.LabelReportAndReplaceOperation] = "operation-1700000000000-abc"
		if gke.ParseReportStatus(string(status)).Final() {
			delete(n.Labels, gke.LabelFaultBehavior)
		}
	})
}

func reportStatusNoted(status gke.ReportStatus) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		if r := nodeview.Of(n).Record; r.ReportStatus != string(status) {
			return fmt.Errorf("recorded status %q (state %q), want %q", r.ReportStatus, r.Phase, status)
		}
		return nil
	}
}

func hostReported(behavior string) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		if r := nodeview.Of(n).Record; r.Phase != nodeview.HostReported || n.Labels[gke.LabelFaultBehavior] != behavior {
			return fmt.Errorf("state %q (reason %q), %s=%q", r.Phase, r.Reason, gke.LabelFaultBehavior, n.Labels[gke.LabelFaultBehavior])
		}
		return nil
	}
}

// labelSets counts, from a watch, how often the node's fault-behavior label goes from absent to set.
type labelSets struct {
	mu    sync.Mutex
	count int
}

func watchLabelSets(t *testing.T, c *cluster, name string) *labelSets {
	t.Helper()
	w, err := c.client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	s := &labelSets{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		set := false
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			_, now := n.Labels[gke.LabelFaultBehavior]
			if now && !set {
				s.mu.Lock()
				s.count++
				s.mu.Unlock()
			}
			set = now
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return s
}

func (s *labelSets) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// leaderOf returns the leading replica.
func leaderOf(t *testing.T, replicas ...*replica) *replica {
	t.Helper()
	var leader *replica
	testenv.Eventually(t, waitLong, "a leader", func() error {
		for _, r := range replicas {
			if r.svc.Leading() {
				leader = r
				return nil
			}
		}
		return fmt.Errorf("no replica leads")
	})
	return leader
}

func testReportExactlyOnce(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report")
	node := unique("a4")
	c.node(node, a4Node(pool))
	sets := watchLabelSets(t, c, node)
	policy := poolPolicy(pool, "")
	replicas := startReplicaPair(t, api, policy)

	// Alertmanager repeats the same alert to every replica alive, throughout.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var targetsMu sync.Mutex
	targets := append([]*replica(nil), replicas...)
	body := payload(t, reportAlert(node, "XID", startsAt))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			targetsMu.Lock()
			now := append([]*replica(nil), targets...)
			targetsMu.Unlock()
			for _, r := range now {
				send(ctx, r.url, body)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	c.waitNode(node, "host reported", hostReported("XID"))
	c.setReportStatus(node, gke.ReportPodsEvicted)
	c.waitNode(node, "PodsEvicted noted", reportStatusNoted(gke.ReportPodsEvicted))
	// Events are sent in the background: a replica stopped at once may take its last one with it.
	c.waitEvent(node, "DisruptionReportStatus: GKE report-and-replace status PodsEvicted")

	// A leader change half-way.
	stopLeader(t, replicas)
	c.setReportStatus(node, gke.ReportOperationRunning)
	c.waitNode(node, "OperationRUNNING noted by the new leader", reportStatusNoted(gke.ReportOperationRunning))

	// A restart: the last replica stops and a fresh one comes up on the same Lease.
	second := leaderOf(t, replicas...)
	second.stop()
	restarted := startReplica(t, api, policy, replicaOpts{identity: "replica-c", lease: leaseOf(t, second)})
	targetsMu.Lock()
	targets = append(targets, restarted)
	targetsMu.Unlock()
	restarted.waitLeading()

	c.setReportStatus(node, gke.ReportOperationDone)
	n := c.waitNode(node, "report done", inState(nodeview.Done))
	restarted.waitMetric("success counted by the replica that saw it end", "gke_disruption_actions_total",
		map[string]string{"action": "report-faulty-host", "result": "succeeded"}, 1)
	if r := nodeview.Of(n).Record; r.Incident != nodeview.IncidentKey(startsAt) || r.ReportStatus != "OperationDone" {
		t.Errorf("record %+v", r)
	}
	c.waitEvent(node, "DisruptionHostReplaced: GKE reported the host and replaced it (OperationDone); operation operation-1700000000000-abc")

	time.Sleep(time.Second) // repeats keep arriving; a second report would be labelled within this
	cancel()
	wg.Wait()
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
	if got := c.countEvents(node, "DisruptionHostReported"); got != 1 {
		t.Errorf("DisruptionHostReported %d times, want once: %q", got, c.events(node))
	}
	c.acceptedAtMostOnce([]string{node})
	for _, status := range []string{"PodsEvicted", "OperationRUNNING"} {
		if got := strings.Count(strings.Join(c.events(node), "\n"), "DisruptionReportStatus: GKE report-and-replace status "+status); got != 1 {
			t.Errorf("status %s evented %d times, want once: %q", status, got, c.events(node))
		}
	}

	// An alert episode that began while the old host was being replaced is about the old host.
	mustAccept(t, restarted, reportAlert(node, "XID", startsAt.Add(time.Hour)))
	c.waitEvent(node, "DisruptionActionRefused: refused report-faulty-host: the incident began at")
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times after a stale episode, want once", got)
	}
}

// leaseOf is the Lease a replica runs under.
func leaseOf(t *testing.T, r *replica) string {
	t.Helper()
	return r.svc.opts.LeaseName
}

func testReportUnsupported(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-unsupported")
	node := unique("a3-4g")
	c.node(node, map[string]string{"pool": pool, gke.LabelInstanceType: "a3-highgpu-4g"})
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	c.waitEvent(node, `DisruptionActionRefused: refused report-faulty-host: machine type "a3-highgpu-4g" cannot have its host reported as faulty`)
	r.waitMetric("refusal counted", "gke_disruption_actions_total", map[string]string{"action": "report-faulty-host", "result": "skipped"}, 1)
	if n := c.get(node); n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Phase != "" {
		t.Errorf("unsupported node touched: labels %v, annotations %v", n.Labels, n.Annotations)
	}
}

func testReportError(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-error")
	node := unique("a4")
	c.node(node, a4Node(pool))
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, reportAlert(node, "sdc", startsAt))
	c.waitNode(node, "host reported", hostReported("SDC"))
	c.setReportStatus(node, gke.ReportPodsEvicted)
	c.waitNode(node, "PodsEvicted noted", reportStatusNoted(gke.ReportPodsEvicted))
	c.setReportStatus(node, "ERROR") // the page spells it both ways
	n := c.waitNode(node, "report failed", inState(nodeview.Failed))
	if r := nodeview.Of(n).Record; !strings.Contains(r.Reason, "GKE could not report the host (Error)") {
		t.Errorf("reason %q", r.Reason)
	}
	c.waitEvent(node, "DisruptionActionFailed: report-faulty-host failed: GKE could not report the host (Error)")
	r.waitMetric("failure counted", "gke_disruption_actions_total", map[string]string{"action": "report-faulty-host", "result": "failed"}, 1)

	// A repeat of the alert is not a retry: the incident was reported once (a retry is a new request).
	mustAccept(t, r, reportAlert(node, "sdc", startsAt))
	time.Sleep(500 * time.Millisecond) // a second report would be labelled within this
	if n := c.get(node); n.Labels[gke.LabelFaultBehavior] != "" || c.countEvents(node, "DisruptionHostReported") != 1 {
		t.Errorf("reported again after Error on a repeat: labels %v, events %q", n.Labels, c.events(node))
	}
}

func testReportWaitsForBudget(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-budget")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	policy := strings.Replace(poolPolicy(pool, ""), "    maxUnavailable: 1\n", "    maxUnavailable: 1\n    repair: {maxConcurrent: 1}\n", 1)
	r := startReplica(t, api, policy, replicaOpts{})
	r.waitLeading()

	mustAccept(t, r, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	// Sent once: the service comes back to it when the budget frees.
	mustAccept(t, r, reportAlert(b, "XID", startsAt))
	c.waitEvent(b, "DisruptionActionWaiting: report-faulty-host waits: pool "+pool+": 1 nodes under repair, repair.maxConcurrent 1")
	r.waitMetric("second report waiting", "gke_disruption_actions_waiting",
		map[string]string{"action": "report-faulty-host", "pool": pool, "reason": "pool_budget"}, 1)
	if n := c.get(b); n.Labels[gke.LabelFaultBehavior] != "" {
		t.Fatal("second host reported while the first uses the only repair slot")
	}
	c.setReportStatus(a, gke.ReportOperationRunning)
	c.setReportStatus(a, gke.ReportOperationDone)
	c.waitNode(b, "second host reported once the first was replaced", hostReported("XID"))
}

func testReportDryRun(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-dry")
	node := unique("a4")
	before := c.node(node, a4Node(pool))
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{dryRun: true})
	r.waitLeading()
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	c.waitEvent(node, "DisruptionActionDryRun: dry run: would report-faulty-host")
	r.waitMetric("dry run counted", "gke_disruption_actions_total", map[string]string{"action": "report-faulty-host", "result": "dry_run"}, 1)
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	time.Sleep(500 * time.Millisecond) // a repeat would be decided within this
	r.waitMetric("a repeat is no second dry run", "gke_disruption_actions_total", map[string]string{"action": "report-faulty-host", "result": "dry_run"}, 1)
	if after := c.get(node); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("dry run changed the node: %v %v", after.Labels, after.Annotations)
	}
}

// testReportByCLI: report-faulty's request goes through the webhook like an alert, authenticated by the web
// config, and is decided by the same policy and record.
func testReportByCLI(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-cli")
	node := unique("a4")
	c.node(node, a4Node(pool))
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{webConfig: webConfigFile(t)})
	r.waitLeading()
	request := func(user, pass string, at time.Time) (string, error) {
		client, err := promconfig.NewClientFromConfig(promconfig.HTTPClientConfig{
			BasicAuth: &promconfig.BasicAuth{Username: user, Password: promconfig.Secret(pass)}}, "test")
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		err = cli.ReportFaulty(context.Background(), &out, cli.ReportOptions{Node: node, Behavior: gke.FaultPerformance,
			ActionsURL: r.url, Client: client, Timeout: waitLong, Now: at})
		return out.String(), err
	}
	if _, err := request("prometheus", "prometheus-secret", time.Now()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a user not in --webhook.users: %v", err)
	}
	out, err := request("alertmanager", "alertmanager-secret", time.Now())
	if err != nil || !strings.Contains(out, "requested") {
		t.Fatalf("report-faulty: %v, %q", err, out)
	}
	c.waitNode(node, "host reported by request", hostReported("PERFORMANCE"))
	// Asked again while GKE works: a new request, refused since GKE rejects a second report meanwhile.
	if _, err := request("alertmanager", "alertmanager-secret", time.Now()); err != nil {
		t.Fatal(err)
	}
	c.waitEvent(node, "DisruptionActionRefused: refused report-faulty-host: the host is already reported as faulty")
}

// repairPolicy is poolPolicy with one repair slot.
func repairPolicy(pool, extra string) string {
	return strings.Replace(poolPolicy(pool, extra), "    maxUnavailable: 1\n", "    maxUnavailable: 1\n    repair: {maxConcurrent: 1}\n", 1)
}

// requestKept checks the node's kept faulty-host request: present (and of whom) or gone.
func requestKept(want bool, owner string) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		req := nodeview.Of(n).Record.Request
		switch {
		case want && req == nil:
			return fmt.Errorf("no request kept: %v", n.Annotations)
		case want && req.Owner != owner:
			return fmt.Errorf("request kept for %q, want %q", req.Owner, owner)
		case !want && req != nil:
			return fmt.Errorf("request still kept: %+v", *req)
		}
		return nil
	}
}

// reportByCLI asks for a report the way report-faulty does: once.
func reportByCLI(t *testing.T, r *replica, node string, behavior gke.FaultBehavior, at time.Time) {
	t.Helper()
	var out strings.Builder
	if err := cli.ReportFaulty(context.Background(), &out, cli.ReportOptions{Node: node, Behavior: behavior,
		ActionsURL: r.url, Client: http.DefaultClient, Timeout: waitLong, Now: at}); err != nil {
		t.Fatalf("report-faulty %s: %v (%q)", node, err, out.String())
	}
}

// testReportRequestKept: report-faulty sends its request once; one that waits for the repair budget is kept on the
// node, so the next leader reports the host once the budget frees.
func testReportRequestKept(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-kept")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	sets := watchLabelSets(t, c, b)
	policy := repairPolicy(pool, "")
	replicas := startReplicaPair(t, api, policy)
	first := leaderOf(t, replicas...)
	first.waitLeading()

	mustAccept(t, first, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	reportByCLI(t, first, b, gke.FaultPerformance, time.Now())
	c.waitEvent(b, "DisruptionActionWaiting: report-faulty-host waits")
	c.waitNode(b, "the waiting request kept on the node", requestKept(true, "default/"+leaseOf(t, first)))

	stopLeader(t, replicas)
	second := leaderOf(t, replicas...)
	if second == first {
		t.Fatal("the stopped replica still leads")
	}
	c.setReportStatus(a, gke.ReportOperationRunning)
	c.setReportStatus(a, gke.ReportOperationDone)
	c.waitNode(b, "the kept request reported by the new leader", hostReported("PERFORMANCE"))
	n := c.waitNode(b, "the request is the claim's now", requestKept(false, ""))
	if r := nodeview.Of(n).Record; r.ClaimedBy != second.identity {
		t.Errorf("claimed by %q, want the new leader %q", r.ClaimedBy, second.identity)
	}
	time.Sleep(time.Second) // a second report would be labelled within this
	if got := sets.get(); got != 1 {
		t.Errorf("fault-behavior labelled %d times, want once", got)
	}
}

// testReportRequestWithdrawn: a waiting request whose alert resolves is withdrawn from the node too, so a restarted
// leader does not take it up.
func testReportRequestWithdrawn(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-withdrawn")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	policy := repairPolicy(pool, "")
	lease := unique("lease")
	r := startReplica(t, api, policy, replicaOpts{lease: lease})
	r.waitLeading()
	mustAccept(t, r, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	waiting := reportAlert(b, "XID", startsAt)
	mustAccept(t, r, waiting)
	c.waitNode(b, "the waiting request kept", requestKept(true, "default/"+lease))
	waiting.Status = "resolved"
	if code, _ := post(t, r.url, payload(t, waiting), postOpts{}); code != http.StatusOK {
		t.Fatalf("resolved alert answered %d", code)
	}
	c.waitNode(b, "the resolved request withdrawn", requestKept(false, ""))

	r.stop()
	restarted := startReplica(t, api, policy, replicaOpts{lease: lease})
	restarted.waitLeading()
	c.setReportStatus(a, gke.ReportOperationDone)
	c.waitNode(a, "first report done", inState(nodeview.Done))
	time.Sleep(time.Second) // a resumed request would be reported within this
	if n := c.get(b); n.Labels[gke.LabelFaultBehavior] != "" || nodeview.Of(n).Record.Phase != "" {
		t.Errorf("withdrawn request reported: labels %v, annotations %v", n.Labels, n.Annotations)
	}
}

// testReportRequestOwned: another instance in the cluster (its own Lease, the same pool) leaves a request kept by a
// live instance to that instance.
func testReportRequestOwned(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-owned")
	a, b := unique("a4-a"), unique("a4-b")
	c.node(a, a4Node(pool))
	c.node(b, a4Node(pool))
	policy := repairPolicy(pool, "")
	taker := startReplica(t, api, policy, replicaOpts{identity: "taker-0", lease: unique("taker")})
	taker.waitLeading()
	mustAccept(t, taker, reportAlert(a, "XID", startsAt))
	c.waitNode(a, "first host reported", hostReported("XID"))
	reportByCLI(t, taker, b, gke.FaultSDC, time.Now())
	c.waitNode(b, "the waiting request kept", requestKept(true, "default/"+leaseOf(t, taker)))

	other := startReplica(t, api, policy, replicaOpts{identity: "other-0", lease: unique("other")})
	other.waitLeading()
	c.setReportStatus(a, gke.ReportOperationDone)
	n := c.waitNode(b, "reported", hostReported("SDC"))
	if r := nodeview.Of(n).Record; r.ClaimedBy != "taker-0" || r.Owner != "default/"+leaseOf(t, taker) {
		t.Errorf("claimed by %q for %q: the instance that took the request should report it", r.ClaimedBy, r.Owner)
	}
}

// testReportNotStarted: a report GKE shows no status for within reportFaultyHost.startDeadline ends failed
// (not_started), the label withdrawn, so the repair slot is free again.
func testReportNotStarted(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-ignored")
	node := unique("a4")
	c.node(node, a4Node(pool))
	r := startReplica(t, api, poolPolicy(pool, "reportFaultyHost: {startDeadline: 2s}\n"), replicaOpts{})
	r.waitLeading()
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	c.waitNode(node, "host reported", hostReported("XID"))
	n := c.waitNode(node, "the report GKE ignored ended", inState(nodeview.Failed))
	rec := nodeview.Of(n).Record
	if !strings.HasPrefix(rec.Reason, "not_started") || n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("reason %q, labels %v", rec.Reason, n.Labels)
	}
	r.waitMetric("counted as failed", "gke_disruption_actions_total", map[string]string{"action": "report-faulty-host", "result": "failed"}, 1)
	r.waitMetric("the slot is free", "gke_disruption_actions_in_progress", map[string]string{"action": "report-faulty-host"}, 0)
	c.waitEvent(node, "DisruptionActionFailed: report-faulty-host failed: not_started: GKE showed no cloud.google.com/report-and-replace-status")
}

// testReportRequestNotKept: while the API server refuses to keep the request on the node, the request is answered
// 500 (Alertmanager retries; report-faulty says so) rather than taken into memory alone; once the API answers, a
// retry is taken and reported.
func testReportRequestNotKept(t *testing.T, api *testenv.APIServer) {
	c := newCluster(t, api)
	pool := unique("report-unkept")
	node := unique("a4")
	c.node(node, a4Node(pool))
	failing := &atomic.Bool{}
	failing.Store(true)
	r := startReplica(t, api, poolPolicy(pool, ""), replicaOpts{wrapTransport: func(next http.RoundTripper) http.RoundTripper {
		return failPatches{next: next, node: node, on: failing}
	}})
	r.waitLeading()
	testenv.Eventually(t, waitLong, "the node in the watch cache", func() error {
		if code, _ := post(t, r.url, payload(t, reportAlert(node, "XID", startsAt)), postOpts{}); code != http.StatusInternalServerError {
			return fmt.Errorf("answered %d, want 500", code)
		}
		return nil
	})
	var out strings.Builder
	err := cli.ReportFaulty(context.Background(), &out, cli.ReportOptions{Node: node, Behavior: gke.FaultXID,
		ActionsURL: r.url, Client: http.DefaultClient, Timeout: waitLong, Now: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("report-faulty while the request cannot be kept: %v (%q)", err, out.String())
	}
	failing.Store(false)
	time.Sleep(time.Second) // a request answered 500 but taken into memory would be claimed within this
	if n := c.get(node); nodeview.Of(n).Record.Phase != "" || n.Labels[gke.LabelFaultBehavior] != "" {
		t.Errorf("a request answered 500 was acted on: labels %v, annotations %v", n.Labels, n.Annotations)
	}
	mustAccept(t, r, reportAlert(node, "XID", startsAt))
	c.waitNode(node, "reported once the API answers", hostReported("XID"))
}
