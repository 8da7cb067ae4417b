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

// explain names the call and says how to fix what a person must fix.
func explain(method, resource string, err error) error {
	fix := ""
	switch {
	case googleapi.ServiceDisabled(err):
		fix = " (the Kubernetes Engine API is not enabled in the cluster's project: enable container.googleapis.com)"
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
