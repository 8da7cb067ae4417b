package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	mdsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestClusterReadsTheGKEAPI: the cluster command reads the cluster --gke.cluster names, else its own from the
// metadata server, and serves its node pools' series; not on GKE, the collector is inactive, fails nothing and
// needs no Google credentials.
func TestClusterReadsTheGKEAPI(t *testing.T) {
	sim := gkesim.New()
	simAddr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	for _, c := range []struct{ location, name, pool string }{{"us-central1", "train", "a3-train"}, {"europe-west4", "serve", "l4-serve"}} {
		sim.SetCluster("p1", c.location, &containerpb.Cluster{Name: c.name, CurrentMasterVersion: "1.33.5-gke.1080000",
			NodePools: []*containerpb.NodePool{{Name: c.pool, Version: "1.33.5-gke.1080000", Status: containerpb.NodePool_RUNNING}}})
	}
	own := &mdsim.Instance{Name: "n", ID: "1", Zone: "us-central1-a", ProjectID: "p1", NumericProjectID: "1",
		ClusterName: "train", ClusterLocation: "us-central1"}
	for _, tc := range []struct {
		name     string
		instance *mdsim.Instance
		args     []string
		want     []string
		unwanted []string
	}{
		{"own cluster from the metadata server", own, nil,
			[]string{`gke_node_pool_version_info{node_pool="a3-train",version="1.33.5-gke.1080000"} 1`,
				`gke_disruption_collector_success{collector="gke"} 1`},
			[]string{`node_pool="l4-serve"`}},
		{"--gke.cluster", own, []string{"--gke.cluster=projects/p1/locations/europe-west4/clusters/serve"},
			[]string{`gke_node_pool_status{node_pool="l4-serve",status="running"} 1`, `gke_disruption_collector_success{collector="gke"} 1`},
			[]string{`node_pool="a3-train"`}},
		{"not on GKE", nil, nil,
			[]string{`gke_disruption_collector_success{collector="gke"} 1`},
			[]string{`gke_node_pool_version_info`, `gke_disruption_gke_api_requests_total`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.instance != nil {
				md := mdsim.New(*tc.instance)
				ts := httptest.NewServer(md)
				t.Cleanup(func() { md.Close(); ts.Close() })
				t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
			} else {
				t.Setenv("GCE_METADATA_HOST", freeAddress(t)) // nothing listens
			}
			// Not on GKE the exporter needs no Google credentials: none are found here.
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
			args := []string{"--gke.endpoint=" + simAddr, "--gke.insecure"}
			if tc.instance == nil {
				args = nil
			}
			addr := freeAddress(t)
			startCommand(t, clusterCommand, append(append([]string{"cluster", "--no-collector.nodes", "--no-collector.workloads",
				"--no-collector.cloudmonitoring", "--web.listen-address=" + addr, "--gke.interval=200ms"}, args...), tc.args...)...)
			testenv.Eventually(t, 30*time.Second, "the GKE API read", func() error {
				_, body, err := get("http://" + addr + "/metrics")
				if err != nil {
					return err
				}
				for _, want := range tc.want {
					if !strings.Contains(body, want) {
						return fmt.Errorf("no %s", want)
					}
				}
				for _, unwanted := range tc.unwanted {
					if strings.Contains(body, unwanted) {
						return fmt.Errorf("%s served:\n%s", unwanted, body)
					}
				}
				return nil
			})
		})
	}
}

// TestClusterRejectsMalformedGKECluster: a --gke.cluster that is no cluster's resource name, or plaintext without
// an endpoint, stops the command at start, saying what it wants.
func TestClusterRejectsMalformedGKECluster(t *testing.T) {
	run := func(args ...string) error {
		app := kingpin.New(name, "")
		run := clusterCommand(app)
		if _, err := app.Parse(append([]string{"cluster", "--no-collector.nodes", "--no-collector.workloads",
			"--web.listen-address=" + freeAddress(t)}, args...)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return run(ctx, promslog.NewNopLogger())
	}
	for _, bad := range []string{"train", "us-central1/train", "projects/p1/zones/us-central1/clusters/train"} {
		if err := run("--gke.cluster=" + bad); err == nil || !strings.Contains(err.Error(), "--gke.cluster") ||
			!strings.Contains(err.Error(), "projects/PROJECT/locations/LOCATION/clusters/CLUSTER") {
			t.Errorf("--gke.cluster=%s: %v", bad, err)
		}
	}
	if err := run("--gke.insecure"); err == nil || !strings.Contains(err.Error(), "--gke.endpoint") {
		t.Errorf("--gke.insecure without an endpoint: %v", err)
	}
}
