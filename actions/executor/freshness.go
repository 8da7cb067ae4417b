package executor

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
)

// nodeInformer is the node cache every decision reads, on the collectors' freshness model: failed list and watch
// calls and broken watches count in gke_disruption_watch_errors_total{resource="nodes"}, and a failure no data has
// ended for longer than the grace makes Fresh fail.
func nodeInformer(factory informers.SharedInformerFactory, reg prometheus.Registerer) (cache.SharedIndexInformer, *kube.Freshness, error) {
	freshness, err := kube.NewFreshness(reg, kube.DefaultFailureGrace)
	if err != nil {
		return nil, nil, err
	}
	watched := freshness.Watch("nodes")
	inf := factory.InformerFor(&corev1.Node{}, func(client kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll, fields.Everything())
		// The informer's error handler sees what breaks a running watch: the wrapped calls need not see frames.
		return cache.NewSharedIndexInformer(watched.ListWatch(lw, false), &corev1.Node{}, 0, cache.Indexers{})
	})
	watched.Track(inf.LastSyncResourceVersion)
	if err := inf.SetWatchErrorHandlerWithContext(watched.ErrorHandler); err != nil {
		return nil, nil, fmt.Errorf("watching nodes: %w", err)
	}
	return inf, freshness, nil
}

// Fresh reports whether the node cache, and the pod cache of opportunistic maintenance once it runs, are current: nil
// unless a watch has been failing, without data arriving, for longer than kube.DefaultFailureGrace.
func (e *Executor) Fresh() error { return e.freshness.Err() }
