package gke

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	gkesim "github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/googleapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// t0 is a Monday noon.
var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

var train = Cluster{Project: "p1", Location: "us-central1", Name: "train"}

// harness is a simulator and a collector reading it through the real client over loopback, on a manual clock.
type harness struct {
	t     *testing.T
	clock *testenv.Clock
	sim   *gkesim.Server
	name  string // the cluster's resource name
	c     *Collector
	reg   *prometheus.Registry
	log   *testenv.SyncBuffer
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: testenv.NewClock(t0), sim: gkesim.New(), log: &testenv.SyncBuffer{}, reg: prometheus.NewRegistry()}
	addr, err := h.sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.sim.Close)
	client, err := NewClient(context.Background(), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if cfg.Cluster == (Cluster{}) {
		cfg.Cluster = train
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Minute
	}
	h.c, err = New(slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug})), client, cfg, h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.c.now = h.clock.Now
	h.name = gkesim.ClusterName(train.Project, train.Location, train.Name)
	return h
}

func ts(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

func strategy(s containerpb.NodePoolUpdateStrategy) *containerpb.NodePoolUpdateStrategy { return &s }

func ptr(s string) *string { return &s }

// fleet is a training cluster in the middle of an upgrade: a GPU pool being surge-upgraded with an auto-upgrade
// planned, a serving pool whose auto-upgrade an exclusion pauses, and a TPU pool in trouble.
func (h *harness) fleet() {
	h.t.Helper()
	h.sim.SetCluster("p1", "us-central1", &containerpb.Cluster{
		Name:                 "train",
		CurrentMasterVersion: "1.33.5-gke.1080000",
		NodePools: []*containerpb.NodePool{
			{Name: "a3-train", Version: "1.32.9-gke.1000000", Status: containerpb.NodePool_RUNNING, InitialNodeCount: 8,
				UpgradeSettings: &containerpb.NodePool_UpgradeSettings{MaxSurge: 1, Strategy: strategy(containerpb.NodePoolUpdateStrategy_SURGE)},
				Management: &containerpb.NodeManagement{AutoUpgrade: true, AutoRepair: true,
					UpgradeOptions: &containerpb.AutoUpgradeOptions{AutoUpgradeStartTime: "2026-06-02T04:00:00Z"}}},
			{Name: "l4-serve", Version: "1.33.5-gke.1080000", Status: containerpb.NodePool_RECONCILING, InitialNodeCount: 4,
				UpgradeSettings: &containerpb.NodePool_UpgradeSettings{Strategy: strategy(containerpb.NodePoolUpdateStrategy_BLUE_GREEN)},
				Management:      &containerpb.NodeManagement{AutoUpgrade: true}},
			{Name: "tpu-v5e", Version: "1.32.9-gke.1000000", Status: containerpb.NodePool_RUNNING_WITH_ERROR, InitialNodeCount: 16},
		},
		MaintenancePolicy: &containerpb.MaintenancePolicy{Window: &containerpb.MaintenanceWindow{
			Policy: &containerpb.MaintenanceWindow_RecurringWindow{RecurringWindow: &containerpb.RecurringTimeWindow{
				Window:     &containerpb.TimeWindow{StartTime: ts("2026-01-03T02:00:00Z"), EndTime: ts("2026-01-03T06:00:00Z")},
				Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU",
			}},
			MaintenanceExclusions: map[string]*containerpb.TimeWindow{
				"june-freeze": {StartTime: ts("2026-05-25T00:00:00Z"), EndTime: ts("2026-06-15T00:00:00Z"),
					Options: &containerpb.TimeWindow_MaintenanceExclusionOptions{MaintenanceExclusionOptions: &containerpb.MaintenanceExclusionOptions{
						Scope: containerpb.MaintenanceExclusionOptions_NO_MINOR_UPGRADES}}},
				"launch":     {StartTime: ts("2026-05-31T00:00:00Z"), EndTime: ts("2026-06-03T00:00:00Z")},
				"may-freeze": {StartTime: ts("2026-05-01T00:00:00Z"), EndTime: ts("2026-05-10T00:00:00Z")},
				"july-freeze": {StartTime: ts("2026-07-01T00:00:00Z"), EndTime: ts("2026-07-10T00:00:00Z"),
					Options: &containerpb.TimeWindow_MaintenanceExclusionOptions{MaintenanceExclusionOptions: &containerpb.MaintenanceExclusionOptions{
						Scope: containerpb.MaintenanceExclusionOptions_NO_MINOR_OR_NODE_UPGRADES}}},
			},
		}},
	})
	h.sim.SetUpgradeInfo(h.name, "a3-train", &containerpb.NodePoolUpgradeInfo{
		PatchTargetVersion: ptr("1.32.9-gke.1200000"), MinorTargetVersion: ptr("1.33.5-gke.1080000"),
		AutoUpgradeStatus: []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_ACTIVE},
	})
	h.sim.SetUpgradeInfo(h.name, "l4-serve", &containerpb.NodePoolUpgradeInfo{
		PatchTargetVersion: ptr("1.33.5-gke.1080000"),
		AutoUpgradeStatus:  []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED},
		PausedReason: []containerpb.NodePoolUpgradeInfo_AutoUpgradePausedReason{
			containerpb.NodePoolUpgradeInfo_MAINTENANCE_WINDOW, containerpb.NodePoolUpgradeInfo_MAINTENANCE_EXCLUSION_NO_UPGRADES},
	})
}

// poll polls once and fails the test on an error.
func (h *harness) poll() {
	h.t.Helper()
	if err := h.c.Poll(context.Background()); err != nil {
		h.t.Fatalf("poll: %v", err)
	}
}

// updater exposes Update as a prometheus.Collector, as the /metrics handler calls it.
// updater describes every series desc of the package, not those of one collect: which series a poll yields changes
// from poll to poll, and a pedantic registry then fails Gather on a metric whose desc is not among them.
type updater struct{ c *Collector }

func (u updater) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{controlPlaneVersionDesc, poolVersionDesc, poolStatusDesc, upgradeSettingsDesc,
		autoUpgradeStartDesc, autoUpgradePausedDesc, targetVersionDesc, upgradeInProgressDesc, upgradeNodesDesc,
		windowStartDesc, windowEndDesc, exclusionEndDesc} {
		ch <- desc
	}
}
func (u updater) Collect(ch chan<- prometheus.Metric) { _ = u.c.Update(ch) }

func (h *harness) gatherer() prometheus.Gatherer {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(updater{h.c})
	return prometheus.Gatherers{h.reg, reg}
}

// series maps every gke_cluster_ and gke_node_pool_ series, as name{labels}, to its value.
func (h *harness) series() map[string]float64 {
	h.t.Helper()
	families, err := h.gatherer().Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "gke_cluster_") && !strings.HasPrefix(mf.GetName(), "gke_node_pool_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+labels(m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// seriesNames are the families the golden file covers.
var seriesNames = []string{
	"gke_cluster_control_plane_version_info", "gke_node_pool_version_info", "gke_node_pool_status",
	"gke_node_pool_upgrade_settings_info", "gke_node_pool_auto_upgrade_start_timestamp_seconds",
	"gke_node_pool_auto_upgrade_paused", "gke_node_pool_upgrade_target_version_info", "gke_node_pool_upgrade_in_progress",
	"gke_node_pool_upgrade_nodes", "gke_cluster_maintenance_window_next_start_timestamp_seconds",
	"gke_cluster_maintenance_window_next_end_timestamp_seconds", "gke_cluster_maintenance_exclusion_end_timestamp_seconds",
}

func TestGoldenSeries(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	h.sim.SetNodesDone(h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_UPGRADE_NODES, 8), 3)
	// Finished work, the control plane's own upgrade, and another cluster's pool of the same name are not this
	// cluster's pools' work in progress.
	h.sim.FinishOperation(h.sim.StartNodePoolOperation(h.name, "l4-serve", containerpb.Operation_UPGRADE_NODES, 4))
	other := h.sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "serve"})
	h.sim.StartNodePoolOperation(other, "a3-train", containerpb.Operation_UPGRADE_NODES, 2)
	master := h.sim.StartNodePoolOperation(h.name, "ignored", containerpb.Operation_UPGRADE_MASTER, 0)
	if err := h.sim.UpdateOperation(master, func(op *containerpb.Operation) {
		op.TargetLink = "https://container.googleapis.com/v1/projects/p1/locations/us-central1/clusters/train"
	}); err != nil {
		t.Fatal(err)
	}
	h.poll()

	golden, err := os.ReadFile("testdata/gke.prom")
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(h.gatherer(), strings.NewReader(string(golden)), seriesNames...); err != nil {
		t.Error(err)
	}
	// The golden file is valid exposition as promtool sees it.
	check := exec.Command(testenv.Binary(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(string(golden))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the golden file: %v\n%s", err, out)
	}
	// One call of each kind per pool, all answered; the last success is the poll's time.
	if err := testutil.GatherAndCompare(h.gatherer(), strings.NewReader(`
# HELP gke_disruption_gke_api_requests_total GKE API calls, by method and gRPC code.
# TYPE gke_disruption_gke_api_requests_total counter
gke_disruption_gke_api_requests_total{code="OK",method="FetchNodePoolUpgradeInfo"} 3
gke_disruption_gke_api_requests_total{code="OK",method="GetCluster"} 1
gke_disruption_gke_api_requests_total{code="OK",method="ListOperations"} 1
# HELP gke_disruption_gke_api_last_success_timestamp_seconds When the latest poll of the GKE API in which every call succeeded began, in seconds since the epoch.
# TYPE gke_disruption_gke_api_last_success_timestamp_seconds gauge
gke_disruption_gke_api_last_success_timestamp_seconds 1.7803152e+09
`), "gke_disruption_gke_api_requests_total", "gke_disruption_gke_api_last_success_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	// No series carries a label Managed Service for Prometheus reserves for the target.
	families, err := h.gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "project_id", "location", "cluster", "namespace", "job", "instance":
					t.Errorf("%s carries label %s", mf.GetName(), l.GetName())
				}
			}
		}
	}
}

// TestSeriesEndWithWhatTheyRead: every series follows the API from one poll to the next and goes when its source
// goes.
func TestSeriesEndWithWhatTheyRead(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	op := h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_UPGRADE_NODES, 8)
	h.poll()
	want := func(step string, present map[string]float64, absent ...string) {
		t.Helper()
		got := h.series()
		for k, v := range present {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", step, k, g, ok, v)
			}
		}
		for _, k := range absent {
			if _, ok := got[k]; ok {
				t.Errorf("%s: %s still there", step, k)
			}
		}
	}
	tpuVersion := "gke_node_pool_version_info{node_pool=tpu-v5e,version=1.32.9-gke.1000000}"
	tpuStatus := "gke_node_pool_status{node_pool=tpu-v5e,status=running_with_error}"
	tpuSettings := "gke_node_pool_upgrade_settings_info{auto_upgrade=false,max_surge=0,max_unavailable=0,node_pool=tpu-v5e,strategy=surge}"
	inProgress := "gke_node_pool_upgrade_in_progress{node_pool=a3-train,operation_type=upgrade_nodes}"
	done := "gke_node_pool_upgrade_nodes{node_pool=a3-train,state=done}"
	total := "gke_node_pool_upgrade_nodes{node_pool=a3-train,state=total}"
	want("upgrade started", map[string]float64{tpuVersion: 1, tpuStatus: 1, tpuSettings: 1, inProgress: 1, done: 0, total: 8})

	h.sim.SetNodesDone(op, 5)
	h.clock.Add(5 * time.Minute)
	h.poll()
	want("upgrade moving on", map[string]float64{inProgress: 1, done: 5, total: 8})

	// A resize of the same pool starts meanwhile: both are in progress, the node counts are the newer one's.
	resize := h.sim.StartNodePoolOperation(h.name, "a3-train", containerpb.Operation_SET_NODE_POOL_SIZE, 10)
	h.sim.UpdateOperation(op, func(o *containerpb.Operation) { o.StartTime = "2026-06-01T12:04:59Z" })
	h.sim.UpdateOperation(resize, func(o *containerpb.Operation) { o.StartTime = "2026-06-01T12:04:59.5Z" })
	h.clock.Add(5 * time.Minute)
	h.poll()
	resizing := "gke_node_pool_upgrade_in_progress{node_pool=a3-train,operation_type=set_node_pool_size}"
	want("resize during the upgrade", map[string]float64{inProgress: 1, resizing: 1, done: 0, total: 10})
	h.sim.FinishOperation(resize)

	// The upgrade ends: the pool is at its target and the operation DONE.
	h.sim.FinishOperation(op)
	h.sim.UpdateNodePool(h.name, "a3-train", func(np *containerpb.NodePool) {
		np.Version = "1.32.9-gke.1200000"
		np.Management.UpgradeOptions = nil
	})
	h.sim.SetUpgradeInfo(h.name, "a3-train", &containerpb.NodePoolUpgradeInfo{PatchTargetVersion: ptr("1.32.9-gke.1200000")})
	h.sim.DeleteNodePool(h.name, "tpu-v5e")
	h.sim.UpdateCluster(h.name, func(c *containerpb.Cluster) {
		c.CurrentMasterVersion = "1.33.6-gke.1000000"
		c.MaintenancePolicy = nil
	})
	h.sim.SetUpgradeInfo(h.name, "l4-serve", &containerpb.NodePoolUpgradeInfo{})
	h.clock.Add(5 * time.Minute)
	h.poll()
	want("upgrade done, TPU pool deleted, maintenance policy removed",
		map[string]float64{
			"gke_node_pool_version_info{node_pool=a3-train,version=1.32.9-gke.1200000}": 1,
			"gke_cluster_control_plane_version_info{version=1.33.6-gke.1000000}":        1,
		},
		inProgress, resizing, done, total, tpuVersion, tpuStatus, tpuSettings,
		"gke_node_pool_version_info{node_pool=a3-train,version=1.32.9-gke.1000000}",
		"gke_cluster_control_plane_version_info{version=1.33.5-gke.1080000}",
		"gke_node_pool_upgrade_target_version_info{node_pool=a3-train,version=1.32.9-gke.1200000}",
		"gke_node_pool_auto_upgrade_start_timestamp_seconds{node_pool=a3-train}",
		"gke_node_pool_auto_upgrade_paused{node_pool=l4-serve,reason=maintenance_window}",
		"gke_cluster_maintenance_window_next_start_timestamp_seconds{}",
		"gke_cluster_maintenance_window_next_end_timestamp_seconds{}",
		"gke_cluster_maintenance_exclusion_end_timestamp_seconds{exclusion=june-freeze,scope=no_minor_upgrades}",
	)
	for k := range h.series() {
		if strings.Contains(k, "tpu-v5e") {
			t.Errorf("series of the deleted pool left: %s", k)
		}
	}
}

// TestExclusionEndsWithItsTime: an exclusion in force is exported until its end, and not after.
func TestExclusionEndsWithItsTime(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	h.poll()
	launch := "gke_cluster_maintenance_exclusion_end_timestamp_seconds{exclusion=launch,scope=no_upgrades}"
	if got := h.series()[launch]; got != float64(ts("2026-06-03T00:00:00Z").AsTime().Unix()) {
		t.Errorf("%s = %v", launch, got)
	}
	h.clock.Add(36 * time.Hour) // 2026-06-03 00:00: the launch exclusion is over
	h.poll()
	if _, ok := h.series()[launch]; ok {
		t.Errorf("%s after its end", launch)
	}
}

func logCount(log, s string) int { return strings.Count(log, s) }

// TestPermissionDeniedToldOnceAndRecovers: a missing role is logged once with its fix, the scrape fails meanwhile
// with the last series kept, and the next poll after the role is granted succeeds. The same for a disabled API.
func TestPermissionDeniedToldOnceAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		fault  func(h *harness) *status.Status
		fix    string
	}{
		{"permission denied", gkesim.MethodGetCluster, func(h *harness) *status.Status { return gkesim.PermissionDenied(h.name) },
			"roles/container.clusterViewer"},
		{"API disabled", gkesim.AnyMethod, func(*harness) *status.Status { return gkesim.ServiceDisabled("p1") },
			"gcloud services enable container.googleapis.com"},
		{"permission denied on operations", gkesim.MethodListOperations,
			func(h *harness) *status.Status { return gkesim.PermissionDenied(h.name) }, "permission denied (container.operations.list)"},
		{"permission denied on upgrade information", gkesim.MethodFetchNodePoolUpgradeInfo,
			func(h *harness) *status.Status { return gkesim.PermissionDenied(h.name) }, "roles/container.clusterViewer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.fleet()
			h.poll()
			before := len(h.series())

			h.sim.FailWith(tc.method, tc.fault(h), -1)
			for range 3 {
				h.clock.Add(5 * time.Minute)
				if err := h.c.Poll(context.Background()); googleapi.Code(err) != codes.PermissionDenied {
					t.Fatalf("poll while denied: %v", err)
				}
			}
			if n := logCount(h.log.String(), tc.fix); n != 1 {
				t.Errorf("fix %q logged %d times, want once:\n%s", tc.fix, n, h.log.String())
			}
			if err := h.c.Update(make(chan prometheus.Metric, 100)); err == nil {
				t.Error("scrape succeeds while the API denies")
			}
			if got := len(h.series()); got != before {
				t.Errorf("%d series while denied, want the %d of the last poll", got, before)
			}

			h.sim.FailWith(tc.method, nil, 0) // granted
			h.clock.Add(5 * time.Minute)
			h.poll()
			if err := h.c.Update(make(chan prometheus.Metric, 100)); err != nil {
				t.Errorf("scrape after the grant: %v", err)
			}
			if !strings.Contains(h.log.String(), "GKE API read again") {
				t.Errorf("recovery not logged:\n%s", h.log.String())
			}
			if got := testutil.ToFloat64(h.c.lastSuccess); got != seconds(h.clock.Now()) {
				t.Errorf("last success %v, want %v", got, seconds(h.clock.Now()))
			}

			// Denied again later: told again.
			h.sim.FailWith(tc.method, tc.fault(h), -1)
			_ = h.c.Poll(context.Background())
			if n := logCount(h.log.String(), tc.fix); n != 2 {
				t.Errorf("fix logged %d times after a second denial, want twice", n)
			}
		})
	}
}

// TestUnavailableAtStartRecovers: the API failing at start is retried, sooner than the interval, until it answers.
func TestUnavailableAtStartRecovers(t *testing.T) {
	h := newHarness(t, Config{Interval: 2 * time.Second})
	h.c.now = time.Now
	h.fleet()
	h.sim.Fail(gkesim.AnyMethod, codes.Unavailable, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	if err := h.c.Update(make(chan prometheus.Metric, 100)); err == nil {
		t.Error("scrape succeeds before the API answered")
	}
	testenv.Eventually(t, 30*time.Second, "a successful poll", func() error {
		return h.c.Update(make(chan prometheus.Metric, 100))
	})
	if got := testutil.ToFloat64(h.c.requests.WithLabelValues(MethodGetCluster, "Unavailable")); got != 3 {
		t.Errorf("%v unavailable GetCluster calls, want 3", got)
	}
	if len(h.series()) == 0 {
		t.Error("no series after recovering")
	}
}

// TestSlowAnswersBounded: a call that does not answer ends at its deadline, counted, and the poll with it.
func TestSlowAnswersBounded(t *testing.T) {
	h := newHarness(t, Config{CallTimeout: 200 * time.Millisecond})
	h.fleet()
	h.sim.SetLatency(time.Hour)
	err := h.c.Poll(context.Background())
	if googleapi.Code(err) != codes.DeadlineExceeded || !retryable(googleapi.Code(err)) {
		t.Fatalf("poll of a hanging API: %v", err)
	}
	if got := testutil.ToFloat64(h.c.requests.WithLabelValues(MethodGetCluster, "DeadlineExceeded")); got != 1 {
		t.Errorf("%v timed-out GetCluster calls, want 1", got)
	}
	if got := h.sim.Calls(gkesim.AnyMethod); got != 1 {
		t.Errorf("%d calls after the cluster timed out, want 1 (the client's own retries are off)", got)
	}
	h.sim.SetLatency(0)
	h.poll()
}

// TestCallsPerPollBounded: a poll costs one GetCluster, one ListOperations and one FetchNodePoolUpgradeInfo per
// pool, however many nodes the pools hold or an upgrade replaces.
func TestCallsPerPollBounded(t *testing.T) {
	h := newHarness(t, Config{})
	h.fleet()
	for _, pool := range []string{"a3-train", "l4-serve", "tpu-v5e"} {
		h.sim.UpdateNodePool(h.name, pool, func(np *containerpb.NodePool) { np.InitialNodeCount = 5000 })
		h.sim.StartNodePoolOperation(h.name, pool, containerpb.Operation_UPGRADE_NODES, 5000)
	}
	const polls = 4
	for range polls {
		h.poll()
		h.clock.Add(5 * time.Minute)
	}
	for method, want := range map[string]int{gkesim.MethodGetCluster: polls, gkesim.MethodListOperations: polls,
		gkesim.MethodFetchNodePoolUpgradeInfo: 3 * polls} {
		if got := h.sim.Calls(method); got != want {
			t.Errorf("%d %s calls in %d polls, want %d", got, method, polls, want)
		}
	}
	if got := h.sim.Calls(gkesim.AnyMethod); got != 5*polls {
		t.Errorf("%d calls in all, want %d", got, 5*polls)
	}
}

// TestNotFoundNamesTheFlag: a cluster that does not exist is told once, naming --gke.cluster and its form.
func TestNotFoundNamesTheFlag(t *testing.T) {
	h := newHarness(t, Config{Cluster: Cluster{Project: "p1", Location: "us-central1", Name: "nope"}})
	for range 2 {
		if err := h.c.Poll(context.Background()); googleapi.Code(err) != codes.NotFound {
			t.Fatalf("poll of a missing cluster: %v", err)
		}
	}
	if n := logCount(h.log.String(), "check --gke.cluster ("+clusterForm+")"); n != 1 {
		t.Errorf("told %d times:\n%s", n, h.log.String())
	}
}

func TestOperationTargetLinks(t *testing.T) {
	for link, want := range map[string]string{
		"https://container.googleapis.com/v1/projects/p1/locations/us-central1/clusters/train/nodePools/a3":    "a3",
		"https://container.googleapis.com/v1/projects/123456/zones/us-central1/clusters/train/nodePools/a3":    "a3",
		"https://container.googleapis.com/v1/projects/p1/locations/us-central1/clusters/train":                 "",
		"https://container.googleapis.com/v1/projects/p1/locations/us-central1/clusters/training/nodePools/a3": "",
		"https://container.googleapis.com/v1/projects/p1/locations/europe-west4/clusters/train/nodePools/a3":   "",
	} {
		if got, _ := train.NodePoolOf(link); got != want {
			t.Errorf("%s: pool %q, want %q", link, got, want)
		}
	}
}

func TestFlags(t *testing.T) {
	parse := func(args ...string) (Config, error) {
		app := kingpin.New("test", "")
		f := AddFlags(app.Command("cluster", ""))
		if _, err := app.Parse(append([]string{"cluster"}, args...)); err != nil {
			t.Fatalf("parsing %q: %v", args, err)
		}
		return f.Config()
	}
	if cfg, err := parse(); err != nil || cfg != (Config{Interval: 5 * time.Minute}) {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	if cfg, err := parse("--gke.cluster=projects/p1/locations/us-central1-a/clusters/train", "--gke.interval=1m"); err != nil ||
		cfg != (Config{Cluster: Cluster{Project: "p1", Location: "us-central1-a", Name: "train"}, Interval: time.Minute}) {
		t.Errorf("flags: %+v, %v", cfg, err)
	}
	for _, bad := range []string{"train", "us-central1/train", "projects/p1/locations/us-central1/clusters/",
		"projects/p1/zones/us-central1/clusters/train", "projects/p1/locations/-/clusters/train",
		"projects/p1/locations/us-central1/clusters/train/nodePools/a3"} {
		_, err := parse("--gke.cluster=" + bad)
		if err == nil || !strings.Contains(err.Error(), "--gke.cluster") || !strings.Contains(err.Error(), clusterForm) {
			t.Errorf("--gke.cluster=%s: %v, want an error naming the flag and %s", bad, err, clusterForm)
		}
	}
	if _, err := parse("--gke.interval=0s"); err == nil {
		t.Error("a zero interval accepted")
	}
	if _, err := parse("--gke.insecure"); err == nil || !strings.Contains(err.Error(), "--gke.endpoint") {
		t.Errorf("--gke.insecure without an endpoint: %v", err)
	}
}
