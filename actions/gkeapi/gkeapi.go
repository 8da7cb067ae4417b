// Package gkeapi is the actions service's part of the GKE API (google.container.v1.ClusterManager) for its own
// cluster: reading the cluster (versions, node pools, maintenance policy) and upgrading a node pool, and following
// the operation that does it. Each call has its own deadline; callers retry on their next reconcile.
package gkeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
)

// callTimeout bounds one call: a reconcile waits on it.
const callTimeout = 30 * time.Second

// Client reads and upgrades one cluster.
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
	cl, err := c.cm.GetCluster(ctx, &containerpb.GetClusterRequest{Name: c.cluster.String()})
	if err != nil {
		return nil, explain("GetCluster", c.cluster.String(), err)
	}
	return cl, nil
}

// UpgradeNodePool asks GKE to upgrade the pool's nodes to version with the image type they have (UpdateNodePool)
// and returns the operation's resource name.
func (c *Client) UpgradeNodePool(ctx context.Context, pool, version, imageType string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	name := c.cluster.String() + "/nodePools/" + pool
	op, err := c.cm.UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{Name: name, NodeVersion: version, ImageType: imageType})
	if err != nil {
		return "", explain("UpdateNodePool", name, err)
	}
	return c.operationName(op), nil
}

// Operation reads an operation by its resource name.
func (c *Client) Operation(ctx context.Context, name string) (*containerpb.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	op, err := c.cm.GetOperation(ctx, &containerpb.GetOperationRequest{Name: name})
	if err != nil {
		return nil, explain("GetOperation", name, err)
	}
	return op, nil
}

// PoolOperations are the operations of the cluster's location whose target is the pool, as resource names with
// their state: an upgrade requested by a call whose answer was lost is found here.
func (c *Client) PoolOperations(ctx context.Context, pool string) ([]*containerpb.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	parent := "projects/" + c.cluster.Project + "/locations/" + c.cluster.Location
	resp, err := c.cm.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: parent})
	if err != nil {
		return nil, explain("ListOperations", parent, err)
	}
	var out []*containerpb.Operation
	for _, op := range resp.GetOperations() {
		if p, ok := c.cluster.NodePoolOf(op.GetTargetLink()); ok && p == pool {
			op.Name = c.operationName(op)
			out = append(out, op)
		}
	}
	return out, nil
}

// operationName is an operation's resource name: the API answers with its short name and a self link.
func (c *Client) operationName(op *containerpb.Operation) string {
	if strings.HasPrefix(op.GetName(), "projects/") {
		return op.GetName()
	}
	return "projects/" + c.cluster.Project + "/locations/" + c.cluster.Location + "/operations/" + op.GetName()
}

// Transient tells whether a failed call may succeed when tried again.
func Transient(err error) bool {
	if ce := (*callError)(nil); errors.As(err, &ce) {
		err = ce.err
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// explain names the call and says how to fix what a person must fix.
func explain(method, resource string, err error) error {
	fix := ""
	switch status.Code(err) {
	case codes.PermissionDenied:
		fix = " (grant the actions service's Kubernetes service account, through Workload Identity, roles/container.clusterViewer to read and, for upgrade.withMaintenance, container.clusters.update, e.g. roles/container.developer)"
	case codes.Unauthenticated:
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
