package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	mdsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestCommandsServeOpenMetrics: every command that serves metrics answers a scrape asking for OpenMetrics with
// OpenMetrics, counters carrying their created timestamp (the interruption counters' the UTC day's start), and a
// real Prometheus limited to OpenMetrics scrapes all three without error.
func TestCommandsServeOpenMetrics(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ns := api.Namespace("openmetrics")
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_NAME", "actions-0")
	readyNodeWithMaintenance(t, api, "gke-l4-0")

	mon := monsim.New(monsim.Options{})
	monAddr, err := mon.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	if err := mon.Record(monsim.Interruption{Project: "p1", Location: "us-central1", Cluster: "train", Node: "gke-l4-0",
		NodePool: "l4-serve", Type: "MaintenanceEvent", Reason: "HostError", Count: 1, Time: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	md := mdsim.New(mdsim.Instance{Name: "gke-l4-0", ID: "1", Zone: "us-central1-a", ProjectID: "p1", NumericProjectID: "1"})
	mdServer := httptest.NewServer(md)
	t.Cleanup(func() { md.Close(); mdServer.Close() })
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(mdServer.URL, "http://"))

	cluster, node, actions := freeAddress(t), freeAddress(t), freeAddress(t)
	startCommand(t, clusterCommand, "cluster", "--kubeconfig="+api.Kubeconfig, "--web.listen-address="+cluster,
		"--cloudmonitoring.project=p1", "--cloudmonitoring.endpoint="+monAddr, "--cloudmonitoring.insecure",
		"--cloudmonitoring.cluster=us-central1/train", "--cloudmonitoring.interval=200ms")
	startCommand(t, nodeCommand, "node", "--node.name=gke-l4-0", "--web.listen-address="+node)
	policy := writePolicy(t, "pools: [{name: serving, nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}}]\n")
	startCommand(t, actionsCommand, "actions", "--kubeconfig="+api.Kubeconfig, "--config.file="+policy,
		"--web.listen-address="+actions)

	// What Prometheus asks for with only OpenMetrics 1.0.0 among its scrape protocols.
	const accept = "application/openmetrics-text;version=1.0.0;escaping=underscores,*/*;q=0.1"
	interruptionsCreated := regexp.MustCompile(`(?m)^gke_node_interruptions_created\{[^}]*node="gke-l4-0"[^}]*\} (\S+)$`)
	for _, tc := range []struct {
		command, addr string
		created       string // a counter that must carry a _created sample
	}{
		{"cluster", cluster, "gke_node_interruptions_created"},
		{"node", node, "gke_disruption_metadata_requests_created"},
		{"actions", actions, "gke_disruption_webhook_requests_created"},
	} {
		testenv.Eventually(t, 60*time.Second, tc.command+" serving OpenMetrics with "+tc.created, func() error {
			req, _ := http.NewRequest(http.MethodGet, "http://"+tc.addr+"/metrics", nil)
			req.Header.Set("Accept", accept)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			body := string(b)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
				t.Fatalf("%s answers OpenMetrics with Content-Type %q", tc.command, ct)
			}
			if !strings.HasSuffix(body, "# EOF\n") {
				t.Fatalf("%s: OpenMetrics without # EOF at the end:\n%s", tc.command, body)
			}
			if !strings.Contains(body, tc.created) {
				return fmt.Errorf("no %s yet", tc.created)
			}
			if tc.command != "cluster" {
				return nil
			}
			m := interruptionsCreated.FindStringSubmatch(body)
			if m == nil {
				return fmt.Errorf("no created sample of the node's interruptions yet")
			}
			created, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatalf("created sample %q: %v", m[1], err)
			}
			// The day's start: a UTC midnight, today or (within the look-back after midnight) yesterday.
			day := time.Unix(int64(created), 0).UTC()
			if day != day.Truncate(24*time.Hour) || time.Since(day) > 48*time.Hour || time.Since(day) < 0 {
				t.Fatalf("gke_node_interruptions_created = %s (%s), want the start of the current UTC day", m[1], day)
			}
			return nil
		})
	}

	promURL := testenv.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  scrape_protocols: [OpenMetricsText1.0.0]
scrape_configs:
  - job_name: cluster
    static_configs: [{targets: ['%s']}]
  - job_name: node
    static_configs: [{targets: ['%s']}]
  - job_name: actions
    static_configs: [{targets: ['%s']}]
`, cluster, node, actions))
	client, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(client)
	testenv.Eventually(t, 60*time.Second, "Prometheus scraping every command over OpenMetrics", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		targets, err := prom.Targets(ctx)
		if err != nil {
			return err
		}
		if len(targets.Active) != 3 {
			return fmt.Errorf("%d active targets", len(targets.Active))
		}
		for _, target := range targets.Active {
			if target.Health != promv1.HealthGood {
				return fmt.Errorf("target %s: %s %s", target.ScrapeURL, target.Health, target.LastError)
			}
		}
		v, _, _, err := prom.Query(ctx, `count by (job) ({__name__=~"gke_disruption_collector_success|gke_disruption_actions_leader|gke_node_interruptions_total"})`, time.Now())
		if err != nil {
			return err
		}
		if jobs := v.(model.Vector); len(jobs) != 3 {
			return fmt.Errorf("series of %d jobs: %v", len(jobs), jobs)
		}
		return nil
	})
}
