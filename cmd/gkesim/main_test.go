package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

const runScenario = `
cluster: {project: p, location: europe-west4, name: try}
nodePools:
  - {name: gpu, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 2}
events:
  - {at: 0s, maintenance: {nodePool: gpu, nodes: [1], windowStartsIn: 1h, canReschedule: true}}
  - {at: 0s, gpuFault: {nodePool: gpu, nodes: [0], xid: 48}}
  - {at: 0s, autoUpgrade: {nodePool: gpu, version: 1.33.5-gke.1201000, startsIn: 1h}}
`

// TestRun plays a scenario file on an API server with the built command and reads a node's metadata server, the
// other node's dcgm-exporter and the GKE API simulator, where the driver announced an auto-upgrade, at the
// addresses it prints.
func TestRun(t *testing.T) {
	api := testenv.StartAPIServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gkesim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building gkesim: %v\n%s", err, out)
	}
	scenario := filepath.Join(dir, "try.yaml")
	if err := os.WriteFile(scenario, []byte(runScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--scenario="+scenario, "run", "--kubeconfig="+api.Kubeconfig,
		"--monitoring.listen-address=127.0.0.1:0", "--gke.listen-address=127.0.0.1:0", "--metadata.base-port=0", "--dcgm.base-port=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	hosts, dcgm := map[string]string{}, map[string]string{}
	var gkeAddr string
	lines := bufio.NewScanner(stdout)
	for (len(hosts) < 2 || len(dcgm) < 2) && lines.Scan() {
		f := strings.Fields(lines.Text())
		switch {
		case len(f) == 3 && strings.HasPrefix(f[0], "gke-try-gpu-"):
			hosts[f[0]] = f[2]
		case len(f) == 2 && strings.HasPrefix(f[0], "gke-try-gpu-"):
			dcgm[f[0]] = f[1]
		}
		if addr, ok := strings.CutPrefix(lines.Text(), "GKE API simulator: "); ok {
			gkeAddr, _, _ = strings.Cut(addr, " ")
		}
	}
	if len(hosts) != 2 || len(dcgm) != 2 {
		t.Fatalf("gkesim run did not print the two nodes' metadata hosts and dcgm-exporters: %v %v", hosts, dcgm)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	testenv.Eventually(t, 30*time.Second, "node 1 registered with its maintenance scheduled", func() error {
		nodes, err := api.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "cloud.google.com/scheduled-maintenance-time"})
		if err != nil {
			return err
		}
		if len(nodes.Items) != 1 {
			return fmt.Errorf("%d nodes with scheduled maintenance, want 1", len(nodes.Items))
		}
		host := hosts[nodes.Items[0].Name]
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/computeMetadata/v1/instance/upcoming-maintenance", nil)
		req.Header.Set("Metadata-Flavor", "Google")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"can_reschedule":"true"`) {
			return fmt.Errorf("metadata of %s at %s: %s", nodes.Items[0].Name, host, body)
		}
		return nil
	})
	sc, err := driver.Parse([]byte(runScenario))
	if err != nil {
		t.Fatal(err)
	}
	faulty := sc.NodeName("gpu", 0)
	testenv.Eventually(t, 30*time.Second, "the Xid 48 on node 0's dcgm-exporter", func() error {
		resp, err := http.Get(dcgm[faulty])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `err_code="48"`) {
			return fmt.Errorf("dcgm-exporter of %s at %s:\n%s", faulty, dcgm[faulty], body)
		}
		return nil
	})

	// The scenario's cluster and node pool, through the real GKE API client.
	client, err := container.NewClusterManagerClient(ctx, option.WithEndpoint(gkeAddr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cluster, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: "projects/p/locations/europe-west4/clusters/try"})
	if err != nil {
		t.Fatalf("GKE API simulator at %q: %v", gkeAddr, err)
	}
	if pools := cluster.GetNodePools(); len(pools) != 1 || pools[0].GetName() != "gpu" || pools[0].GetInitialNodeCount() != 2 {
		t.Errorf("node pools %v", pools)
	}
	pool := "projects/p/locations/europe-west4/clusters/try/nodePools/gpu"
	testenv.Eventually(t, 30*time.Second, "the auto-upgrade announced in the GKE API", func() error {
		info, err := client.FetchNodePoolUpgradeInfo(ctx, &containerpb.FetchNodePoolUpgradeInfoRequest{Name: pool})
		if err != nil {
			return err
		}
		if info.GetPatchTargetVersion() != "1.33.5-gke.1201000" {
			return fmt.Errorf("target version %q", info.GetPatchTargetVersion())
		}
		cluster, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: "projects/p/locations/europe-west4/clusters/try"})
		if err != nil {
			return err
		}
		if start := cluster.GetNodePools()[0].GetManagement().GetUpgradeOptions().GetAutoUpgradeStartTime(); start == "" {
			return errors.New("no auto-upgrade start time")
		}
		return nil
	})
}
