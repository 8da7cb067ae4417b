package driver

import (
	"context"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	corev1 "k8s.io/api/core/v1"
)

// blueGreen is a blue-green upgrade going through GKE's phases: the green VMs created, the blue nodes cordoned,
// drained batch by batch, soaked, deleted.
type blueGreen struct {
	phase containerpb.NodePool_UpdateInfo_BlueGreenInfo_Phase
	// blue are the old nodes by index; green their new VMs once created.
	blue, green []*simNode
	greenReady  time.Time
	// batch are the blue nodes draining now; next is the index in blue of the next batch.
	batch []*surge
	next  int
	// soakUntil ends the soak after a batch, then the pool's soak.
	soakUntil time.Time
}

// advanceBlueGreen takes a blue-green upgrade a step on and tells whether it is done: every blue node deleted.
func (d *Driver) advanceBlueGreen(ctx context.Context, pool *NodePool, up *poolUpgrade, byNode map[string][]*corev1.Pod, now time.Time) bool {
	bg, rollout := up.blueGreen, up.event.BlueGreen
	gone := func(sn *simNode) bool { return d.byName[sn.name] != sn } // a flex-start VM that ended meanwhile
	switch bg.phase {
	case containerpb.NodePool_UpdateInfo_BlueGreenInfo_CREATING_GREEN_POOL:
		if now.Before(bg.greenReady) {
			return false
		}
		for i, old := range bg.blue {
			if bg.green[i] != nil || gone(old) {
				continue
			}
			// The VM goes: whatever maintenance was announced or is to be announced for it goes with it.
			old.maintenance, old.gpu.notice = nil, nil
			if bg.green[i] = d.createReplacement(ctx, old, up.event.Version, now); bg.green[i] == nil {
				return false
			}
		}
		d.setBlueGreenPhase(pool, up, containerpb.NodePool_UpdateInfo_BlueGreenInfo_CORDONING_BLUE_POOL)
	case containerpb.NodePool_UpdateInfo_BlueGreenInfo_CORDONING_BLUE_POOL:
		for _, old := range bg.blue {
			if !gone(old) && !d.cordon(ctx, old) {
				return false
			}
		}
		d.setBlueGreenPhase(pool, up, containerpb.NodePool_UpdateInfo_BlueGreenInfo_DRAINING_BLUE_POOL)
	case containerpb.NodePool_UpdateInfo_BlueGreenInfo_DRAINING_BLUE_POOL:
		if len(bg.batch) == 0 {
			if now.Before(bg.soakUntil) {
				return false
			}
			if bg.next >= len(bg.blue) {
				bg.soakUntil = now.Add(d.clock.wall(time.Duration(rollout.PoolSoak)))
				d.setBlueGreenPhase(pool, up, containerpb.NodePool_UpdateInfo_BlueGreenInfo_NODE_POOL_SOAKING)
				return false
			}
			end := min(bg.next+rollout.BatchNodes, len(bg.blue))
			for _, old := range bg.blue[bg.next:end] {
				bg.batch = append(bg.batch, &surge{old: old})
			}
			bg.next = end
		}
		bg.batch = slices.DeleteFunc(bg.batch, func(s *surge) bool {
			return gone(s.old) || d.drained(ctx, up, s, byNode[s.old.name], now)
		})
		if len(bg.batch) == 0 {
			bg.soakUntil = now.Add(d.clock.wall(time.Duration(rollout.BatchSoak)))
		}
	case containerpb.NodePool_UpdateInfo_BlueGreenInfo_NODE_POOL_SOAKING:
		if now.Before(bg.soakUntil) {
			return false
		}
		d.setBlueGreenPhase(pool, up, containerpb.NodePool_UpdateInfo_BlueGreenInfo_DELETING_BLUE_POOL)
	case containerpb.NodePool_UpdateInfo_BlueGreenInfo_DELETING_BLUE_POOL:
		for _, old := range bg.blue {
			if !gone(old) && !d.deleteNode(ctx, old, byNode[old.name]) {
				return false
			}
		}
		up.done = up.total
		if d.gke != nil {
			if err := d.gke.SetNodesDone(up.operation, int64(up.done)); err != nil {
				d.logger.Warn("counting the upgraded nodes", "operation", up.operation, "err", err)
			}
		}
		return true
	}
	return false
}

// setBlueGreenPhase moves a blue-green upgrade to its next phase, in the GKE API's update_info too.
func (d *Driver) setBlueGreenPhase(pool *NodePool, up *poolUpgrade, phase containerpb.NodePool_UpdateInfo_BlueGreenInfo_Phase) {
	up.blueGreen.phase = phase
	d.logger.Info("upgrade: blue-green phase", "pool", pool.Name, "phase", phase.String())
	if d.gke == nil {
		return
	}
	d.updateGKEPool(pool, func(np *containerpb.NodePool) {
		if np.UpgradeSettings == nil {
			np.UpgradeSettings = &containerpb.NodePool_UpgradeSettings{}
		}
		np.UpgradeSettings.Strategy = containerpb.NodePoolUpdateStrategy_BLUE_GREEN.Enum()
		np.UpdateInfo = &containerpb.NodePool_UpdateInfo{BlueGreenInfo: &containerpb.NodePool_UpdateInfo_BlueGreenInfo{
			Phase: phase, GreenPoolVersion: up.event.Version}}
	})
}

// cordon marks a blue node unschedulable, as GKE cordons the whole blue pool before draining any of it.
func (d *Driver) cordon(ctx context.Context, sn *simNode) bool {
	err := updateNode(ctx, d.client, sn.name, func(n *corev1.Node) bool {
		if n.Spec.Unschedulable {
			return false
		}
		n.Spec.Unschedulable = true
		return true
	})
	if err != nil {
		d.logger.Warn("upgrade: cordoning the blue node", "node", sn.name, "err", err)
		return false
	}
	return true
}
