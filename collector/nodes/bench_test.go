package nodes

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/promslog"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

var fleetSizes = []int{1000, 10000, 65000}

// fullNode is a node as the API server sends it, with the status and labels a real GKE GPU node carries; one in a
// hundred is in some stage of maintenance, with a GPU fault.
func fullNode(i int) *v1.Node {
	name := fmt.Sprintf("gke-cluster-a3-train-%08x-%04d", i*2654435761, i%10000)
	labels := map[string]string{
		gke.LabelNodePool: "a3-train", gke.LabelZone: "us-central1-a", gke.LabelInstanceType: "a3-highgpu-8g",
		gke.LabelAccelerator: "nvidia-h100-80gb", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		"kubernetes.io/arch": "amd64", "cloud.google.com/gke-os-distribution": "cos",
		"cloud.google.com/gke-boot-disk": "pd-balanced", "cloud.google.com/machine-family": "a3",
		"topology.gke.io/zone": "us-central1-a", "node.kubernetes.io/instance-type-size": "8g",
	}
	if i%100 == 0 {
		labels[gke.LabelScheduledMaintenanceTime] = strconv.Itoa(1764547200 + i)
		labels[gke.LabelActiveNodeMaintenance] = "ONGOING"
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: strconv.Itoa(100000 + i),
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "container.googleapis.com/instance_id": strconv.Itoa(i)}},
		Spec: v1.NodeSpec{ProviderID: "gce://project/us-central1-a/" + name, PodCIDR: "10.0.0.0/24",
			Taints: []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("208"), v1.ResourceMemory: resource.MustParse("1872Gi"),
				gke.ResourceGPU: resource.MustParse("8")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("207"), v1.ResourceMemory: resource.MustParse("1800Gi"),
				gke.ResourceGPU: resource.MustParse("8")},
			NodeInfo: v1.NodeSystemInfo{BootID: fmt.Sprintf("%08x-4a1b-4c2d-8e3f-%012x", i, i)},
			Images:   []v1.ContainerImage{{Names: []string{"gke.gcr.io/nvidia-gpu-device-plugin@sha256:0123456789abcdef"}, SizeBytes: 1 << 28}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status"}},
		},
	}
	if i%100 == 0 {
		// A GPU fault of this boot, the GPU marked unhealthy.
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: gke.ConditionXidCriticalError,
			Status: v1.ConditionTrue, Reason: `{"79":true}`, Message: n.Status.NodeInfo.BootID,
			LastTransitionTime: metav1.Unix(1764547200, 0), LastHeartbeatTime: metav1.Unix(1764547260, 0)})
		n.Status.Allocatable[gke.ResourceGPU] = resource.MustParse("7")
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: gke.TaintImpendingTermination, Effect: v1.TaintEffectNoSchedule})
	}
	return n
}

// fleet is what the collector holds for n nodes: the informer's cache and the store, sharing the records.
func fleet(b *testing.B, n int) (cache.Indexer, *store) {
	b.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	s := newStore()
	for i := range n {
		obj, _ := Transform(fullNode(i))
		if err := indexer.Add(obj); err != nil {
			b.Fatal(err)
		}
		s.set(obj.(*record))
	}
	return indexer, s
}

// BenchmarkScrape is the node collector's part of a scrape: a copy of the rendered bytes.
func BenchmarkScrape(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			_, s := fleet(b, n)
			testenv.BenchmarkScrape(b, s)
		})
	}
}

// BenchmarkRetainedHeap measures the heap the collector keeps per node after GC: its record, cache and store.
func BenchmarkRetainedHeap(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			var perNode float64
			for b.Loop() {
				before := testenv.HeapInUse()
				indexer, s := fleet(b, n)
				after := testenv.HeapInUse()
				runtime.KeepAlive(indexer)
				runtime.KeepAlive(s)
				perNode = float64(after-before) / float64(n)
			}
			b.ReportMetric(perNode, "retained-B/node")
		})
	}
}

// BenchmarkApply is the watch-time cost of one node update: transform (render) and store.
func BenchmarkApply(b *testing.B) {
	node := fullNode(0)
	s := newStore()
	b.ReportAllocs()
	for b.Loop() {
		obj, _ := Transform(node)
		s.set(obj.(*record))
	}
}

// storeCollector serves a store as the collector does once synced.
type storeCollector struct{ *store }

func (storeCollector) Update(chan<- prometheus.Metric) error { return nil }

// BenchmarkServe is a whole scrape of the node series over loopback HTTP, as Prometheus makes it: the handler with
// the process's self-monitoring next to the rendered text, identity and gzip.
func BenchmarkServe(b *testing.B) {
	for _, n := range fleetSizes {
		_, s := fleet(b, n)
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		srv := httptest.NewServer(collector.NewSet(promslog.NewNopLogger(), reg, map[string]collector.Collector{"nodes": storeCollector{s}}))
		for _, encoding := range []string{"identity", "gzip"} {
			b.Run("nodes="+strconv.Itoa(n)+"/encoding="+encoding, func(b *testing.B) {
				var size int64
				cpu := testenv.ProcessCPU()
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
					req.Header.Set("Accept-Encoding", encoding)
					req.Header.Set("Accept", openMetricsAccept)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					size, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((testenv.ProcessCPU()-cpu).Nanoseconds())/1e6/float64(b.N), "cpu-ms/scrape")
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
		srv.Close()
	}
}

// openMetricsAccept is what Prometheus asks for by default when it does not ask for protobuf.
const openMetricsAccept = "application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
