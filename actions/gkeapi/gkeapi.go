// Package gkeapi is the actions service's part of the GKE API (google.container.v1.ClusterManager) for its own
// cluster: reading the cluster (versions, node pools, maintenance policy). Each call has its own deadline; callers
// retry on their next reconcile.
package gkeapi

import (
	"context"
	"fmt"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gkecollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
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
	cl, err := c.cm.GetCluster(ctx, &containerpb.GetClusterRequest{Name: c.cluster.String()})
	if err != nil {
		return nil, explain("GetCluster", c.cluster.String(), err)
	}
	return cl, nil
}

// explain names the call and says how to fix what a person must fix.
func explain(method, resource string, err error) error {
	fix := ""
	switch status.Code(err) {
	case codes.PermissionDenied:
		fix = " (grant the actions service's Kubernetes service account, through Workload Identity, roles/container.clusterViewer)"
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
