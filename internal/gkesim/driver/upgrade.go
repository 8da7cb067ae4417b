package driver

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What GKE writes on a node it is about to drain (design: the ingress-gce constant and the annotation seen on
// upgrading nodes).
const (
	LabelGKEOperation          = "operation.gke.io/type"
	gkeOperationDrain          = "drain"
	AnnotationCurrentOperation = "gke-current-operation"
)

// evictionRetry is how often a drain retries an eviction a PodDisruptionBudget refused, as kubectl drain does.
const evictionRetry = 5 * time.Second

// poolUpgrade is a surge upgrade of one node pool in progress.
type poolUpgrade struct {
	event *UpgradeEvent
	// operation is the UPGRADE_NODES operation's name in the GKE API simulator ("" without one).
	operation string
	total     int
	done      int
	// queue are the old nodes still to be replaced, by index; surges the replacements under way.
	queue  []*simNode
	surges []*surge
	// blueGreen is a blue-green upgrade's progress; nil for a surge upgrade.
	blueGreen *blueGreen
}

// surge is one node's replacement: the new VM is created (Ready at ready), then the old node is cordoned and
// drained from drainStart and deleted once it has no pods but DaemonSets' left or the drain timed out.
type surge struct {
	old, new    *simNode
	ready       time.Time
	drainStart  time.Time
	marked      bool // the old node carries the drain label, the annotation and the cordon
	nextEvict   time.Time
	timeoutSeen bool
}

// currentOperation is the gke-current-operation annotation of a node GKE drains for an upgrade.
type currentOperation struct {
	OperationType string `json:"operation_type"`
	Operation     string `json:"operation,omitempty"`
}

// GKECluster is the scenario's cluster as the GKE API shows it at the start: every node pool at the cluster's
// version, running, surge-upgraded and auto-upgraded, on Container-Optimized OS, as GKE sets a new pool up.
func (sc *Scenario) GKECluster() *containerpb.Cluster {
	c := &containerpb.Cluster{Name: sc.Cluster.Name, CurrentMasterVersion: sc.Cluster.Version}
	for _, p := range sc.NodePools {
		c.NodePools = append(c.NodePools, &containerpb.NodePool{
			Name: p.Name, Version: sc.Cluster.Version, Status: containerpb.NodePool_RUNNING, InitialNodeCount: int32(p.Nodes),
			UpgradeSettings: &containerpb.NodePool_UpgradeSettings{MaxSurge: 1},
			Management:      &containerpb.NodeManagement{AutoUpgrade: true, AutoRepair: true},
			Config:          &containerpb.NodeConfig{MachineType: p.MachineType, ImageType: "COS_CONTAINERD"},
		})
	}
	return c
}

// startUpgrade begins a surge upgrade of the event's pool: RECONCILING with an UPGRADE_NODES operation in the GKE
// API, every node of the pool queued by index.
func (d *Driver) startUpgrade(te timedEvent, now time.Time) {
	d.beginUpgrade(te.event.Upgrade, "", now)
}

// requestedUpgrade is an upgrade the GKE API's UpdateNodePool started, for the Run goroutine to play.
type requestedUpgrade struct{ pool, version, operation string }

// requestUpgrade queues an upgrade UpdateNodePool started (called by the GKE API simulator, on its goroutine).
func (d *Driver) requestUpgrade(clusterName, pool, version, operation string) {
	if clusterName != d.clusterName {
		return
	}
	d.mu.Lock()
	d.requested = append(d.requested, requestedUpgrade{pool: pool, version: version, operation: operation})
	d.mu.Unlock()
	d.poke()
}

// startRequestedUpgrades begins the upgrades UpdateNodePool asked for since the last pass, with the pool's own
// upgrade settings (a surge of one node at a time, as GKECluster sets pools up).
func (d *Driver) startRequestedUpgrades(now time.Time) {
	d.mu.Lock()
	requested := d.requested
	d.requested = nil
	d.mu.Unlock()
	for _, r := range requested {
		if d.sc.Pool(r.pool) == nil {
			d.logger.Warn("upgrade of a node pool the scenario does not have", "pool", r.pool)
			continue
		}
		d.beginUpgrade(&UpgradeEvent{NodePool: r.pool, Version: r.version, MaxSurge: 1}, r.operation, now)
	}
}

// beginUpgrade starts u; operation is its UPGRADE_NODES operation when the GKE API started it ("" starts one).
func (d *Driver) beginUpgrade(u *UpgradeEvent, operation string, now time.Time) {
	pool := d.sc.Pool(u.NodePool)
	if d.upgrades[pool] != nil {
		d.logger.Warn("node pool already upgrading, upgrade left out", "pool", pool.Name)
		return
	}
	up := &poolUpgrade{event: u, queue: d.targets(pool, nil), operation: operation}
	up.total = len(up.queue)
	if u.Strategy == StrategyBlueGreen {
		up.blueGreen = &blueGreen{blue: up.queue, green: make([]*simNode, len(up.queue)), greenReady: now.Add(time.Duration(d.sc.GKE.NodeCreation))}
		up.queue = nil
	}
	if d.gke != nil {
		if up.operation == "" {
			up.operation = d.gke.StartNodePoolOperation(d.clusterName, pool.Name, containerpb.Operation_UPGRADE_NODES, int64(up.total))
		} else {
			d.setNodesTotal(up)
		}
		d.updateGKEPool(pool, func(np *containerpb.NodePool) { np.Status = containerpb.NodePool_RECONCILING })
	}
	if up.blueGreen != nil {
		d.setBlueGreenPhase(pool, up, containerpb.NodePool_UpdateInfo_BlueGreenInfo_CREATING_GREEN_POOL)
	}
	d.upgrades[pool] = up
	d.logger.Info("node pool upgrade started", "pool", pool.Name, "version", u.Version, "max_surge", u.MaxSurge,
		"nodes", up.total, "operation", up.operation)
}

// setNodesTotal shows the pool's node count in an operation the GKE API started without knowing it.
func (d *Driver) setNodesTotal(up *poolUpgrade) {
	if err := d.gke.UpdateOperation(up.operation, func(op *containerpb.Operation) {
		for _, m := range op.GetProgress().GetMetrics() {
			if m.GetName() == "NODES_TOTAL" {
				m.Value = &containerpb.OperationProgress_Metric_IntValue{IntValue: int64(up.total)}
			}
		}
	}); err != nil {
		d.logger.Warn("showing the upgrade's node count", "operation", up.operation, "err", err)
	}
}

// failed tells whether the upgrade's operation ended with an error (a test or a fault ends it so): GKE stops, the
// nodes not yet replaced stay as they are, and the pool is RUNNING at its old version.
func (d *Driver) failed(pool *NodePool, up *poolUpgrade) bool {
	if d.gke == nil || up.operation == "" {
		return false
	}
	op := d.gke.Operation(up.operation)
	if op.GetStatus() != containerpb.Operation_DONE || op.GetError() == nil {
		return false
	}
	d.logger.Info("node pool upgrade failed", "pool", pool.Name, "operation", up.operation, "error", op.GetError().GetMessage())
	d.updateGKEPool(pool, func(np *containerpb.NodePool) { np.Status, np.UpdateInfo = containerpb.NodePool_RUNNING, nil })
	return true
}

// announceAutoUpgrade shows an auto-upgrade to come in the GKE API: its start time and target version.
func (d *Driver) announceAutoUpgrade(a *AutoUpgradeEvent, now time.Time) {
	start := now.Add(d.clock.wall(time.Duration(a.StartsIn))).UTC().Truncate(time.Second)
	d.logger.Info("node pool auto-upgrade announced", "pool", a.NodePool, "version", a.Version, "start", start,
		"story_start", d.clock.story(start).Round(time.Minute))
	if d.gke == nil {
		return
	}
	d.updateGKEPool(d.sc.Pool(a.NodePool), func(np *containerpb.NodePool) {
		if np.Management == nil {
			np.Management = &containerpb.NodeManagement{}
		}
		np.Management.UpgradeOptions = &containerpb.AutoUpgradeOptions{AutoUpgradeStartTime: start.Format(time.RFC3339),
			Description: "Automatic upgrade to " + a.Version}
	})
	d.gke.SetUpgradeInfo(d.clusterName, a.NodePool, &containerpb.NodePoolUpgradeInfo{
		PatchTargetVersion: &a.Version,
		AutoUpgradeStatus:  []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_ACTIVE},
	})
}

func (d *Driver) updateGKEPool(pool *NodePool, change func(*containerpb.NodePool)) {
	if err := d.gke.UpdateNodePool(d.clusterName, pool.Name, change); err != nil {
		d.logger.Warn("updating the node pool in the GKE API simulator", "pool", pool.Name, "err", err)
	}
}

// advanceUpgrades moves every pool upgrade on: new replacements up to maxSurge, new nodes Ready, old nodes
// drained and deleted, and the pool at its new version once every node is done.
func (d *Driver) advanceUpgrades(ctx context.Context, byNode map[string][]*corev1.Pod, now time.Time) {
	for _, pool := range d.upgradingPools() {
		up := d.upgrades[pool]
		if d.failed(pool, up) {
			delete(d.upgrades, pool)
			continue
		}
		// A queued VM that ended meanwhile (flex-start) leaves nothing to upgrade.
		up.queue = slices.DeleteFunc(up.queue, func(sn *simNode) bool {
			if d.byName[sn.name] == sn {
				return false
			}
			up.done++
			return true
		})
		for len(up.surges) < up.event.MaxSurge && len(up.queue) > 0 && replaceable(up.queue[0]) {
			old := up.queue[0]
			up.queue = up.queue[1:]
			// The VM goes: whatever maintenance was announced or is to be announced for it goes with it.
			old.maintenance, old.gpu.notice = nil, nil
			up.surges = append(up.surges, &surge{old: old, ready: now.Add(time.Duration(d.sc.GKE.NodeCreation))})
			d.logger.Info("upgrade: creating the new node", "pool", pool.Name, "replaces", old.name)
		}
		up.surges = slices.DeleteFunc(up.surges, func(s *surge) bool { return d.advanceSurge(ctx, up, s, byNode[s.old.name], now) })
		if up.blueGreen != nil && !d.advanceBlueGreen(ctx, pool, up, byNode, now) {
			continue
		}
		if len(up.queue) > 0 || len(up.surges) > 0 {
			continue
		}
		delete(d.upgrades, pool)
		d.logger.Info("node pool upgrade done", "pool", pool.Name, "version", up.event.Version)
		if d.gke == nil {
			continue
		}
		d.updateGKEPool(pool, func(np *containerpb.NodePool) {
			np.Version, np.Status, np.UpdateInfo = up.event.Version, containerpb.NodePool_RUNNING, nil
			if o := np.GetManagement().GetUpgradeOptions(); o != nil {
				o.AutoUpgradeStartTime = ""
			}
		})
		d.gke.SetUpgradeInfo(d.clusterName, pool.Name, &containerpb.NodePoolUpgradeInfo{
			AutoUpgradeStatus: []containerpb.NodePoolUpgradeInfo_AutoUpgradeStatus{containerpb.NodePoolUpgradeInfo_ACTIVE}})
		if err := d.gke.FinishOperation(up.operation); err != nil {
			d.logger.Warn("finishing the upgrade operation", "operation", up.operation, "err", err)
		}
	}
}

// upgradingPools are the pools being upgraded, in scenario order.
func (d *Driver) upgradingPools() []*NodePool {
	var out []*NodePool
	for i := range d.sc.NodePools {
		if d.upgrades[&d.sc.NodePools[i]] != nil {
			out = append(out, &d.sc.NodePools[i])
		}
	}
	return out
}

// replaceable tells whether an upgrade may take the node now: GKE does not replace a VM that is being
// maintained, preempted or repaired, or is down; it waits.
func replaceable(sn *simNode) bool {
	busy := sn.maintenance != nil && sn.maintenance.phase != phaseScheduled
	return sn.ready && !busy && sn.preemption == nil && sn.report == nil
}

// advanceSurge takes one replacement a step on and tells whether it is complete.
func (d *Driver) advanceSurge(ctx context.Context, up *poolUpgrade, s *surge, pods []*corev1.Pod, now time.Time) bool {
	if s.new == nil {
		if now.Before(s.ready) {
			return false
		}
		s.new = d.createReplacement(ctx, s.old, up.event.Version, now)
		if s.new == nil {
			return false
		}
	}
	if !d.drained(ctx, up, s, pods, now) {
		return false
	}
	if !d.deleteNode(ctx, s.old, pods) {
		return false
	}
	up.done++
	if d.gke != nil {
		if err := d.gke.SetNodesDone(up.operation, int64(up.done)); err != nil {
			d.logger.Warn("counting the upgraded nodes", "operation", up.operation, "err", err)
		}
	}
	d.logger.Info("upgrade: old node deleted", "node", s.old.name, "new_node", s.new.name, "done", up.done, "total", up.total)
	return true
}

// drained takes the drain of s.old a step on and tells whether it is over: the node marked, evictions asked for
// again while disruption budgets refuse, until no pod but DaemonSets' is left or Mechanics.DrainTimeout passed (the
// node is then deleted with its pods).
func (d *Driver) drained(ctx context.Context, up *poolUpgrade, s *surge, pods []*corev1.Pod, now time.Time) bool {
	if !s.marked {
		s.marked, s.drainStart = d.markDrain(ctx, s.old, up.operation), now
		return false
	}
	remaining := drainable(pods)
	timedOut := now.Sub(s.drainStart) >= time.Duration(d.sc.GKE.DrainTimeout)
	if len(remaining) > 0 && !timedOut {
		if !now.Before(s.nextEvict) {
			s.nextEvict = now.Add(evictionRetry)
			d.evictForDrain(ctx, s.old, remaining)
		}
		return false
	}
	if timedOut && len(remaining) > 0 && !s.timeoutSeen {
		s.timeoutSeen = true
		d.logger.Warn("upgrade: drain timed out, node deleted with its pods", "node", s.old.name, "pods", len(remaining))
	}
	return true
}

// createReplacement registers the new VM that takes old's index: a new name, a first boot, version, Ready; the
// index's metadata server and dcgm-exporter now describe it. Nil when the API server refused.
func (d *Driver) createReplacement(ctx context.Context, old *simNode, version string, now time.Time) *simNode {
	gen := old.generation + 1
	name := d.sc.ReplacementNodeName(old.pool.Name, old.index, gen)
	sn := &simNode{name: name, pool: old.pool, index: old.index, generation: gen, version: version, ready: true,
		bootID: bootID(name, 0), meta: old.meta, dcgm: old.dcgm, ends: d.flexStartEnd(old.pool, now)}
	core := d.client.CoreV1()
	created, err := core.Nodes().Create(ctx, newNode(d.sc, sn), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = core.Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err == nil {
		created.Status = nodeStatus(d.sc, sn, true, now)
		applyGPUStatus(&created.Status, sn)
		_, err = core.Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	}
	if err != nil {
		d.logger.Warn("registering the new node", "node", name, "err", err)
		return nil
	}
	inst := old.meta.Instance()
	inst.Name, inst.ID = name, instanceID(name)
	sn.meta.Replace(inst)
	if sn.dcgm != nil {
		sn.dcgm.Replace(name)
	}
	// An old VM an upgrade replaces keeps running its pods until it is deleted, without the endpoints: they are
	// the new VM's.
	old.meta, old.dcgm = nil, nil
	d.nodes = append(d.nodes, sn)
	d.byName[name] = sn
	d.logger.Info("new node Ready", "node", name, "version", version, "replaces", old.name)
	return sn
}

// markDrain shows on the node that GKE drains it: the drain label, the current operation and the cordon.
func (d *Driver) markDrain(ctx context.Context, sn *simNode, operation string) bool {
	op, _ := json.Marshal(currentOperation{OperationType: containerpb.Operation_UPGRADE_NODES.String(), Operation: operation})
	err := updateNode(ctx, d.client, sn.name, func(n *corev1.Node) bool {
		if n.Labels[LabelGKEOperation] == gkeOperationDrain && n.Annotations[AnnotationCurrentOperation] == string(op) &&
			n.Spec.Unschedulable {
			return false
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Labels[LabelGKEOperation] = gkeOperationDrain
		n.Annotations[AnnotationCurrentOperation] = string(op)
		n.Spec.Unschedulable = true
		return true
	})
	if err != nil {
		d.logger.Warn("upgrade: cordoning the old node", "node", sn.name, "err", err)
		return false
	}
	d.logger.Info("upgrade: old node cordoned and draining", "node", sn.name)
	return true
}

// drainable are the pods a drain evicts: all but DaemonSets' (their controller tolerates the cordon) and those
// already stopped.
func drainable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if (ref == nil || ref.Kind != "DaemonSet") && !finished {
			out = append(out, pod)
		}
	}
	return out
}

// evictForDrain asks the Eviction API to evict each pod not yet stopping: the API server refuses (429) while a
// PodDisruptionBudget allows no disruption, and the drain asks again later.
func (d *Driver) evictForDrain(ctx context.Context, sn *simNode, pods []*corev1.Pod) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || d.kubelet.deleted[pod.UID] {
			continue
		}
		err := d.client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
		})
		switch {
		case err == nil:
			d.kubelet.deleted[pod.UID] = true
			d.logger.Debug("pod evicted by the upgrade", "pod", pod.Namespace+"/"+pod.Name, "node", sn.name)
		case apierrors.IsTooManyRequests(err):
			d.logger.Debug("eviction refused by a disruption budget", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			d.logger.Warn("evicting pod for the upgrade", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
}

// deleteNode deletes the old VM and its Node; pods still bound to it are removed, as the pod garbage collector
// does for pods of a node that is gone. The node is then no longer simulated.
func (d *Driver) deleteNode(ctx context.Context, sn *simNode, pods []*corev1.Pod) bool {
	err := d.client.CoreV1().Nodes().Delete(ctx, sn.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		d.logger.Warn("upgrade: deleting the old node", "node", sn.name, "err", err)
		return false
	}
	for _, pod := range pods {
		d.kubelet.finish(ctx, d, pod)
	}
	d.nodes = slices.DeleteFunc(d.nodes, func(n *simNode) bool { return n == sn })
	delete(d.byName, sn.name)
	return true
}

// upgrading tells whether an upgrade is replacing sn: it is leaving, so GKE announces nothing more on it.
func (d *Driver) upgrading(sn *simNode) bool {
	for _, up := range d.upgrades {
		for _, s := range up.surges {
			if s.old == sn {
				return true
			}
		}
		if up.blueGreen != nil && slices.Contains(up.blueGreen.blue, sn) {
			return true
		}
	}
	return false
}
