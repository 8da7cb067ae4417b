// Package gkeapi is the actions service's part of the GKE API (google.container.v1.ClusterManager) for its own
// cluster: reading the cluster (versions, node pools, maintenance policy), and upgrading a node pool with its
// operation followed. Each call has its own deadline and is made once; callers retry on their next reconcile.
package gkeapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/googleapi"
)

// callTimeout bounds one call: a reconcile waits on it.
const callTimeout = 30 * time.Second

// Client reads one cluster.
type Client struct {
	cm      *container.ClusterManagerClient
	cluster gkecollector.Cluster
}

// New is a client of cluster over cm.
func New(cm *container.ClusterManagerClient, cluster gkecollector.Cluster) *Client {
	return &Client{cm: cm, cluster: cluster}
}

// Cluster is the cluster's resource name, projects/P/locations/L/clusters/C.
func (c *Client) Cluster() string { return c.cluster.String() }

// GetCluster reads the cluster, its node pools and maintenance policy included.
func (c *Client) GetCluster(ctx context.Context) (*containerpb.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// One call per read: the client's retries of Unavailable would hold decisions for the whole timeout, and the
	// Calendar's TTL is the back-off.
	cl, err := c.cm.GetCluster(ctx, &containerpb.GetClusterRequest{Name: c.cluster.String()}, gax.WithRetry(nil))
	if err != nil {
		return nil, explain("GetCluster", c.cluster.String(), err)
	}
	return cl, nil
}

// UpdateNodePool asks GKE to upgrade pool's nodes to the control plane's version ("-"), keeping its image type
// (a required field: GKE would otherwise refuse the request).
func (c *Client) UpdateNodePool(ctx context.Context, pool, imageType string) (*containerpb.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	name := c.cluster.String() + "/nodePools/" + pool
	// Never retried by the client: a retry after a lost answer could start a second upgrade; the caller looks for
	// the first one's operation (FindUpgrade) before it asks again.
	op, err := c.cm.UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{Name: name, NodeVersion: "-", ImageType: imageType},
		gax.WithRetry(nil))
	if err != nil {
		return nil, explain("UpdateNodePool", name, err)
	}
	return op, nil
}

// GetOperation reads an operation of the cluster's location by its short name.
func (c *Client) GetOperation(ctx context.Context, operation string) (*containerpb.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	name := c.location() + "/operations/" + operation
	op, err := c.cm.GetOperation(ctx, &containerpb.GetOperationRequest{Name: name}, gax.WithRetry(nil))
	if err != nil {
		return nil, explain("GetOperation", name, err)
	}
	return op, nil
}

// FindUpgrade is the latest UPGRADE_NODES operation of pool started at since or later (nil when there is none):
// the answer of an UpdateNodePool call that was lost, or GKE's own upgrade of the pool under way.
func (c *Client) FindUpgrade(ctx context.Context, pool string, since time.Time) (*containerpb.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.cm.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: c.location()}, gax.WithRetry(nil))
	if err != nil {
		return nil, explain("ListOperations", c.location(), err)
	}
	var latest *containerpb.Operation
	var latestStart time.Time
	for _, op := range resp.GetOperations() {
		started, err := time.Parse(time.RFC3339Nano, op.GetStartTime())
		if p, ok := c.cluster.NodePoolOf(op.GetTargetLink()); !ok || p != pool || err != nil ||
			op.GetOperationType() != containerpb.Operation_UPGRADE_NODES || started.Before(since) {
			continue
		}
		if latest == nil || started.After(latestStart) {
			latest, latestStart = op, started
		}
	}
	return latest, nil
}

// location is the cluster's location's resource name, the parent of its operations.
func (c *Client) location() string {
	loc, _, _ := strings.Cut(c.cluster.String(), "/clusters/")
	return loc
}

// explain names the call and says how to fix what a person must fix.
func explain(method, resource string, err error) error {
	fix := ""
	switch {
	case googleapi.ServiceDisabled(err):
		fix = " (the Kubernetes Engine API is not enabled in the cluster's project: enable container.googleapis.com)"
	case status.Code(err) == codes.PermissionDenied && method == "UpdateNodePool":
		fix = " (upgrade.withMaintenance needs container.clusters.update: grant the actions service's Kubernetes service account, through Workload Identity, a custom role with it beside roles/container.clusterViewer)"
	case status.Code(err) == codes.PermissionDenied:
		fix = " (grant the actions service's Kubernetes service account, through Workload Identity, roles/container.clusterViewer)"
	case status.Code(err) == codes.Unauthenticated:
		fix = " (no usable credentials: Workload Identity on GKE, else GOOGLE_APPLICATION_CREDENTIALS)"
	}
	return &callError{msg: fmt.Sprintf("GKE API %s %s: %s%s", method, resource, status.Convert(err).Message(), fix), err: err}
}

type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }
