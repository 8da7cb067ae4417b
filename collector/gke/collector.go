// Package gke reads the exporter's own cluster from the GKE API (google.container.v1.ClusterManager) and exports
// what decides when GKE itself disrupts nodes: control-plane and node pool versions, pool status and upgrade
// settings, planned and paused auto-upgrades, upgrade operations in progress with their node counts, and the
// cluster's maintenance window and exclusions.
//
// A poll is one GetCluster (node pools and maintenance policy included), one ListOperations of the cluster's
// location, and one FetchNodePoolUpgradeInfo per node pool, on the interval; a scrape sends what the latest
// successful poll rendered. A failed poll keeps the earlier series and fails the scrape until a poll succeeds.
package gke

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/cenkalti/backoff/v5"
	gax "github.com/googleapis/gax-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/googleapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// The ClusterManager methods called, as requests_total names them.
const (
	MethodGetCluster               = "GetCluster"
	MethodListOperations           = "ListOperations"
	MethodFetchNodePoolUpgradeInfo = "FetchNodePoolUpgradeInfo"
)

// defaultCallTimeout bounds one call when the configuration does not; never longer than the interval.
const defaultCallTimeout = 30 * time.Second

// Cluster names a GKE cluster.
type Cluster struct {
	Project  string
	Location string // zone or region
	Name     string
}

const clusterForm = "projects/PROJECT/locations/LOCATION/clusters/CLUSTER"

// ParseCluster reads a cluster's resource name, projects/P/locations/L/clusters/C.
func ParseCluster(s string) (Cluster, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "clusters" {
		return Cluster{}, fmt.Errorf("cluster %q: want %s", s, clusterForm)
	}
	c := Cluster{Project: parts[1], Location: parts[3], Name: parts[5]}
	for _, v := range []string{c.Project, c.Location, c.Name} {
		if v == "" || v == "-" || strings.ContainsAny(v, " \t\n") {
			return Cluster{}, fmt.Errorf("cluster %q: want %s", s, clusterForm)
		}
	}
	return c, nil
}

// String is the cluster's resource name.
func (c Cluster) String() string {
	return "projects/" + c.Project + "/locations/" + c.Location + "/clusters/" + c.Name
}

func (c Cluster) location() string { return "projects/" + c.Project + "/locations/" + c.Location }

func (c Cluster) nodePool(pool string) string { return c.String() + "/nodePools/" + pool }

// NodePoolOf is the node pool of this cluster an operation's target link names. Links name the project by ID or
// number and the location as a zone or location, so only the location, cluster and pool are compared.
func (c Cluster) NodePoolOf(link string) (string, bool) {
	for _, scope := range []string{"/locations/", "/zones/"} {
		prefix := scope + c.Location + "/clusters/" + c.Name + "/nodePools/"
		if _, pool, ok := strings.Cut(link, prefix); ok && pool != "" && !strings.Contains(pool, "/") {
			return pool, true
		}
	}
	return "", false
}

// Config says which cluster to read and how often.
type Config struct {
	Cluster     Cluster
	Interval    time.Duration
	CallTimeout time.Duration // deadline of one call; 0 means defaultCallTimeout, at most the interval
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if _, err := ParseCluster(c.Cluster.String()); err != nil {
		return err
	}
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("interval %v: must be positive", c.Interval)
	case c.CallTimeout < 0:
		return fmt.Errorf("call timeout %v: must not be negative", c.CallTimeout)
	}
	return nil
}

func (c Config) callTimeout() time.Duration {
	if c.CallTimeout > 0 {
		return c.CallTimeout
	}
	return min(defaultCallTimeout, c.Interval)
}

// NewClient connects to the GKE API with Application Default Credentials (Workload Identity on GKE), or, with
// plaintext, to endpoint over unencrypted gRPC without credentials (the simulator).
func NewClient(ctx context.Context, endpoint string, plaintext bool) (*container.ClusterManagerClient, error) {
	opts, err := googleapi.ClientOptions(endpoint, plaintext, "--gke.endpoint", "--gke.insecure")
	if err != nil {
		return nil, err
	}
	client, err := container.NewClusterManagerClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating GKE API client: %w", err)
	}
	return client, nil
}

// Collector keeps the cluster's series current by polling; a scrape only copies them.
type Collector struct {
	logger *slog.Logger
	client *container.ClusterManagerClient
	cfg    Config
	now    func() time.Time

	requests    *prometheus.CounterVec
	lastSuccess prometheus.Gauge

	mu      sync.Mutex
	metrics []prometheus.Metric // of the latest successful poll
	polled  bool
	lastErr error
	told    map[string]bool // failures whose fix was logged, until a poll succeeds
	noticed map[string]bool // unreadable fields logged, for good
}

// New builds a collector reading cfg.Cluster through client; Run polls. Its request counter and last-success gauge
// register with reg.
func New(logger *slog.Logger, client *container.ClusterManagerClient, cfg Config, reg prometheus.Registerer) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Collector{
		logger: logger,
		client: client,
		cfg:    cfg,
		now:    time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "gke_api_requests_total",
			Help:      "GKE API calls, by method and gRPC code.",
		}, []string{"method", "code"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace,
			Name:      "gke_api_last_success_timestamp_seconds",
			Help:      "When the latest poll of the GKE API in which every call succeeded began, in seconds since the epoch.",
		}),
		told:    map[string]bool{},
		noticed: map[string]bool{},
	}
	for _, m := range []string{MethodGetCluster, MethodListOperations, MethodFetchNodePoolUpgradeInfo} {
		c.requests.WithLabelValues(m, codes.OK.String())
	}
	for _, m := range []prometheus.Collector{c.requests, c.lastSuccess} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run polls on the interval until ctx ends; a poll that failed for a reason that passes (the API unavailable or
// throttling, a call timing out) is tried again sooner, backing off with jitter.
func (c *Collector) Run(ctx context.Context) {
	retry := &backoff.ExponentialBackOff{InitialInterval: c.cfg.Interval / 16, RandomizationFactor: 0.5, Multiplier: 2,
		MaxInterval: c.cfg.Interval}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		delay := c.cfg.Interval
		if err := c.Poll(ctx); err != nil && retryable(googleapi.Code(err)) {
			delay = retry.NextBackOff()
		} else {
			retry.Reset()
		}
		timer.Reset(delay)
	}
}

// Poll reads the cluster once, now, and renders its series; it returns the error of the call that failed.
func (c *Collector) Poll(ctx context.Context) error {
	begin := c.now()
	snap, err := c.read(ctx)
	var metrics []prometheus.Metric
	var problems []string
	if err == nil {
		metrics, problems = render(c.cfg.Cluster, snap, begin)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.polled, c.lastErr = true, err
	for _, p := range problems {
		if !c.noticed[p] {
			c.noticed[p] = true
			c.logger.Warn("GKE API answer has a field the exporter cannot read; its series is left out", "field", p)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			c.reportLocked(err)
		}
		return err
	}
	if len(c.told) > 0 {
		c.logger.Info("GKE API read again", "cluster", c.cfg.Cluster.String())
		clear(c.told)
	}
	c.metrics = metrics
	c.lastSuccess.Set(seconds(begin))
	return nil
}

// read makes a poll's calls: the cluster, the operations of its location, and each node pool's upgrade information.
func (c *Collector) read(ctx context.Context) (snapshot, error) {
	cluster, err := call(ctx, c, MethodGetCluster, func(ctx context.Context, opts ...gax.CallOption) (*containerpb.Cluster, error) {
		return c.client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: c.cfg.Cluster.String()}, opts...)
	})
	if err != nil {
		return snapshot{}, err
	}
	ops, err := call(ctx, c, MethodListOperations, func(ctx context.Context, opts ...gax.CallOption) (*containerpb.ListOperationsResponse, error) {
		return c.client.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: c.cfg.Cluster.location()}, opts...)
	})
	if err != nil {
		return snapshot{}, err
	}
	snap := snapshot{cluster: cluster, operations: ops.GetOperations(), upgradeInfo: map[string]*containerpb.NodePoolUpgradeInfo{}}
	var pools []*containerpb.NodePool
	for _, np := range cluster.GetNodePools() {
		info, err := call(ctx, c, MethodFetchNodePoolUpgradeInfo, func(ctx context.Context, opts ...gax.CallOption) (*containerpb.NodePoolUpgradeInfo, error) {
			return c.client.FetchNodePoolUpgradeInfo(ctx, &containerpb.FetchNodePoolUpgradeInfoRequest{Name: c.cfg.Cluster.nodePool(np.GetName())}, opts...)
		})
		if googleapi.Code(err) == codes.NotFound {
			// Deleted since GetCluster listed it: the pool is gone, and so are its series.
			c.logger.Debug("node pool deleted during the poll", "node_pool", np.GetName())
			continue
		}
		if err != nil {
			return snapshot{}, fmt.Errorf("node pool %s: %w", np.GetName(), err)
		}
		pools = append(pools, np)
		snap.upgradeInfo[np.GetName()] = info
	}
	if len(pools) != len(cluster.GetNodePools()) {
		kept := proto.Clone(cluster).(*containerpb.Cluster)
		kept.NodePools = pools
		snap.cluster = kept
	}
	return snap, nil
}

// call makes one call within the call timeout and counts it by its code. The client's own retries are off: Run
// backs off itself, so that every call is counted and a poll's calls stay bounded.
func call[T any](ctx context.Context, c *Collector, method string, do func(context.Context, ...gax.CallOption) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.callTimeout())
	defer cancel()
	resp, err := do(ctx, gax.WithRetry(nil))
	c.requests.WithLabelValues(method, googleapi.Code(err).String()).Inc()
	if err != nil {
		err = &callError{method: method, err: err}
	}
	return resp, err
}

// callError is a failed call, by method: a denied permission is told by the method that needs it.
type callError struct {
	method string
	err    error
}

func (e *callError) Error() string { return e.method + ": " + e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// permissions are what each method needs.
var permissions = map[string]string{
	MethodGetCluster:               "container.clusters.get",
	MethodListOperations:           "container.operations.list",
	MethodFetchNodePoolUpgradeInfo: "container.clusters.get",
}

// reportLocked logs a failed poll: a failure an operator must fix once, with the fix, until a poll succeeds; any
// other on every attempt.
func (c *Collector) reportLocked(err error) {
	kind, fix := diagnose(err, c.cfg.Cluster)
	if kind == "" {
		c.logger.Warn("GKE API poll failed", "cluster", c.cfg.Cluster.String(), "code", googleapi.Code(err).String(), "err", err)
		return
	}
	if c.told[kind] {
		c.logger.Debug("GKE API poll failed", "cluster", c.cfg.Cluster.String(), "code", googleapi.Code(err).String(), "err", err)
		return
	}
	c.told[kind] = true
	c.logger.Error("GKE API poll failed: "+fix, "cluster", c.cfg.Cluster.String(), "code", googleapi.Code(err).String(), "err", err)
}

// diagnose names a failure that will not heal by itself, and what fixes it; kind is empty for any other.
func diagnose(err error, cluster Cluster) (kind, fix string) {
	s, _ := status.FromError(unwrapStatus(err))
	switch s.Code() {
	case codes.PermissionDenied:
		if googleapi.ServiceDisabled(err) {
			return "service_disabled", "the Kubernetes Engine API is not enabled in project " + cluster.Project +
				": enable container.googleapis.com (gcloud services enable container.googleapis.com --project " + cluster.Project + ")"
		}
		var ce *callError
		needed := "container.clusters.get and container.operations.list"
		if errors.As(err, &ce) {
			needed = permissions[ce.method]
		}
		return "permission_denied", "permission denied (" + needed + "): grant the exporter's Kubernetes service account " +
			"(Workload Identity) roles/container.clusterViewer on project " + cluster.Project +
			", or a role with container.clusters.get and container.operations.list"
	case codes.Unauthenticated:
		return "unauthenticated", "no valid credentials: run with Workload Identity (or Application Default Credentials)"
	case codes.NotFound:
		// Only the cluster's own calls: a node pool that is not found was deleted, which heals by itself.
		if ce := (*callError)(nil); !errors.As(err, &ce) || ce.method != MethodFetchNodePoolUpgradeInfo {
			return "not_found", "cluster " + cluster.String() + " not found: check --gke.cluster (" + clusterForm + ")"
		}
	}
	return "", ""
}

// unwrapStatus finds the gRPC status in err's chain: the client's errors wrap it.
func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

var errNotPolled = errors.New("GKE API not read yet")

// Update sends the series of the latest successful poll. It fails until a poll has succeeded, and while the latest
// has failed.
func (c *Collector) Update(ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	metrics, polled, err := c.metrics, c.polled, c.lastErr
	c.mu.Unlock()
	for _, m := range metrics {
		ch <- m
	}
	if !polled {
		return errNotPolled
	}
	return err
}
