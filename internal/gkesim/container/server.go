// Package container simulates the GKE API (google.container.v1.ClusterManager) as the exporter reads it:
// GetCluster with its node pools and maintenance policy, ListOperations of a location, and
// FetchNodePoolUpgradeInfo, by resource name (the deprecated project, zone and cluster ID fields are not read).
// Tests, gkesim run and a scenario driver set the state through the Go API (clusters, node pools, upgrade
// information, operations and their progress); faults are injected on demand: failed calls with a gRPC code
// (PermissionDenied, Unavailable, a disabled API as Google reports it), and slow answers. The real client library
// reaches it over loopback gRPC without credentials.
package container

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/grpcserve"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The methods served, as fault and call counts name them.
const (
	MethodGetCluster               = "GetCluster"
	MethodListOperations           = "ListOperations"
	MethodFetchNodePoolUpgradeInfo = "FetchNodePoolUpgradeInfo"
	MethodUpdateNodePool           = "UpdateNodePool"
	MethodGetOperation             = "GetOperation"
	// AnyMethod selects every method in Fail.
	AnyMethod = ""
)

// selfLinkBase is how the API spells its own resources in self and target links.
const selfLinkBase = "https://container.googleapis.com/v1/"

// ClusterName is the resource name of a cluster: projects/P/locations/L/clusters/C.
func ClusterName(project, location, cluster string) string {
	return "projects/" + project + "/locations/" + location + "/clusters/" + cluster
}

// NodePoolName is the resource name of a node pool of the cluster named by clusterName.
func NodePoolName(clusterName, pool string) string { return clusterName + "/nodePools/" + pool }

type fault struct {
	status *status.Status
	left   int // calls left to fail; negative: until cleared
}

type operation struct {
	parent string // projects/P/locations/L
	op     *containerpb.Operation
}

// Server is a simulated ClusterManager. Create it with New.
type Server struct {
	*grpcserve.Listeners // Serve, Start, Close

	mu          sync.Mutex
	clusters    map[string]*containerpb.Cluster             // by resource name
	upgradeInfo map[string]*containerpb.NodePoolUpgradeInfo // by node pool resource name
	operations  []*operation                                // in creation order
	nextOp      int
	faults      map[string]*fault // by method; AnyMethod for all
	latency     time.Duration
	calls       map[string]int
	// onUpgrade plays a node pool upgrade UpdateNodePool started (a scenario driver); nil leaves it running.
	onUpgrade func(clusterName, pool, version, operation string)
}

// OnNodePoolUpgrade has play called, outside the server's lock, for every node pool upgrade UpdateNodePool starts:
// the pool, the version to upgrade to and the operation's name, which play moves on and finishes (or fails).
func (s *Server) OnNodePoolUpgrade(play func(clusterName, pool, version, operation string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onUpgrade = play
}

// New returns a simulator with no clusters.
func New() *Server {
	s := &Server{
		clusters:    map[string]*containerpb.Cluster{},
		upgradeInfo: map[string]*containerpb.NodePoolUpgradeInfo{},
		faults:      map[string]*fault{},
		calls:       map[string]int{},
	}
	s.Listeners = grpcserve.New(func(gs *grpc.Server) { containerpb.RegisterClusterManagerServer(gs, api{s: s}) })
	return s
}

// SetCluster stores a copy of c as cluster c.Name of the project and location, replacing any before, and returns
// its resource name. Its location and self links are filled in as the API fills them.
func (s *Server) SetCluster(project, location string, c *containerpb.Cluster) string {
	c = proto.Clone(c).(*containerpb.Cluster)
	name := ClusterName(project, location, c.GetName())
	c.Location = location
	c.SelfLink = selfLinkBase + name
	for _, np := range c.GetNodePools() {
		np.SelfLink = selfLinkBase + NodePoolName(name, np.GetName())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[name] = c
	return name
}

// UpdateCluster changes the stored cluster in place, as GKE's own work does (a control-plane upgrade, a new
// maintenance policy).
func (s *Server) UpdateCluster(clusterName string, change func(*containerpb.Cluster)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[clusterName]
	if !ok {
		return fmt.Errorf("no cluster %s", clusterName)
	}
	change(c)
	return nil
}

// SetNodePool adds a copy of np to the cluster, or replaces the pool of its name.
func (s *Server) SetNodePool(clusterName string, np *containerpb.NodePool) error {
	np = proto.Clone(np).(*containerpb.NodePool)
	np.SelfLink = selfLinkBase + NodePoolName(clusterName, np.GetName())
	return s.UpdateCluster(clusterName, func(c *containerpb.Cluster) {
		i := slices.IndexFunc(c.NodePools, func(p *containerpb.NodePool) bool { return p.GetName() == np.GetName() })
		if i < 0 {
			c.NodePools = append(c.NodePools, np)
			return
		}
		c.NodePools[i] = np
	})
}

// UpdateNodePool changes a stored node pool in place: its version, status, size or settings as an upgrade moves on.
func (s *Server) UpdateNodePool(clusterName, pool string, change func(*containerpb.NodePool)) error {
	var found bool
	err := s.UpdateCluster(clusterName, func(c *containerpb.Cluster) {
		for _, np := range c.NodePools {
			if np.GetName() == pool {
				change(np)
				found = true
			}
		}
	})
	if err == nil && !found {
		err = fmt.Errorf("no node pool %s in %s", pool, clusterName)
	}
	return err
}

// DeleteNodePool removes a node pool and its upgrade information.
func (s *Server) DeleteNodePool(clusterName, pool string) error {
	err := s.UpdateCluster(clusterName, func(c *containerpb.Cluster) {
		c.NodePools = slices.DeleteFunc(c.NodePools, func(np *containerpb.NodePool) bool { return np.GetName() == pool })
	})
	s.mu.Lock()
	delete(s.upgradeInfo, NodePoolName(clusterName, pool))
	s.mu.Unlock()
	return err
}

// SetUpgradeInfo sets what FetchNodePoolUpgradeInfo answers for the node pool (by default: auto-upgrade active, no
// target version).
func (s *Server) SetUpgradeInfo(clusterName, pool string, info *containerpb.NodePoolUpgradeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgradeInfo[NodePoolName(clusterName, pool)] = proto.Clone(info).(*containerpb.NodePoolUpgradeInfo)
}

// StartNodePoolOperation records a RUNNING operation of the given type on a node pool, with the node counts GKE
// reports in its progress (NODES_DONE, NODES_TOTAL), and returns the operation's name.
func (s *Server) StartNodePoolOperation(clusterName, pool string, opType containerpb.Operation_Type, nodesTotal int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextOp++
	name := "operation-" + strconv.Itoa(1700000000000+s.nextOp) + "-sim"
	parent, _, _ := strings.Cut(clusterName, "/clusters/")
	location := parent[strings.LastIndex(parent, "/")+1:]
	s.operations = append(s.operations, &operation{parent: parent, op: &containerpb.Operation{
		Name:          name,
		Location:      location,
		OperationType: opType,
		Status:        containerpb.Operation_RUNNING,
		SelfLink:      selfLinkBase + parent + "/operations/" + name,
		TargetLink:    selfLinkBase + NodePoolName(clusterName, pool),
		StartTime:     time.Now().UTC().Format(time.RFC3339Nano),
		Progress: &containerpb.OperationProgress{Status: containerpb.Operation_RUNNING, Metrics: []*containerpb.OperationProgress_Metric{
			nodesMetric("NODES_DONE", 0), nodesMetric("NODES_TOTAL", nodesTotal),
		}},
	}})
	return name
}

func nodesMetric(name string, n int64) *containerpb.OperationProgress_Metric {
	return &containerpb.OperationProgress_Metric{Name: name, Value: &containerpb.OperationProgress_Metric_IntValue{IntValue: n}}
}

// UpdateOperation changes a recorded operation in place (its progress metrics, its status).
func (s *Server) UpdateOperation(name string, change func(*containerpb.Operation)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.operations {
		if o.op.GetName() == name {
			change(o.op)
			return nil
		}
	}
	return fmt.Errorf("no operation %s", name)
}

// SetNodesDone sets an operation's NODES_DONE progress metric.
func (s *Server) SetNodesDone(name string, done int64) error {
	return s.UpdateOperation(name, func(op *containerpb.Operation) {
		for _, m := range op.GetProgress().GetMetrics() {
			if m.GetName() == "NODES_DONE" {
				m.Value = &containerpb.OperationProgress_Metric_IntValue{IntValue: done}
			}
		}
	})
}

// FinishOperation marks an operation DONE, as GKE keeps it listed afterwards.
func (s *Server) FinishOperation(name string) error {
	return s.UpdateOperation(name, func(op *containerpb.Operation) {
		op.Status = containerpb.Operation_DONE
		op.EndTime = time.Now().UTC().Format(time.RFC3339Nano)
		if op.Progress != nil {
			op.Progress.Status = containerpb.Operation_DONE
		}
	})
}

// FailOperation ends an operation as GKE ends one that failed: DONE, with its error.
func (s *Server) FailOperation(name, message string) error {
	return s.UpdateOperation(name, func(op *containerpb.Operation) {
		op.Status = containerpb.Operation_DONE
		op.EndTime = time.Now().UTC().Format(time.RFC3339Nano)
		op.Error = status.New(codes.Internal, message).Proto()
		if op.Progress != nil {
			op.Progress.Status = containerpb.Operation_DONE
		}
	})
}

// Fail makes the next n calls of method (AnyMethod: of every method) fail with code. A negative n fails every call
// until Fail is called again; Fail(m, codes.OK, 0) ends a fault.
func (s *Server) Fail(method string, code codes.Code, n int) {
	s.FailWith(method, status.Newf(code, "simulated %s", code), n)
}

// FailWith is Fail with a status of the caller's, details included.
func (s *Server) FailWith(method string, st *status.Status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 || st.Code() == codes.OK {
		delete(s.faults, method)
		return
	}
	s.faults[method] = &fault{status: st, left: n}
}

// PermissionDenied is the status the API answers a caller without container.clusters.get (and the like).
func PermissionDenied(clusterName string) *status.Status {
	st := status.Newf(codes.PermissionDenied, "Required \"container.clusters.get\" permission(s) for %q.", clusterName)
	if detailed, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "IAM_PERMISSION_DENIED", Domain: "container.googleapis.com"}); err == nil {
		return detailed
	}
	return st
}

// ServiceDisabled is the status Google's front end answers when the Kubernetes Engine API is not enabled in the
// caller's project.
func ServiceDisabled(project string) *status.Status {
	st := status.Newf(codes.PermissionDenied, "Kubernetes Engine API has not been used in project %s before or it is disabled.", project)
	if detailed, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "SERVICE_DISABLED", Domain: "googleapis.com",
		Metadata: map[string]string{"service": "container.googleapis.com", "consumer": "projects/" + project}}); err == nil {
		return detailed
	}
	return st
}

// SetLatency makes every call from now on wait d before it is answered (or its deadline passes).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls is the number of calls of method received (AnyMethod: of all methods), failed ones included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if method == AnyMethod {
		var n int
		for _, c := range s.calls {
			n += c
		}
		return n
	}
	return s.calls[method]
}

// admit counts a call, waits out the latency, and returns the injected fault's error, if any.
func (s *Server) admit(ctx context.Context, method string) error {
	s.mu.Lock()
	s.calls[method]++
	latency := s.latency
	s.mu.Unlock()
	if latency > 0 {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(latency):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range []string{method, AnyMethod} {
		f := s.faults[key]
		if f == nil {
			continue
		}
		if f.left > 0 {
			if f.left--; f.left == 0 {
				delete(s.faults, key)
			}
		}
		return f.status.Err()
	}
	return nil
}

// api is the gRPC face of a Server: the state's own methods (UpdateCluster, DeleteNodePool, ...) share names
// with the API's.
type api struct {
	containerpb.UnimplementedClusterManagerServer
	s *Server
}

// GetCluster answers the cluster with its node pools and maintenance policy.
func (a api) GetCluster(ctx context.Context, req *containerpb.GetClusterRequest) (*containerpb.Cluster, error) {
	if err := a.s.admit(ctx, MethodGetCluster); err != nil {
		return nil, err
	}
	name := req.GetName()
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	c, ok := a.s.clusters[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Not found: %s.", name)
	}
	return proto.Clone(c).(*containerpb.Cluster), nil
}

// ListOperations answers the operations of a location (all of the project's for location "-"), finished ones
// included, oldest first.
func (a api) ListOperations(ctx context.Context, req *containerpb.ListOperationsRequest) (*containerpb.ListOperationsResponse, error) {
	if err := a.s.admit(ctx, MethodListOperations); err != nil {
		return nil, err
	}
	parent := req.GetParent()
	project, location, ok := strings.Cut(strings.TrimPrefix(parent, "projects/"), "/locations/")
	if !strings.HasPrefix(parent, "projects/") || !ok || project == "" || location == "" {
		return nil, status.Errorf(codes.InvalidArgument, "parent %q: want projects/PROJECT/locations/LOCATION", parent)
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	resp := &containerpb.ListOperationsResponse{}
	for _, o := range a.s.operations {
		if o.parent == parent || (location == "-" && strings.HasPrefix(o.parent, "projects/"+project+"/locations/")) {
			resp.Operations = append(resp.Operations, proto.Clone(o.op).(*containerpb.Operation))
		}
	}
	return resp, nil
}

// FetchNodePoolUpgradeInfo answers the upgrade information set for the pool.
func (a api) FetchNodePoolUpgradeInfo(ctx context.Context, req *containerpb.FetchNodePoolUpgradeInfoRequest) (*containerpb.NodePoolUpgradeInfo, error) {
	if err := a.s.admit(ctx, MethodFetchNodePoolUpgradeInfo); err != nil {
		return nil, err
	}
	clusterName, pool, ok := strings.Cut(req.GetName(), "/nodePools/")
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	c := a.s.clusters[clusterName]
	if !ok || c == nil || !slices.ContainsFunc(c.GetNodePools(), func(np *containerpb.NodePool) bool { return np.GetName() == pool }) {
		return nil, status.Errorf(codes.NotFound, "Not found: %s.", req.GetName())
	}
	if info, ok := a.s.upgradeInfo[req.GetName()]; ok {
		return proto.Clone(info).(*containerpb.NodePoolUpgradeInfo), nil
	}
	return &containerpb.NodePoolUpgradeInfo{AutoUpgradeStatus: []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_ACTIVE}}, nil
}

// UpdateNodePool starts an upgrade of the pool's nodes to node_version ("-": the control plane's), as GKE does: an
// UPGRADE_NODES operation on the pool, refused while another operation runs on it. The upgrade is played by the
// OnNodePoolUpgrade function; the pool's version changes when it finishes.
func (a api) UpdateNodePool(ctx context.Context, req *containerpb.UpdateNodePoolRequest) (*containerpb.Operation, error) {
	if err := a.s.admit(ctx, MethodUpdateNodePool); err != nil {
		return nil, err
	}
	clusterName, pool, ok := strings.Cut(req.GetName(), "/nodePools/")
	a.s.mu.Lock()
	c := a.s.clusters[clusterName]
	i := slices.IndexFunc(c.GetNodePools(), func(np *containerpb.NodePool) bool { return np.GetName() == pool })
	if !ok || c == nil || i < 0 {
		a.s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "Not found: %s.", req.GetName())
	}
	np := c.GetNodePools()[i]
	version := req.GetNodeVersion()
	if version == "-" {
		version = c.GetCurrentMasterVersion()
	}
	if version == "" || req.GetImageType() == "" {
		a.s.mu.Unlock()
		return nil, status.Errorf(codes.InvalidArgument, "node_version and image_type must be set (got %q, %q)", req.GetNodeVersion(), req.GetImageType())
	}
	for _, o := range a.s.operations {
		if o.op.GetTargetLink() == np.GetSelfLink() && o.op.GetStatus() != containerpb.Operation_DONE {
			a.s.mu.Unlock()
			return nil, status.Errorf(codes.FailedPrecondition, "Cluster is running incompatible operation %s.", o.op.GetName())
		}
	}
	total := int64(np.GetInitialNodeCount())
	play := a.s.onUpgrade
	a.s.mu.Unlock()
	name := a.s.StartNodePoolOperation(clusterName, pool, containerpb.Operation_UPGRADE_NODES, total)
	if play != nil {
		play(clusterName, pool, version, name)
	}
	return a.s.Operation(name), nil
}

// GetOperation answers an operation by its resource name, projects/P/locations/L/operations/O.
func (a api) GetOperation(ctx context.Context, req *containerpb.GetOperationRequest) (*containerpb.Operation, error) {
	if err := a.s.admit(ctx, MethodGetOperation); err != nil {
		return nil, err
	}
	parent, name, ok := strings.Cut(req.GetName(), "/operations/")
	if op := a.s.Operation(name); ok && op != nil && strings.HasSuffix(op.GetSelfLink(), parent+"/operations/"+name) {
		return op, nil
	}
	return nil, status.Errorf(codes.NotFound, "Not found: %s.", req.GetName())
}

// Operation is a copy of the operation of that (short) name, or nil.
func (s *Server) Operation(name string) *containerpb.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.operations {
		if o.op.GetName() == name {
			return proto.Clone(o.op).(*containerpb.Operation)
		}
	}
	return nil
}
