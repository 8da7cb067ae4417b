package executor

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestNodeCacheFreshness: the node cache decisions read, and the pod cache of opportunistic maintenance, follow the
// collectors' freshness model. With the API server gone, the failed calls count as watch errors and, past the
// grace, Fresh fails; once nodes are read again it is fresh.
func TestNodeCacheFreshness(t *testing.T) {
	api := testenv.StartAPIServer(t)
	cfg, err := config.Parse([]byte("pools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}, opportunistic: {nodeIdleTime: 1m, window: 24h}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(slog.New(slog.DiscardHandler), Options{Config: cfg, Client: api.Client, Registerer: reg,
		Recorder: record.NewBroadcaster().NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})})
	if err != nil {
		t.Fatal(err)
	}
	clock := testenv.NewClock(time.Now())
	e.freshness.SetClock(clock.Now)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	testenv.Eventually(t, 30*time.Second, "the node list read", func() error {
		if !e.HasSynced() {
			return context.DeadlineExceeded
		}
		return nil
	})
	idle := e.opportunistic.startIdleTracking(ctx, cfg)
	testenv.Eventually(t, 30*time.Second, "the pod list read", func() error {
		if !idle.synced() {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err := e.Fresh(); err != nil {
		t.Fatalf("fresh after the first list: %v", err)
	}

	api.StopAPIServer()
	watchErrors := func(resource string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "gke_disruption_watch_errors_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == resource {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	testenv.Eventually(t, 60*time.Second, "the failing node and pod watches counted", func() error {
		if watchErrors("nodes") == 0 || watchErrors("pods") == 0 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err := e.Fresh(); err != nil {
		t.Fatalf("stale within the grace: %v", err)
	}
	clock.Add(kube.DefaultFailureGrace + time.Second)
	if err := e.Fresh(); err == nil {
		t.Fatal("fresh with the node watch failing for longer than the grace")
	}

	api.StartAgain()
	if _, err := api.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "fresh once nodes are read again", e.Fresh)
}
