package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// BenchmarkClusterSync is the cluster exporter end to end: a real kube-apiserver holding N generated GKE GPU nodes,
// the built binary started after them. It reports how long until /-/ready, how many nodes the first scrape after
// ready holds (ready must mean complete), how long until the scrape holds all N, a scrape's time and size (median
// of 7, identity and gzip), and the process's resident memory after the sync and after 20 scrapes. Then
// kube-state-metrics (nodes only) runs against the same API server and the same nodes, and the scrape times are
// reported as ratios, ours over its. Slow (minutes at 65,000 on two cores): it runs only when -bench selects it.
func BenchmarkClusterSync(b *testing.B) {
	binary := filepath.Join(b.TempDir(), name)
	build := exec.Command("go", "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", name, err, out)
	}
	ksm := testenv.Binary(b, "kube-state-metrics")
	for _, n := range []int{10000, 65000} {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			api := testenv.StartAPIServer(b)
			begin := time.Now()
			createGPUNodes(b, api.Config, n)
			b.Logf("created %d nodes in %s", n, time.Since(begin).Round(time.Second))
			b.ResetTimer()
			for range b.N {
				m := measureClusterSync(b, binary, api.Kubeconfig, n)
				k := measureKSM(b, ksm, api.Kubeconfig, n)
				b.ReportMetric(k.scrape.Seconds(), "ksm-scrape-s")
				b.ReportMetric(k.gzipScrape.Seconds(), "ksm-gzip-scrape-s")
				b.ReportMetric(float64(k.scrapeBytes), "ksm-bytes/scrape")
				b.ReportMetric(float64(k.rss)/1e6, "ksm-rss-MB")
				b.ReportMetric(m.scrape.Seconds()/k.scrape.Seconds(), "scrape/ksm")
				b.ReportMetric(m.gzipScrape.Seconds()/k.gzipScrape.Seconds(), "gzip-scrape/ksm")
				b.ReportMetric(m.ready.Seconds(), "ready-s")
				b.ReportMetric(m.readyCPU.Seconds(), "cpu-until-ready-s")
				b.ReportMetric(float64(m.nodesAtReady), "nodes-at-ready")
				b.ReportMetric(m.complete.Seconds(), "complete-s")
				b.ReportMetric(m.scrape.Seconds(), "scrape-s")
				b.ReportMetric(m.gzipScrape.Seconds(), "gzip-scrape-s")
				b.ReportMetric(float64(m.scrapeBytes), "bytes/scrape")
				b.ReportMetric(float64(m.heapInuse)/1e6, "heap-inuse-MB")
				b.ReportMetric(float64(m.rss)/1e6, "rss-MB")
				b.ReportMetric(float64(m.peakRSS)/1e6, "peak-rss-MB")
				b.ReportMetric(float64(m.scrapedRSS)/1e6, "rss-after-scrapes-MB")
			}
		})
	}
}

type syncMeasurement struct {
	ready, complete, scrape, gzipScrape time.Duration
	readyCPU                            time.Duration
	nodesAtReady                        int
	scrapeBytes                         int
	rss, peakRSS, scrapedRSS, heapInuse int64
}

func measureClusterSync(b *testing.B, binary, kubeconfig string, n int) syncMeasurement {
	b.Helper()
	addr := benchAddress(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "cluster", "--kubeconfig="+kubeconfig, "--web.listen-address="+addr,
		"--no-collector.cloudmonitoring", "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	base := "http://" + addr

	var m syncMeasurement
	for {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("not ready after 10 minutes; log:\n%s", logs.String())
		}
		if code, _, err := get(base + "/-/ready"); err == nil && code == http.StatusOK {
			m.ready = time.Since(start)
			m.readyCPU = processCPU(b, cmd.Process.Pid)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.nodesAtReady = countNodes(b, base)
	for got := m.nodesAtReady; got < n; got = countNodes(b, base) {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("scrape holds %d of %d nodes after 10 minutes", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.complete = time.Since(start)

	m.rss, m.peakRSS = processRSS(b, cmd.Process.Pid)
	var body []byte
	m.scrape, m.gzipScrape, m.scrapeBytes, body = scrapeTimes(b, base)
	m.heapInuse = int64(sampleValue(body, "go_memstats_heap_inuse_bytes"))
	m.scrapedRSS, _ = processRSS(b, cmd.Process.Pid)
	return m
}

// scrapeTimes scrapes a synced exporter 20 times, alternating identity and gzip as Prometheus asks for them, and
// returns the median time of the first 7 of each, the identity size and the last identity scrape's head.
func scrapeTimes(b *testing.B, base string) (identity, gzipped time.Duration, size int, head []byte) {
	b.Helper()
	const measured, scrapes = 7, 20
	var times [2][]time.Duration
	for i := range scrapes / 2 {
		for e, encoding := range []string{"identity", "gzip"} {
			begin := time.Now()
			n, h := scrape(b, base, encoding)
			if i < measured {
				times[e] = append(times[e], time.Since(begin))
			}
			if e == 0 {
				size, head = n, h
			}
		}
	}
	return median(times[0]), median(times[1]), size, head
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// measureKSM starts kube-state-metrics on the nodes alone, waits until it serves every node, and measures its
// scrape as scrapeTimes does ours, and its resident memory after the scrapes.
func measureKSM(b *testing.B, ksm, kubeconfig string, n int) syncMeasurement {
	b.Helper()
	host, port, _ := net.SplitHostPort(benchAddress(b))
	_, telemetryPort, _ := net.SplitHostPort(benchAddress(b))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, ksm, "--kubeconfig="+kubeconfig, "--resources=nodes", "--host="+host, "--port="+port,
		"--telemetry-host="+host, "--telemetry-port="+telemetryPort)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	base := "http://" + net.JoinHostPort(host, port)
	for countSeries(base, "kube_node_info{") < n {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("kube-state-metrics does not serve %d nodes after 10 minutes; log:\n%s", n, logs.String())
		}
		time.Sleep(time.Second)
	}
	var m syncMeasurement
	m.scrape, m.gzipScrape, m.scrapeBytes, _ = scrapeTimes(b, base)
	m.rss, _ = processRSS(b, cmd.Process.Pid)
	return m
}

func benchAddress(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// sampleValue is the value of an unlabelled sample in an exposition, 0 when missing.
func sampleValue(exposition []byte, name string) float64 {
	i := bytes.Index(exposition, []byte("\n"+name+" "))
	if i < 0 {
		return 0
	}
	line := exposition[i+len(name)+2:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	v, _ := strconv.ParseFloat(string(line), 64)
	return v
}

func countNodes(b *testing.B, base string) int {
	b.Helper()
	count := countSeries(base, "gke_node_info{")
	if count < 0 {
		b.Fatal("cannot scrape the exporter")
	}
	return count
}

// countSeries counts the sample lines starting with prefix in a scrape of base, -1 when it cannot scrape.
func countSeries(base, prefix string) int {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	count := 0
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		if strings.HasPrefix(scanner.Text(), prefix) {
			count++
		}
	}
	if scanner.Err() != nil {
		return -1
	}
	return count
}

// scrape reads /metrics as Prometheus does, asking for encoding (gzip or identity); it returns the size as sent and
// the first 64 KiB of the body, where the self-monitoring series are.
func scrape(b *testing.B, base, encoding string) (int, []byte) {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", encoding) // set, so the transport neither asks for gzip nor unzips
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(resp.Body, head)
	rest, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return n + int(rest), head[:n]
}

// processCPU reads the CPU time, user and system, a process has used (/proc/PID/stat, in Linux's fixed 100 ticks
// a second).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces: state is the first, utime
	// and stime the 12th and 13th.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// processRSS reads the resident set size and its peak (VmRSS, VmHWM) of a process.
func processRSS(b *testing.B, pid int) (rss, peak int64) {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// createGPUNodes creates n GKE a3 GPU nodes through the API, 64 at a time, each as large as a real one: GKE's
// labels, annotations, taint, capacity, conditions, addresses and cached images.
func createGPUNodes(b *testing.B, cfg *rest.Config, n int) {
	b.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const workers = 64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), gpuNode(i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case err := <-errs:
				b.Fatalf("creating node %d: %v", i, err)
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// gpuNode is a GKE a3-highgpu-8g node as the API serves it; one in fifty has maintenance scheduled.
func gpuNode(i int) *v1.Node {
	pool := fmt.Sprintf("a3-pool-%02d", i/1000)
	zone := []string{"us-central1-a", "us-central1-b", "us-central1-c"}[i%3]
	name := fmt.Sprintf("gke-prod-%s-%08x-%04d", pool, uint32(i)*2654435761, i%10000)
	labels := map[string]string{
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "a3-highgpu-8g",
		"beta.kubernetes.io/os": "linux", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
		"cloud.google.com/gke-accelerator-count": "8", "cloud.google.com/gke-boot-disk": "pd-balanced",
		"cloud.google.com/gke-container-runtime": "containerd", "cloud.google.com/gke-cpu-scaling-level": "208",
		"cloud.google.com/gke-gpu": "true", "cloud.google.com/gke-gpu-driver-version": "latest",
		"cloud.google.com/gke-logging-variant": "DEFAULT", "cloud.google.com/gke-max-pods-per-node": "110",
		"cloud.google.com/gke-memory-gb-scaling-level": "1872", "cloud.google.com/gke-nodepool": pool,
		"cloud.google.com/gke-os-distribution": "cos", "cloud.google.com/gke-provisioning": "standard",
		"cloud.google.com/gke-stack-type": "IPV4", "cloud.google.com/machine-family": "a3",
		"cloud.google.com/private-node": "true", "failure-domain.beta.kubernetes.io/region": "us-central1",
		"failure-domain.beta.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "a3-highgpu-8g",
		"node.kubernetes.io/masq-agent-ds-ready": "true", "topology.gke.io/zone": zone,
		"topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": zone,
	}
	if i%50 == 0 {
		labels["cloud.google.com/scheduled-maintenance-time"] = strconv.Itoa(1764547200 + i)
	}
	var images []v1.ContainerImage
	for j := range 20 {
		images = append(images, v1.ContainerImage{
			Names: []string{
				fmt.Sprintf("gke.gcr.io/component-%02d@sha256:%064x", j, j*7919+1),
				fmt.Sprintf("gke.gcr.io/component-%02d:v1.%d.0-gke.%d", j, j, 100+j),
			},
			SizeBytes: int64(20+j) << 20,
		})
	}
	conditions := []v1.NodeCondition{}
	for _, c := range []struct{ kind, reason, message string }{
		{"FrequentUnregisterNetDevice", "NoFrequentUnregisterNetDevice", "node is functioning properly"},
		{"FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"},
		{"FrequentDockerRestart", "NoFrequentDockerRestart", "docker is functioning properly"},
		{"FrequentContainerdRestart", "NoFrequentContainerdRestart", "containerd is functioning properly"},
		{"KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"},
		{"ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"},
		{"MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		{"DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		{"PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
	} {
		conditions = append(conditions, v1.NodeCondition{Type: v1.NodeConditionType(c.kind), Status: v1.ConditionFalse,
			Reason: c.reason, Message: c.message, LastHeartbeatTime: metav1.Unix(1764500000, 0), LastTransitionTime: metav1.Unix(1764400000, 0)})
	}
	conditions = append(conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Unix(1764500000, 0), LastTransitionTime: metav1.Unix(1764400000, 0)})
	resources := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("208"), v1.ResourceMemory: resource.MustParse("1872Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("6Ti"), v1.ResourcePods: resource.MustParse("110"),
		"nvidia.com/gpu": resource.MustParse("8"), "hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			"container.googleapis.com/instance_id":                   strconv.Itoa(4000000000000000000 + i),
			"csi.volume.kubernetes.io/nodeid":                        `{"pd.csi.storage.gke.io":"projects/prod/zones/` + zone + `/instances/` + name + `"}`,
			"node.alpha.kubernetes.io/ttl":                           "0",
			"node.gke.io/last-applied-node-labels":                   "cloud.google.com/gke-accelerator=nvidia-h100-80gb,cloud.google.com/gke-nodepool=" + pool,
			"node.gke.io/last-applied-node-taints":                   "nvidia.com/gpu=present:NoSchedule",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		}},
		Spec: v1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256), ProviderID: "gce://prod/" + zone + "/" + name,
			Taints: []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Capacity: resources, Allocatable: resources, Conditions: conditions, Images: images,
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.128.%d.%d", i/256%256, i%256)},
				{Type: v1.NodeHostName, Address: name}},
			NodeInfo: v1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i*31),
				BootID: fmt.Sprintf("%032x", i*17), KernelVersion: "6.6.56+", OSImage: "Container-Optimized OS from Google",
				ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.33.5-gke.1080000",
				OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}
