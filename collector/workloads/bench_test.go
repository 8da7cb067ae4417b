package workloads

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var podCounts = []int{100000, 500000}

// fleetNodes are GPU nodes with eight pods each, one in a hundred with maintenance scheduled; ordinary nodes when
// !accelerated.
func fleetNodes(s *state, nodes int, accelerated bool) {
	list := make([]nodeInfo, nodes)
	for i := range list {
		n := &list[i]
		n.name = nodeName(i)
		n.Accelerated = accelerated
		if accelerated && i%100 == 0 {
			n.maintenance = 1764547200 + int64(i)
		}
	}
	s.replaceNodes(list)
}

func nodeName(i int) string {
	return fmt.Sprintf("gke-cluster-a3-train-%08x-%04d", i*2654435761, i%10000)
}

// fullPod is pod i of workload w as the API server sends it: a Job's pod of a JobSet, with the labels,
// tolerations, resources and status such pods carry.
func fullPod(i, w int, node string) *corev1.Pod {
	job := fmt.Sprintf("train-%04d-slice-0", w)
	yes := true
	grace := int64(30)
	labels := map[string]string{
		"batch.kubernetes.io/controller-uid": fmt.Sprintf("6a1f%04d-0000-4000-8000-000000000000", w),
		"batch.kubernetes.io/job-name":       job, "job-name": job,
		"controller-uid":                           fmt.Sprintf("6a1f%04d-0000-4000-8000-000000000000", w),
		"jobset.sigs.k8s.io/jobset-name":           fmt.Sprintf("train-%04d", w),
		"jobset.sigs.k8s.io/replicatedjob-name":    "slice",
		"batch.kubernetes.io/job-completion-index": strconv.Itoa(i),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d-%05x", job, i%1000, i), Namespace: "training", Labels: labels,
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000000", i)), ResourceVersion: strconv.Itoa(1000 + i),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job,
				UID: types.UID(fmt.Sprintf("6a1f%04d-0000-4000-8000-000000000000", w)), Controller: &yes}},
			Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": strconv.Itoa(i)},
		},
		Spec: corev1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: &grace, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "us-docker.pkg.dev/project/train/trainer:v1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.64.0.1", HostIP: "10.128.0.2"},
	}
}

// jobSetOwner: the Jobs are known and have a JobSet as controller.
func jobSetOwner(_, _, kind, name string, _ types.UID) (*ownerInput, bool) {
	return &ownerInput{apiVersion: "jobset.x-k8s.io/v1alpha2", kind: "JobSet", name: name[:len("train-0000")], uid: "u"}, true
}

// loaded is the collector's state with pods over workloads, on GPU nodes (8 pods a node) or ordinary ones.
func loaded(b *testing.B, pods, workloads int, interesting bool) *state {
	b.Helper()
	s := newState(testConfig, jobSetOwner)
	nodes := pods / 8
	fleetNodes(s, nodes, interesting)
	for i := range pods {
		in, keep := podFrom(fullPod(i, i%workloads, nodeName(i%nodes)))
		s.setPod(in, keep)
	}
	return s
}

// BenchmarkRetainedHeap is the heap the collector keeps per pod after GC, for pods on GPU nodes and pods on
// ordinary nodes (which it forgets).
func BenchmarkRetainedHeap(b *testing.B) {
	for _, interesting := range []bool{true, false} {
		for _, n := range podCounts {
			b.Run(fmt.Sprintf("interesting=%v/pods=%d", interesting, n), func(b *testing.B) {
				var perPod float64
				for b.Loop() {
					before := testenv.HeapInUse()
					empty := newState(testConfig, jobSetOwner)
					fleetNodes(empty, n/8, interesting)
					withNodes := testenv.HeapInUse()
					runtime.KeepAlive(empty)
					s := loaded(b, n, n/64, interesting)
					after := testenv.HeapInUse()
					runtime.KeepAlive(s)
					perPod = float64(int64(after-before)-int64(withNodes-before)) / float64(n)
				}
				b.ReportMetric(perPod, "retained-B/pod")
			})
		}
	}
}

// BenchmarkScrape is the collector's part of a scrape, for 1,000 workloads whatever their pods: a copy.
func BenchmarkScrape(b *testing.B) {
	for _, n := range podCounts {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			s := loaded(b, n, 1000, true)
			testenv.BenchmarkScrape(b, s)
		})
	}
}

// BenchmarkNodeGainsMaintenance is the watch-time cost of a node's maintenance changing: its workloads'
// next-maintenance series rendered again, among n pods.
func BenchmarkNodeGainsMaintenance(b *testing.B) {
	for _, n := range podCounts {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			s := loaded(b, n, n/64, true)
			node := nodeInfo{name: nodeName(1), Node: s.nodes[nodeName(1)].Node}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				node.maintenance = 1764547200 + int64(i%2)*3600
				s.setNode(node)
			}
		})
	}
}

// BenchmarkPodUpdate is the watch-time cost of a pod's status changing: nothing the series need changes.
func BenchmarkPodUpdate(b *testing.B) {
	s := loaded(b, 100000, 1000, true)
	pod := fullPod(7, 7, nodeName(7))
	b.ReportAllocs()
	for b.Loop() {
		in, keep := podFrom(pod)
		s.setPod(in, keep)
	}
}
