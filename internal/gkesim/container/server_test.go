package container

import (
	"context"
	"errors"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// start serves a simulator on loopback and returns it with the real client connected to it.
func start(t *testing.T) (*Server, *container.ClusterManagerClient) {
	t.Helper()
	sim := New()
	addr, err := sim.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	client, err := container.NewClusterManagerClient(context.Background(),
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return sim, client
}

func code(err error) codes.Code { return status.Code(err) }

func TestGetCluster(t *testing.T) {
	sim, client := start(t)
	ctx := context.Background()
	name := sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "train", CurrentMasterVersion: "1.33.5-gke.1080000",
		NodePools: []*containerpb.NodePool{{Name: "a3", Version: "1.32.9-gke.1000000"}}})
	if name != "projects/p1/locations/us-central1/clusters/train" {
		t.Errorf("resource name %s", name)
	}
	c, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if c.GetLocation() != "us-central1" || c.GetCurrentMasterVersion() != "1.33.5-gke.1080000" ||
		c.GetNodePools()[0].GetSelfLink() != "https://container.googleapis.com/v1/"+name+"/nodePools/a3" {
		t.Errorf("cluster %v", c)
	}
	if _, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: "projects/p1/locations/europe-west4/clusters/train"}); code(err) != codes.NotFound {
		t.Errorf("a cluster of another location: %v", err)
	}

	// What a caller does to its copy is not the simulator's state; the state's hooks are.
	c.NodePools = nil
	if err := sim.UpdateNodePool(name, "a3", func(np *containerpb.NodePool) { np.Status = containerpb.NodePool_RECONCILING }); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetNodePool(name, &containerpb.NodePool{Name: "l4"}); err != nil {
		t.Fatal(err)
	}
	c, _ = client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
	if len(c.GetNodePools()) != 2 || c.GetNodePools()[0].GetStatus() != containerpb.NodePool_RECONCILING {
		t.Errorf("pools %v", c.GetNodePools())
	}
	if err := sim.DeleteNodePool(name, "a3"); err != nil {
		t.Fatal(err)
	}
	c, _ = client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
	if len(c.GetNodePools()) != 1 || c.GetNodePools()[0].GetName() != "l4" {
		t.Errorf("pools after deleting a3: %v", c.GetNodePools())
	}
	if err := sim.UpdateNodePool(name, "a3", func(*containerpb.NodePool) {}); err == nil {
		t.Error("updating a deleted pool succeeds")
	}
}

func TestListOperations(t *testing.T) {
	sim, client := start(t)
	ctx := context.Background()
	train := sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "train", NodePools: []*containerpb.NodePool{{Name: "a3"}}})
	serve := sim.SetCluster("p1", "europe-west4", &containerpb.Cluster{Name: "serve", NodePools: []*containerpb.NodePool{{Name: "l4"}}})
	other := sim.SetCluster("p2", "us-central1", &containerpb.Cluster{Name: "train", NodePools: []*containerpb.NodePool{{Name: "a3"}}})
	upgrade := sim.StartNodePoolOperation(train, "a3", containerpb.Operation_UPGRADE_NODES, 8)
	sim.StartNodePoolOperation(serve, "l4", containerpb.Operation_UPGRADE_NODES, 2)
	sim.StartNodePoolOperation(other, "a3", containerpb.Operation_AUTO_REPAIR_NODES, 1)

	list := func(parent string) []*containerpb.Operation {
		t.Helper()
		resp, err := client.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: parent})
		if err != nil {
			t.Fatalf("listing %s: %v", parent, err)
		}
		return resp.GetOperations()
	}
	ops := list("projects/p1/locations/us-central1")
	if len(ops) != 1 || ops[0].GetName() != upgrade || ops[0].GetStatus() != containerpb.Operation_RUNNING ||
		ops[0].GetTargetLink() != "https://container.googleapis.com/v1/"+train+"/nodePools/a3" {
		t.Fatalf("operations of us-central1: %v", ops)
	}
	if n := len(list("projects/p1/locations/-")); n != 2 {
		t.Errorf("%d operations in all of p1's locations, want 2", n)
	}
	if _, err := client.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: "p1/us-central1"}); code(err) != codes.InvalidArgument {
		t.Errorf("a malformed parent: %v", err)
	}

	metric := func(op *containerpb.Operation, name string) int64 {
		for _, m := range op.GetProgress().GetMetrics() {
			if m.GetName() == name {
				return m.GetIntValue()
			}
		}
		return -1
	}
	if done, total := metric(ops[0], "NODES_DONE"), metric(ops[0], "NODES_TOTAL"); done != 0 || total != 8 {
		t.Errorf("progress %d/%d, want 0/8", done, total)
	}
	if err := sim.SetNodesDone(upgrade, 6); err != nil {
		t.Fatal(err)
	}
	if done := metric(list("projects/p1/locations/us-central1")[0], "NODES_DONE"); done != 6 {
		t.Errorf("NODES_DONE %d after 6 nodes, want 6", done)
	}
	if err := sim.FinishOperation(upgrade); err != nil {
		t.Fatal(err)
	}
	if op := list("projects/p1/locations/us-central1")[0]; op.GetStatus() != containerpb.Operation_DONE || op.GetEndTime() == "" {
		t.Errorf("finished operation %v", op)
	}
	if err := sim.FinishOperation("operation-none"); err == nil {
		t.Error("finishing an unknown operation succeeds")
	}
}

func TestFetchNodePoolUpgradeInfo(t *testing.T) {
	sim, client := start(t)
	ctx := context.Background()
	name := sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "train",
		NodePools: []*containerpb.NodePool{{Name: "a3"}, {Name: "l4"}}})
	fetch := func(pool string) (*containerpb.NodePoolUpgradeInfo, error) {
		return client.FetchNodePoolUpgradeInfo(ctx, &containerpb.FetchNodePoolUpgradeInfoRequest{Name: NodePoolName(name, pool)})
	}
	info, err := fetch("a3")
	if err != nil || len(info.GetAutoUpgradeStatus()) != 1 || info.GetAutoUpgradeStatus()[0] != containerpb.NodePoolUpgradeInfo_ACTIVE {
		t.Errorf("default upgrade information %v, %v", info, err)
	}
	target := "1.33.5-gke.1080000"
	sim.SetUpgradeInfo(name, "l4", &containerpb.NodePoolUpgradeInfo{PatchTargetVersion: &target,
		AutoUpgradeStatus: []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_UPGRADE_PAUSED},
		PausedReason:      []containerpb.NodePoolUpgradeInfo_AutoUpgradePausedReason{containerpb.NodePoolUpgradeInfo_MAINTENANCE_WINDOW}})
	if info, err := fetch("l4"); err != nil || info.GetPatchTargetVersion() != target || len(info.GetPausedReason()) != 1 {
		t.Errorf("upgrade information set %v, %v", info, err)
	}
	if err := sim.DeleteNodePool(name, "l4"); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch("l4"); code(err) != codes.NotFound {
		t.Errorf("a deleted pool: %v", err)
	}
}

func TestFaults(t *testing.T) {
	sim, client := start(t)
	ctx := context.Background()
	name := sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "train"})
	get := func(ctx context.Context) error {
		_, err := client.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
		return err
	}
	list := func() error {
		_, err := client.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: "projects/p1/locations/us-central1"})
		return err
	}

	// Unavailable at start, for every method: the client's default retries go through it.
	sim.Fail(AnyMethod, codes.Unavailable, 2)
	if err := get(ctx); err != nil {
		t.Errorf("GetCluster after two unavailable answers (the client retries): %v", err)
	}
	if got := sim.Calls(MethodGetCluster); got != 3 {
		t.Errorf("%d GetCluster calls, want 3", got)
	}

	// A denied method until the fault is lifted; the others answer.
	sim.FailWith(MethodGetCluster, PermissionDenied(name), -1)
	for range 2 {
		if err := get(ctx); code(err) != codes.PermissionDenied {
			t.Errorf("denied GetCluster: %v", err)
		}
	}
	if err := list(); err != nil {
		t.Errorf("ListOperations while GetCluster is denied: %v", err)
	}
	sim.FailWith(MethodGetCluster, nil, 0)
	if err := get(ctx); err != nil {
		t.Errorf("GetCluster after the fault: %v", err)
	}

	// A disabled API reads as Google's front end says it, reason and all.
	sim.FailWith(AnyMethod, ServiceDisabled("p1"), 1)
	var apiErr *apierror.APIError
	if err := list(); !errors.As(err, &apiErr) || apiErr.Reason() != "SERVICE_DISABLED" || apiErr.GRPCStatus().Code() != codes.PermissionDenied {
		t.Errorf("disabled API: %v", err)
	}
	if err := list(); err != nil {
		t.Errorf("the fault outlived its count: %v", err)
	}

	// A slow answer ends at the caller's deadline.
	sim.SetLatency(time.Hour)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := get(short); !errors.Is(err, context.DeadlineExceeded) && code(err) != codes.DeadlineExceeded {
		t.Errorf("slow GetCluster: %v", err)
	}
	sim.SetLatency(0)
	if got, want := sim.Calls(AnyMethod), sim.Calls(MethodGetCluster)+sim.Calls(MethodListOperations); got != want {
		t.Errorf("%d calls in all, want %d", got, want)
	}
}

func TestUpdateNodePool(t *testing.T) {
	sim, client := start(t)
	ctx := context.Background()
	name := sim.SetCluster("p1", "us-central1", &containerpb.Cluster{Name: "train", CurrentMasterVersion: "1.33.5-gke.1080000",
		NodePools: []*containerpb.NodePool{{Name: "a3", Version: "1.32.9-gke.1000000", InitialNodeCount: 4}, {Name: "l4"}}})
	type played struct{ pool, version, operation string }
	var plays []played
	sim.OnNodePoolUpgrade(func(clusterName, pool, version, operation string) {
		if clusterName != name {
			t.Errorf("upgrade played for cluster %s", clusterName)
		}
		plays = append(plays, played{pool, version, operation})
	})
	update := func(pool, version, image string) (*containerpb.Operation, error) {
		return client.UpdateNodePool(ctx, &containerpb.UpdateNodePoolRequest{Name: name + "/nodePools/" + pool, NodeVersion: version, ImageType: image})
	}
	getOp := func(parent, op string) (*containerpb.Operation, error) {
		return client.GetOperation(ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op})
	}

	// "-" is the control plane's version; the operation runs on the pool until the player ends it.
	op, err := update("a3", "-", "COS_CONTAINERD")
	if err != nil {
		t.Fatal(err)
	}
	if op.GetOperationType() != containerpb.Operation_UPGRADE_NODES || op.GetStatus() != containerpb.Operation_RUNNING ||
		op.GetTargetLink() != "https://container.googleapis.com/v1/"+name+"/nodePools/a3" {
		t.Errorf("operation %v", op)
	}
	if len(plays) != 1 || plays[0] != (played{"a3", "1.33.5-gke.1080000", op.GetName()}) {
		t.Errorf("played %v, want one upgrade of a3 to the control plane's version by %s", plays, op.GetName())
	}
	if got, err := getOp("projects/p1/locations/us-central1", op.GetName()); err != nil || got.GetStatus() != containerpb.Operation_RUNNING {
		t.Errorf("GetOperation by its resource name: %v, %v", got, err)
	}
	if _, err := getOp("projects/p1/locations/europe-west4", op.GetName()); code(err) != codes.NotFound {
		t.Errorf("the operation read in another location: %v", err)
	}

	// GKE refuses a second operation on a pool while one runs; another pool is free.
	if _, err := update("a3", "1.33.5-gke.1080000", "COS_CONTAINERD"); code(err) != codes.FailedPrecondition {
		t.Errorf("a second upgrade while the first runs: %v, want FailedPrecondition", err)
	}
	if _, err := update("l4", "-", "COS_CONTAINERD"); err != nil {
		t.Errorf("an upgrade of another pool: %v", err)
	}

	// Bad requests are refused, and start nothing.
	for _, tc := range []struct {
		pool, version, image string
		want                 codes.Code
	}{
		{"a3", "-", "", codes.InvalidArgument},
		{"a3", "", "COS_CONTAINERD", codes.InvalidArgument},
		{"v5e", "-", "COS_CONTAINERD", codes.NotFound},
	} {
		if _, err := update(tc.pool, tc.version, tc.image); code(err) != tc.want {
			t.Errorf("UpdateNodePool(%s, %q, %q): %v, want %v", tc.pool, tc.version, tc.image, err, tc.want)
		}
	}
	if len(plays) != 2 {
		t.Errorf("%d upgrades played, want 2 (a3 and l4)", len(plays))
	}

	// A failed upgrade is DONE with its error, and frees the pool for the next request.
	if err := sim.FailOperation(op.GetName(), "node pool upgrade timed out"); err != nil {
		t.Fatal(err)
	}
	got, err := getOp("projects/p1/locations/us-central1", op.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if got.GetStatus() != containerpb.Operation_DONE || got.GetEndTime() == "" ||
		got.GetError().GetCode() != int32(codes.Internal) || got.GetError().GetMessage() != "node pool upgrade timed out" {
		t.Errorf("failed operation %v", got)
	}
	if _, err := update("a3", "-", "COS_CONTAINERD"); err != nil {
		t.Errorf("an upgrade after the failed one: %v", err)
	}

	// An upgrade refused by a fault starts nothing.
	sim.FailWith(MethodUpdateNodePool, PermissionDenied(name), 1)
	before := len(plays)
	if _, err := update("l4", "-", "COS_CONTAINERD"); code(err) != codes.PermissionDenied {
		t.Errorf("denied UpdateNodePool: %v", err)
	}
	if len(plays) != before {
		t.Error("a denied UpdateNodePool played an upgrade")
	}
}
