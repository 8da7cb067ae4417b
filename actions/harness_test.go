package actions

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	"github.com/go-logr/logr"
	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/executor"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/silence"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestMain silences client-go's own logging (leader election chatter); the service's logs are kept per replica
// and printed when a test fails.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// waitLong bounds every wait on the service; drains in test policies finish in seconds.
const waitLong = 60 * time.Second

func unique(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// replica is one running service with its HTTP server.
type replica struct {
	t        testing.TB
	svc      *Service
	url      string
	reg      *prometheus.Registry
	identity string
	stop     func()
}

type replicaOpts struct {
	identity string
	lease    string
	// leaseNamespace holds the Lease (default: default); instances differ by Lease.
	leaseNamespace string
	webConfig      string // exporter-toolkit web config file
	self           types.NamespacedName
	dryRun         bool
	// alertmanager, when set, is the Alertmanager the replica keeps silences in.
	alertmanager string
	// wrapTransport, when set, wraps the replica's API client transport (fault injection).
	wrapTransport func(http.RoundTripper) http.RoundTripper
	// qps and burst, when set, limit the replica's API clients as --kube.api-qps and --kube.api-burst do.
	qps   float32
	burst int
	// gke, when set, is the replica's client of its cluster in the GKE API; calendar, when set, reads the
	// cluster's maintenance window and exclusions in place of the default one-minute cache.
	gke      executor.GKE
	calendar executor.Calendar
}

// logBuffer keeps a replica's logs and prints them if the test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func startReplica(t testing.TB, api *testenv.APIServer, policy string, o replicaOpts) *replica {
	t.Helper()
	cfg, err := config.Parse([]byte(policy))
	if err != nil {
		t.Fatalf("test policy: %v", err)
	}
	if o.identity == "" {
		o.identity = unique("replica")
	}
	if o.lease == "" {
		o.lease = unique("lease")
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", o.identity)
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("logs of %s:\n%s", o.identity, logs.buf.String())
			logs.mu.Unlock()
		}
	})
	restConfig := rest.CopyConfig(api.Config)
	if o.wrapTransport != nil {
		restConfig.Wrap(o.wrapTransport)
	}
	if o.qps > 0 {
		restConfig.QPS, restConfig.Burst = o.qps, o.burst
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	leaseClient, err := kubernetes.NewForConfig(restConfig) // as the command builds it: a rate limiter of its own
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var silencer *silence.Silencer
	if o.alertmanager != "" {
		u, err := url.Parse(o.alertmanager)
		if err != nil {
			t.Fatal(err)
		}
		silencer, err = silence.New(logger, silence.Options{URLs: []*url.URL{u}, CheckInterval: 100 * time.Millisecond,
			ResyncInterval: time.Second, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(logger, Options{
		Config:          cfg,
		DryRun:          o.dryRun,
		Client:          client,
		LeaseClient:     leaseClient,
		Identity:        o.identity,
		Self:            o.self,
		LeaseName:       o.lease,
		LeaseNamespace:  o.leaseNamespace,
		LeaseDuration:   3 * time.Second,
		RenewDeadline:   2 * time.Second,
		RetryPeriod:     500 * time.Millisecond,
		RequeueInterval: 500 * time.Millisecond,
		Silencer:        silencer,
		Registerer:      reg,
		GKE:             o.gke,
		Calendar:        o.calendar,
	})
	if err != nil {
		t.Fatal(err)
	}
	systemd := false
	flags := &serve.Flags{
		Toolkit:       &web.FlagConfig{WebListenAddresses: &[]string{"127.0.0.1:0"}, WebSystemdSocket: &systemd, WebConfigFile: &o.webConfig},
		TelemetryPath: new(string),
	}
	*flags.TelemetryPath = "/metrics"
	server, err := serve.New(logger, flags, "test", "test", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		t.Fatal(err)
	}
	server.Mux.Handle(webhook.Path, svc.Webhook())
	server.SetReadyFunc(svc.Ready)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = server.Serve(ctx, l) }()
	go func() { defer wg.Done(); _ = svc.Run(ctx) }()
	var once sync.Once
	r := &replica{t: t, svc: svc, url: "http://" + l.Addr().String(), reg: reg, identity: o.identity,
		stop: func() { once.Do(func() { cancel(); wg.Wait() }) }}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) waitLeading() {
	r.t.Helper()
	testenv.Eventually(r.t, waitLong, r.identity+" becoming leader", func() error {
		if !r.svc.Leading() {
			return fmt.Errorf("not leading")
		}
		return nil
	})
}

// metric returns the value of a counter, gauge or histogram count with exactly these labels (0 when absent).
func (r *replica) metric(name string, labels map[string]string) float64 {
	r.t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return 0
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

func (r *replica) waitMetric(step, name string, labels map[string]string, want float64) {
	r.t.Helper()
	testenv.Eventually(r.t, waitLong, step, func() error {
		if got := r.metric(name, labels); got != want {
			return fmt.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
		return nil
	})
}

// alert is one Alertmanager alert as the mixin's rules raise it.
func alert(node string, action nodeview.Action, canReschedule bool, startsAt time.Time) template.Alert {
	labels := template.KV{"alertname": "GKENodeMaintenanceNotReschedulable", "severity": "warning", "node": node,
		"gke_disruption_action": string(action), "can_reschedule": fmt.Sprint(canReschedule)}
	if action == nodeview.PerformMaintenance {
		labels["alertname"] = "GKENodeMaintenanceWindowApproaching"
	}
	return template.Alert{Status: "firing", Labels: labels, Annotations: template.KV{}, StartsAt: startsAt,
		Fingerprint: node + "-" + string(action)}
}

func payload(t testing.TB, alerts ...template.Alert) []byte {
	t.Helper()
	msg := webhook.Message{Data: template.Data{Receiver: "gke-disruption-actions", Status: "firing", Alerts: alerts,
		GroupLabels: template.KV{}, CommonLabels: template.KV{}, CommonAnnotations: template.KV{}}, Version: "4", GroupKey: "{}:{}"}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type postOpts struct {
	contentType string
	user, pass  string
}

// post sends a webhook request and returns the status and, on 200, the decisions.
func post(t testing.TB, url string, body []byte, o postOpts) (int, []webhook.Result) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+webhook.Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if o.contentType == "" {
		o.contentType = "application/json"
	}
	req.Header.Set("Content-Type", o.contentType)
	if o.user != "" {
		req.SetBasicAuth(o.user, o.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var results []webhook.Result
	if err := json.Unmarshal(data, &results); err != nil {
		t.Fatalf("200 reply is not a list of decisions: %v: %s", err, data)
	}
	return resp.StatusCode, results
}

// mustAccept posts alerts and requires each to be accepted.
func mustAccept(t testing.TB, r *replica, alerts ...template.Alert) {
	t.Helper()
	code, results := post(t, r.url, payload(t, alerts...), postOpts{})
	if code != http.StatusOK {
		t.Fatalf("webhook answered %d", code)
	}
	for _, res := range results {
		if res.Decision != webhook.Accepted {
			t.Fatalf("alert not accepted: %+v", res)
		}
	}
}

// cluster creates the objects a test needs and plays the parts of the kubelet and GKE.
type cluster struct {
	t      testing.TB
	client kubernetes.Interface
}

func newCluster(t testing.TB, api *testenv.APIServer) *cluster {
	return &cluster{t: t, client: api.Client}
}

// node creates a Ready node with labels.
func (c *cluster) node(name string, labels map[string]string, mutate ...func(*corev1.Node)) *corev1.Node {
	c.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, m := range mutate {
		m(n)
	}
	created, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	created, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return created
}

func (c *cluster) get(name string) *corev1.Node {
	c.t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// waitNode polls the node until check passes.
func (c *cluster) waitNode(name, step string, check func(*corev1.Node) error) *corev1.Node {
	c.t.Helper()
	var last *corev1.Node
	testenv.Eventually(c.t, waitLong, step, func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = n
		return check(n)
	})
	return last
}

func inState(phase nodeview.Phase) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		if r := nodeview.Of(n).Record; r.Phase != phase {
			return fmt.Errorf("state %q (reason %q), want %q", r.Phase, r.Reason, phase)
		}
		return nil
	}
}

// updateNode changes a node as GKE would, retrying when the service changed it in between.
func (c *cluster) updateNode(name, step string, change func(*corev1.Node)) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = c.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatalf("%s on %s: %v", step, name, err)
	}
}

// startMaintenance does what GKE does when maintenance begins: label, taint, and the perform-maintenance request
// consumed.
func (c *cluster) startMaintenance(name string) {
	c.t.Helper()
	c.updateNode(name, "starting maintenance", func(n *corev1.Node) {
		n.Labels[gke.LabelActiveNodeMaintenance] = "ONGOING"
		delete(n.Labels, gke.LabelPerformMaintenance)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: gke.TaintImpendingTermination, Effect: corev1.TaintEffectNoSchedule})
	})
}

// startMaintenanceAndWaitNoted starts GKE's maintenance and waits until the service has recorded seeing it, which
// is what lets it uncordon once maintenance ends.
func (c *cluster) startMaintenanceAndWaitNoted(name string) {
	c.t.Helper()
	c.startMaintenance(name)
	c.waitNode(name, "maintenance noted", func(n *corev1.Node) error {
		if !nodeview.Of(n).Record.MaintenanceSeen {
			return fmt.Errorf("annotations %v", n.Annotations)
		}
		return nil
	})
}

// finishMaintenance clears GKE's maintenance label, taint and scheduled time.
func (c *cluster) finishMaintenance(name string) {
	c.t.Helper()
	c.updateNode(name, "finishing maintenance", func(n *corev1.Node) {
		delete(n.Labels, gke.LabelActiveNodeMaintenance)
		delete(n.Labels, gke.LabelScheduledMaintenanceTime)
		var taints []corev1.Taint
		for _, taint := range n.Spec.Taints {
			if taint.Key != gke.TaintImpendingTermination {
				taints = append(taints, taint)
			}
		}
		n.Spec.Taints = taints
	})
}

type podOpt func(*corev1.Pod)

func grace(seconds int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &seconds }
}

func withLabels(l map[string]string) podOpt { return func(p *corev1.Pod) { p.Labels = l } }

func withAnnotations(a map[string]string) podOpt { return func(p *corev1.Pod) { p.Annotations = a } }

func ownedBy(kind, name string, uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
}

// pod creates a Running pod bound to node (no scheduler or kubelet runs, so both are set here).
func (c *cluster) pod(ns, name, node string, opts ...podOpt) *corev1.Pod {
	c.t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
	for _, o := range opts {
		o(p)
	}
	created, err := c.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	created, err = c.client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return created
}

// events returns the reasons of the Events on a node, each repeated by its count.
func (c *cluster) events(node string) []string {
	c.t.Helper()
	list, err := c.client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String()})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		for range max(e.Count, 1) {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// waitEvent waits for an Event on the node whose reason and message contain want.
func (c *cluster) waitEvent(node, want string) {
	c.t.Helper()
	testenv.Eventually(c.t, waitLong, "event "+want+" on "+node, func() error {
		evs := c.events(node)
		for _, e := range evs {
			if strings.Contains(e, want) {
				return nil
			}
		}
		return fmt.Errorf("events: %q", evs)
	})
}

func (c *cluster) countEvents(node, reason string) int {
	n := 0
	for _, e := range c.events(node) {
		if strings.HasPrefix(e, reason+":") {
			n++
		}
	}
	return n
}

// kubelet plays the kubelet for pods being deleted: it records the grace period each got, then removes them
// (force delete with grace 0) unless paused.
type kubelet struct {
	client kubernetes.Interface
	mu     sync.Mutex
	grace  map[string]int64 // namespace/name -> deletionGracePeriodSeconds
	paused bool
}

func startKubelet(t testing.TB, client kubernetes.Interface) *kubelet {
	k := &kubelet{client: client, grace: map[string]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			k.finishTerminating(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

func (k *kubelet) finishTerminating(ctx context.Context) {
	pods, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // API server away; try again
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		k.mu.Lock()
		if _, seen := k.grace[p.Namespace+"/"+p.Name]; !seen && p.DeletionGracePeriodSeconds != nil {
			k.grace[p.Namespace+"/"+p.Name] = *p.DeletionGracePeriodSeconds
		}
		paused := k.paused
		k.mu.Unlock()
		if paused {
			continue
		}
		zero := int64(0)
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			continue
		}
	}
}

func (k *kubelet) setPaused(p bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.paused = p
}

func (k *kubelet) graceOf(ns, name string) (int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g, ok := k.grace[ns+"/"+name]
	return g, ok
}

// webConfigFile writes an exporter-toolkit web config with basic auth users alertmanager and prometheus (a scrape
// user, who may not post alerts).
func webConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web.yml")
	scrapeUser, err := bcrypt.GenerateFromPassword([]byte("prometheus-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// bcrypt of "alertmanager-secret"
	content := "basic_auth_users:\n  alertmanager: $2a$10$8z6Qx1wIHx4vFkGy1wVOBu/R1Y38ZVv8RGRMrLuQlZCMPoZqfQb6u\n" +
		"  prometheus: " + string(scrapeUser) + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
