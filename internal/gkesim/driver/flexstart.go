package driver

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// What GKE writes on a flex-start node (design: from GKE's autoscaler code and field notes).
const (
	LabelFlexStart      = "cloud.google.com/gke-flex-start"
	LabelMaxRunDuration = "cloud.google.com/gke-max-run-duration-seconds"
	// AnnotationMachineTermination is when the VM ends, RFC 3339.
	AnnotationMachineTermination = "node.gke.io/machine-termination-datetime"
)

// flexStartEnd is when a VM of pool created at created ends: its maximum run duration later; zero when the pool
// is not flex-start.
func (d *Driver) flexStartEnd(pool *NodePool, created time.Time) time.Time {
	if pool.MaxRunDuration == 0 {
		return time.Time{}
	}
	// Before Run the story clock has no start, yet its scale is known: only a length is converted.
	return created.Add(storyClock{scale: d.sc.TimeScale}.wall(time.Duration(pool.MaxRunDuration)))
}

// vmCreation is a VM GKE creates in place of one that is gone, Ready at ready.
type vmCreation struct {
	old   *simNode
	ready time.Time
}

// advanceFlexStart deletes the flex-start VMs whose maximum run duration is over, with their pods, and creates
// the new VMs of pools that replace them once they are Ready. A VM an upgrade is replacing ends with the upgrade.
func (d *Driver) advanceFlexStart(ctx context.Context, byNode map[string][]*corev1.Pod, now time.Time) {
	for _, sn := range slices.Clone(d.nodes) {
		if sn.ends.IsZero() || now.Before(sn.ends) || d.upgrading(sn) {
			continue
		}
		sn.down()
		if !d.deleteNode(ctx, sn, byNode[sn.name]) {
			continue
		}
		d.logger.Info("flex-start VM ended: node deleted", "node", sn.name, "pool", sn.pool.Name, "replaced", sn.pool.ReplaceAtEnd)
		if sn.pool.ReplaceAtEnd {
			d.creating = append(d.creating, vmCreation{old: sn, ready: now.Add(time.Duration(d.sc.GKE.NodeCreation))})
		}
	}
	kept := d.creating[:0]
	for _, c := range d.creating {
		if now.Before(c.ready) || d.createReplacement(ctx, c.old, c.old.version, now) == nil {
			kept = append(kept, c)
		}
	}
	d.creating = kept
}
