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

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
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
