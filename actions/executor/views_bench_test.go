package executor

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// BenchmarkCachedViews is what every decision pays to read the node cache, at 10,000 GPU nodes.
func BenchmarkCachedViews(b *testing.B) {
	// The cache is filled by hand: the client is never used.
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(slog.New(slog.DiscardHandler), Options{Client: client, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		obj, err := watchNode(benchGPUNode(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := e.informer.GetStore().Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := len(e.cachedViews()); got != 10000 {
			b.Fatalf("%d views", got)
		}
	}
}

// benchGPUNode is a GKE a3-highgpu-8g node's labels, taints and conditions; one in fifty has maintenance announced.
func benchGPUNode(i int) *corev1.Node {
	pool := fmt.Sprintf("a3-pool-%02d", i/1000)
	name := fmt.Sprintf("gke-prod-%s-%04d", pool, i)
	labels := map[string]string{
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "a3-highgpu-8g",
		"beta.kubernetes.io/os": "linux", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
		"cloud.google.com/gke-accelerator-count": "8", "cloud.google.com/gke-boot-disk": "pd-balanced",
		"cloud.google.com/gke-container-runtime": "containerd", "cloud.google.com/gke-gpu": "true",
		"cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-os-distribution": "cos",
		"cloud.google.com/machine-family": "a3", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "a3-highgpu-8g",
		"topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-a",
	}
	annotations := map[string]string{"node.alpha.kubernetes.io/ttl": "0", "container.googleapis.com/instance_id": strconv.Itoa(i)}
	if i%50 == 0 {
		labels[gke.LabelScheduledMaintenanceTime] = strconv.Itoa(1764547200 + i)
		annotations[gke.AnnotationUpcomingMaintenance] = `{"type":"SCHEDULED","can_reschedule":"true","window_start_time":"2025-12-01T00:00:00Z","window_end_time":"2025-12-01T04:00:00Z","maintenance_status":"PENDING"}`
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), ResourceVersion: strconv.Itoa(i + 1), Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}
