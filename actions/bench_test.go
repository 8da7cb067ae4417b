package actions

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// BenchmarkWebhookAck measures how long Alertmanager waits for a reply to a notification of 100 actionable alerts,
// over HTTP on loopback, while the leader evaluates the same 100 nodes in the background (dry run, so every
// notification is decided again). Target: p99 <= 50 ms.
func BenchmarkWebhookAck(b *testing.B) {
	const alertsPerPayload = 100
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alerts []template.Alert
	for i := range alertsPerPayload {
		name := fmt.Sprintf("bench-node-%03d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "bench", "cloud.google.com/scheduled-maintenance-time": "1750000000"}},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		alerts = append(alerts, alert(name, nodeview.PerformMaintenance, true, startsAt))
	}
	body := payload(b, alerts...)

	cfg, err := config.Parse([]byte("dryRun: true\npools: [{name: bench, nodeSelector: {pool: bench}, maxUnavailable: '10%'}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	svc, err := New(logger, Options{Config: cfg, Client: client, Identity: "bench", LeaseName: "bench",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond, Registerer: reg})
	if err != nil {
		b.Fatal(err)
	}
	systemd, webConfig, telemetry := false, "", "/metrics"
	server, err := serve.New(logger, &serve.Flags{
		Toolkit:       &web.FlagConfig{WebListenAddresses: &[]string{"127.0.0.1:0"}, WebSystemdSocket: &systemd, WebConfigFile: &webConfig},
		TelemetryPath: &telemetry,
	}, "bench", "bench", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		b.Fatal(err)
	}
	server.Mux.Handle(webhook.Path, svc.Webhook())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = server.Serve(ctx, l) }()
	go func() { _ = svc.Run(ctx) }()
	for !svc.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	url := "http://" + l.Addr().String() + webhook.Path

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		latencies = append(latencies, time.Since(start))
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	quantile := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(quantile(0.5), "p50-ms")
	b.ReportMetric(quantile(0.99), "p99-ms")
	b.ReportMetric(alertsPerPayload, "alerts/payload")
}

// benchReplica starts a replica whose API client has the command's default budget (--kube.api-qps 100,
// --kube.api-burst 200), so the figures are what a deployment sees.
func benchReplica(b *testing.B, api *testenv.APIServer, policy string) *replica {
	b.Helper()
	return startReplica(b, api, policy, replicaOpts{wrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return rateLimited{rt, flowcontrol.NewTokenBucketRateLimiter(100, 200)}
	}})
}

// rateLimited holds each request to a client-side budget, as client-go does with rest.Config's QPS and Burst.
type rateLimited struct {
	next    http.RoundTripper
	limiter flowcontrol.RateLimiter
}

func (r rateLimited) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := r.limiter.Wait(req.Context()); err != nil {
		return nil, err
	}
	return r.next.RoundTrip(req)
}

// BenchmarkFiveHundredAlerts posts 500 drain alerts for one rolling pool (maxUnavailable 1) in one notification, on
// the real API server: the time to the first cordon, and to every alert decided (one acting, 499 waiting).
func BenchmarkFiveHundredAlerts(b *testing.B) {
	api := testenv.StartAPIServer(b)
	for i := range b.N {
		c := newCluster(b, api)
		pool := unique("fleet")
		var alerts []template.Alert
		for n := range 500 {
			name := fmt.Sprintf("%s-%03d", pool, n)
			c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
			alerts = append(alerts, alert(name, nodeview.Drain, false, startsAt))
		}
		r := benchReplica(b, api, poolPolicy(pool, ""))
		r.waitLeading()
		watch, err := api.Client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{LabelSelector: "pool=" + pool})
		if err != nil {
			b.Fatal(err)
		}
		body := payload(b, alerts...)
		start := time.Now()
		if code := send(context.Background(), r.url, body); code != http.StatusOK {
			b.Fatalf("webhook answered %d", code)
		}
		for ev := range watch.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && n.Spec.Unschedulable {
				break
			}
		}
		watch.Stop()
		firstCordon := time.Since(start)
		r.waitMetric("every alert decided", "gke_disruption_actions_waiting", map[string]string{"action": "drain", "pool": pool, "reason": "pool_budget"}, 499)
		decided := time.Since(start)
		if i == 0 {
			b.ReportMetric(firstCordon.Seconds(), "s-to-first-cordon")
			b.ReportMetric(decided.Seconds(), "s-to-all-decided")
		}
		r.stop()
	}
}

// BenchmarkParallelPool64 drains a parallel pool of 64 nodes with 4 pods each on one alert, on the real API server:
// the time from the alert to every node cordoned, and to every node drained.
func BenchmarkParallelPool64(b *testing.B) {
	api := testenv.StartAPIServer(b)
	startKubelet(b, api.Client)
	for i := range b.N {
		c := newCluster(b, api)
		pool := unique("par")
		ns := api.Namespace("par")
		var names []string
		for n := range 64 {
			name := fmt.Sprintf("%s-%02d", pool, n)
			c.node(name, map[string]string{"pool": pool}, withScheduledMaintenance)
			for p := range 4 {
				c.pod(ns, fmt.Sprintf("%s-pod-%d", name, p), name, grace(1))
			}
			names = append(names, name)
		}
		r := benchReplica(b, api, parallelPolicy(pool, 1000))
		r.waitLeading()
		start := time.Now()
		mustAccept(b, r, alert(names[0], nodeview.Drain, false, startsAt))
		all := func(step string, ok func(*corev1.Node) bool) time.Duration {
			testenv.Eventually(b, 5*time.Minute, step, func() error {
				list, err := api.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "pool=" + pool})
				if err != nil {
					return err
				}
				for i := range list.Items {
					if !ok(&list.Items[i]) {
						return fmt.Errorf("%s not yet", list.Items[i].Name)
					}
				}
				return nil
			})
			return time.Since(start)
		}
		cordoned := all("all cordoned", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
		drained := all("all drained", func(n *corev1.Node) bool { return nodeview.Of(n).Record.Phase == nodeview.Done })
		if i == 0 {
			b.ReportMetric(cordoned.Seconds(), "s-to-all-cordoned")
			b.ReportMetric(drained.Seconds(), "s-to-all-drained")
		}
		r.stop()
	}
}
