package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mdsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	monsim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// startCommand parses args into a fresh app and runs the selected command until the test ends.
func startCommand(t *testing.T, register func(*kingpin.Application) runFunc, args ...string) {
	t.Helper()
	app := kingpin.New(name, "")
	run := register(app)
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, promslog.NewNopLogger()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("command exited with %v", err)
		}
	})
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestClusterReadyOnlyAfterNodeListSynced(t *testing.T) {
	api := testenv.StartAPIServer(t)
	if _, err := api.Client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gke-a3-0", Labels: map[string]string{"cloud.google.com/gke-nodepool": "a3"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api.StopAPIServer()

	addr := freeAddress(t)
	startCommand(t, clusterCommand, "cluster", "--kubeconfig="+api.Kubeconfig, "--web.listen-address="+addr)
	base := "http://" + addr
	testenv.Eventually(t, 10*time.Second, "health endpoint up", func() error {
		code, _, err := get(base + "/-/healthy")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("code %d, err %v", code, err)
		}
		return nil
	})
	if code, _, _ := get(base + "/-/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("ready before the node list synced: %d", code)
	}
	if _, body, _ := get(base + "/metrics"); !strings.Contains(body, `gke_disruption_collector_success{collector="nodes"} 0`) {
		t.Errorf("unsynced collector not reported as failing:\n%s", body)
	}

	api.StartAgain()
	testenv.Eventually(t, 60*time.Second, "ready after the API server came back", func() error {
		if code, _, err := get(base + "/-/ready"); code != http.StatusOK {
			return fmt.Errorf("code %d, err %v", code, err)
		}
		return nil
	})
	_, body, err := get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`node="gke-a3-0"`, `gke_disruption_collector_success{collector="nodes"} 1`,
		`gke_disruption_collector_success{collector="workloads"} 1`, "gke_disruption_exporter_build_info"} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in /metrics", want)
		}
	}
	if _, landing, _ := get(base + "/"); !strings.Contains(landing, "/metrics") {
		t.Errorf("landing page does not link the metrics:\n%s", landing)
	}
}

// TestClusterListsItsOwnClusterByDefault: without --cloudmonitoring.cluster the exporter reads its cluster from the
// metadata server and lists only that one's interruptions, also when the metadata server fails or is slow at first
// (meanwhile it lists nothing and says so); where there is no metadata server, every cluster. A location/name flag
// keeps a same-named cluster elsewhere out.
func TestClusterListsItsOwnClusterByDefault(t *testing.T) {
	mon := monsim.New(monsim.Options{})
	monAddr, err := mon.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	for _, c := range []struct{ location, cluster string }{{"us-central1", "train"}, {"us-central1", "serve"}, {"europe-west4", "train"}} {
		if err := mon.Record(monsim.Interruption{Project: "p1", Location: c.location, Cluster: c.cluster, NodePool: "a3",
			Type: "T", Reason: "R", Count: 1, Time: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	series := func(location, cluster string) string {
		return fmt.Sprintf(`cluster_location=%q,cluster_name=%q,cluster_project_id="p1"`, location, cluster)
	}
	own := &mdsim.Instance{Name: "n", ID: "1", Zone: "us-central1-a", ProjectID: "p1", NumericProjectID: "1",
		ClusterName: "train", ClusterLocation: "us-central1"}
	for _, tc := range []struct {
		name     string
		instance *mdsim.Instance
		fault    func(md *mdsim.Server)
		args     []string
		want     []string
		unwanted []string
		// forbidding: without an instance, something at the metadata address answers 403 to every request (a
		// sandbox's proxy): not a metadata server that will ever answer.
		forbidding bool
	}{
		{"own cluster", own, nil, nil,
			[]string{series("us-central1", "train"), `gke_disruption_cloudmonitoring_cluster_info{cluster_location="us-central1",cluster_name="train",source="metadata"} 1`},
			[]string{series("us-central1", "serve"), series("europe-west4", "train")}, false},
		{"metadata server failing at start", own, func(md *mdsim.Server) { md.Fail(mdsim.KeyClusterName, http.StatusServiceUnavailable, 3) }, nil,
			[]string{series("us-central1", "train")}, []string{series("us-central1", "serve"), series("europe-west4", "train")}, false},
		{"metadata server slow at start", own, func(md *mdsim.Server) {
			md.Delay(mdsim.KeyClusterName, 4*time.Second)
			time.AfterFunc(5*time.Second, func() { md.Delay(mdsim.KeyClusterName, 0) })
		}, nil,
			[]string{series("us-central1", "train")}, []string{series("us-central1", "serve"), series("europe-west4", "train")}, false},
		{"no metadata server", nil, nil, nil,
			[]string{series("us-central1", "train"), series("us-central1", "serve"), series("europe-west4", "train"),
				`gke_disruption_cloudmonitoring_cluster_info{cluster_location="",cluster_name="",source="all"} 1`}, nil, false},
		{name: "something else forbids at the metadata address", want: []string{series("us-central1", "train"), series("us-central1", "serve"),
			series("europe-west4", "train"), `gke_disruption_cloudmonitoring_cluster_info{cluster_location="",cluster_name="",source="all"} 1`},
			forbidding: true},
		{"location/name flag", own, nil, []string{"--cloudmonitoring.cluster=europe-west4/train"},
			[]string{series("europe-west4", "train"), `gke_disruption_cloudmonitoring_cluster_info{cluster_location="europe-west4",cluster_name="train",source="flag"} 1`},
			[]string{series("us-central1", "serve"), series("us-central1", "train")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.instance != nil {
				md := mdsim.New(*tc.instance)
				ts := httptest.NewServer(md)
				t.Cleanup(func() { md.Close(); ts.Close() })
				t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
				if tc.fault != nil {
					tc.fault(md)
				}
			} else if tc.forbidding {
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					http.Error(w, "resolve_deny: denied destination", http.StatusForbidden)
				}))
				t.Cleanup(ts.Close)
				t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
			} else {
				t.Setenv("GCE_METADATA_HOST", freeAddress(t)) // nothing listens
			}
			addr := freeAddress(t)
			// The GKE API collector would read the cluster from Google's API: this test is about Cloud Monitoring.
			startCommand(t, clusterCommand, append([]string{"cluster", "--no-collector.nodes", "--no-collector.workloads", "--no-collector.gke", "--web.listen-address=" + addr,
				"--cloudmonitoring.project=p1", "--cloudmonitoring.endpoint=" + monAddr, "--cloudmonitoring.insecure",
				"--cloudmonitoring.interval=200ms"}, tc.args...)...)
			testenv.Eventually(t, 30*time.Second, "the interruptions listed", func() error {
				_, body, err := get("http://" + addr + "/metrics")
				if err != nil {
					return err
				}
				// A series of another cluster, once listed, is there for good: fail at once.
				for _, unwanted := range tc.unwanted {
					if strings.Contains(body, unwanted) {
						t.Fatalf("a series of %s, another cluster:\n%s", unwanted, body)
					}
				}
				for _, want := range tc.want {
					if !strings.Contains(body, want) {
						return fmt.Errorf("no %s", want)
					}
				}
				return nil
			})
		})
	}
}
