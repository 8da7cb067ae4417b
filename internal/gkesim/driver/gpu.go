package driver

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
)

// GKE's GPU device plugin (container-engine-accelerators, pkg/gpu/nvidia/health_check): the Xids that set the
// XidCriticalError condition, the one that makes its GPU unhealthy by default, and how it names its Events.
var criticalXids = map[int]bool{48: true, 63: true, 64: true, 79: true, 119: true, 120: true, 123: true, 140: true}

const (
	xidUnhealthy      = 48
	devicePluginName  = "nvidia-gpu-device-plugin"
	xidEventReason    = "XIDError"
	xidEventMessage   = "Caught XID error, XID=%d"
	failureGPUXid     = "FAILURE_GPU_XID"
	failureGPU        = "FAILURE_GPU"
	fieldCompanionXid = 79
)

// fieldCompanions are the Xids seen in the field within 4 s of an Xid 79 on one GPU of an 8-GPU node: Xid 154 on
// every GPU, Xid 145 and 45 on three other GPUs; played at 2 s and 4 s. No companions are known for other Xids.
func fieldCompanions(xid, gpu, gpus int) []CompanionXid {
	if xid != fieldCompanionXid {
		return []CompanionXid{}
	}
	var others []int
	for i := 1; i < gpus && len(others) < 3; i++ {
		others = append(others, (gpu+i)%gpus)
	}
	out := []CompanionXid{{Xid: 154, After: Duration(2 * time.Second)}}
	if len(others) > 0 {
		out = append(out, CompanionXid{Xid: 145, GPUs: others, After: Duration(4 * time.Second)},
			CompanionXid{Xid: 45, GPUs: others, After: Duration(4 * time.Second)})
	}
	return out
}

// gpuHealth is what a node's GPUs have logged in its current boot and what GKE shows of it.
type gpuHealth struct {
	// pending are Xids logged and not yet seen by the device plugin and dcgm-exporter, by time.
	pending []pendingXid
	// critical are the critical Xids seen: the condition's reason; since and heartbeat its times.
	critical         map[int]bool
	since, heartbeat time.Time
	// unhealthy are the indexes of the GPUs the device plugin marked unhealthy.
	unhealthy map[int]bool
	// notice is GKE's announcement of the repair, when it is to come.
	notice *pendingNotice
	// stale is the condition of the last boot, until the device plugin runs in this one and removes it.
	stale      *corev1.NodeCondition
	staleUntil time.Time
	// lingers is how long this boot's faults still show after the next boot (wall clock); dcgmForgetsAt is when
	// dcgm-exporter forgets the last boot's Xids.
	lingers       time.Duration
	dcgmForgetsAt time.Time
}

type pendingXid struct {
	at       time.Time
	gpu, xid int
	// rowRemapFailure: the GPU's memory failed to remap a row with this Xid.
	rowRemapFailure bool
}

type pendingNotice struct {
	at     time.Time
	notice *GPUFaultNotice
}

// bootID is the boot ID of a node's boot, shaped as the kubelet reads it from /proc/sys/kernel/random/boot_id; it
// follows from the name and boot so that a restarted driver reports the same one.
func bootID(node string, boot int) string {
	h := sha256.Sum256([]byte(node + "/boot/" + strconv.Itoa(boot)))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// down is the node's VM stopping: the kubelet stops posting Ready and the dcgm-exporter pod is gone.
func (sn *simNode) down() {
	sn.ready = false
	if sn.dcgm != nil {
		sn.dcgm.Stop()
	}
}

// up is the node's VM back in a new boot: a new boot ID; GKE's device plugin starts again, removes the condition
// of the last boot (a moment later, once it runs: detection, or as long as the fault lingers) and sees every GPU
// healthy; the dcgm-exporter pod starts afresh, its last Xids forgotten (once a lingering fault is over).
func (sn *simNode) up(now time.Time, detection time.Duration) {
	last, lingers := sn.gpu.condition(sn.bootID), sn.gpu.lingers
	sn.ready = true
	sn.boots++
	sn.bootID = bootID(sn.name, sn.boots)
	sn.gpu = gpuHealth{}
	if last != nil {
		sn.gpu.stale, sn.gpu.staleUntil = last, now.Add(max(detection, lingers))
	}
	if sn.dcgm == nil {
		return
	}
	if lingers > 0 {
		sn.dcgm.Resume()
		sn.gpu.dcgmForgetsAt = now.Add(lingers)
		return
	}
	sn.dcgm.Restart()
}

// condition is the XidCriticalError condition the device plugin shows now, set in boot, or nil.
func (g *gpuHealth) condition(boot string) *corev1.NodeCondition {
	if len(g.critical) == 0 {
		return g.stale
	}
	keys := map[string]bool{}
	for xid := range g.critical {
		keys[strconv.Itoa(xid)] = true
	}
	reason, _ := json.Marshal(keys) // a map of strings to booleans always encodes
	return &corev1.NodeCondition{Type: gke.ConditionXidCriticalError, Status: corev1.ConditionTrue, Reason: string(reason),
		Message: boot, LastTransitionTime: metav1.NewTime(g.since), LastHeartbeatTime: metav1.NewTime(g.heartbeat)}
}

// faultTargets are the nodes a gpuFault event names: a topology block's, the listed ones, or all of the pool's.
func (d *Driver) faultTargets(f *GPUFaultEvent) []*simNode {
	pool := d.sc.Pool(f.NodePool)
	if f.Block == nil {
		return d.targets(pool, f.Nodes)
	}
	var out []*simNode
	for _, sn := range d.targets(pool, nil) {
		if pool.Block(sn.index) == *f.Block {
			out = append(out, sn)
		}
	}
	return out
}

// startGPUFault makes the targets' GPUs log the fault's Xid and its companions, and books GKE's notice.
func (d *Driver) startGPUFault(index int, f *GPUFaultEvent, now time.Time) {
	detection := time.Duration(d.sc.GKE.XidDetection)
	for _, sn := range d.faultTargets(f) {
		if !sn.ready {
			d.logger.Warn("node down, GPU fault left out", "event", index, "node", sn.name)
			continue
		}
		g := &sn.gpu
		g.pending = append(g.pending, pendingXid{at: now.Add(detection), gpu: f.GPU, xid: f.Xid, rowRemapFailure: f.RowRemapFailure})
		for _, c := range *f.Companions {
			at := now.Add(d.clock.wall(time.Duration(c.After)) + detection)
			gpus := c.GPUs
			if len(gpus) == 0 {
				for gpu := range sn.pool.AcceleratorCount {
					gpus = append(gpus, gpu)
				}
			}
			for _, gpu := range gpus {
				g.pending = append(g.pending, pendingXid{at: at, gpu: gpu, xid: c.Xid})
			}
		}
		slices.SortStableFunc(g.pending, func(a, b pendingXid) int { return a.at.Compare(b.at) })
		g.lingers = max(g.lingers, d.clock.wall(time.Duration(f.Lingers)))
		if f.Notice != nil && g.notice == nil {
			g.notice = &pendingNotice{at: now.Add(d.clock.wall(time.Duration(f.Notice.After))), notice: f.Notice}
		}
		d.logger.Info("GPU fault", "node", sn.name, "pool", sn.pool.Name, "xid", f.Xid, "gpu", f.GPU,
			"companions", len(*f.Companions), "notice", f.Notice != nil)
	}
}

// advanceGPU lets the device plugin and dcgm-exporter see the Xids that are due, refreshes the condition's
// heartbeat, drops the last boot's condition once the plugin runs, and announces GKE's notice when its time comes.
func (d *Driver) advanceGPU(sn *simNode, now time.Time) {
	g := &sn.gpu
	for len(g.pending) > 0 && !now.Before(g.pending[0].at) {
		x := g.pending[0]
		g.pending = g.pending[1:]
		d.seeXid(sn, x, now)
	}
	if len(g.critical) > 0 && now.Sub(g.heartbeat) >= time.Duration(d.sc.GKE.XidHeartbeat) {
		g.heartbeat = now.Truncate(time.Second)
	}
	if g.stale != nil && !now.Before(g.staleUntil) {
		g.stale = nil
	}
	if !g.dcgmForgetsAt.IsZero() && !now.Before(g.dcgmForgetsAt) {
		g.dcgmForgetsAt = time.Time{}
		sn.dcgm.Restart()
	}
	if g.notice == nil || now.Before(g.notice.at) {
		return
	}
	n := g.notice.notice
	g.notice = nil
	if sn.maintenance != nil || sn.preemption != nil || sn.report != nil {
		d.logger.Info("GPU fault not announced: the node is already being maintained or repaired", "node", sn.name)
		return
	}
	windowStart := now.Add(d.clock.wall(time.Duration(n.WindowStartsIn))).Truncate(time.Second)
	d.scheduleMaintenance(sn, metadata.Maintenance{
		Type:              "SCHEDULED",
		Status:            "PENDING",
		CanReschedule:     true,
		WindowStart:       windowStart,
		WindowEnd:         windowStart.Add(d.clock.wall(time.Duration(n.WindowLength))),
		LatestWindowStart: windowStart,
		Reasons:           []string{failureGPUXid, failureGPU},
	})
}

// seeXid is the device plugin and dcgm-exporter seeing one Xid: a Warning Event for every Xid, the condition for a
// critical one, the GPU unhealthy for Xid 48, and the GPU's last Xid in dcgm-exporter.
func (d *Driver) seeXid(sn *simNode, x pendingXid, now time.Time) {
	if sn.dcgm != nil {
		sn.dcgm.LogXid(x.gpu, x.xid)
		if x.rowRemapFailure {
			sn.dcgm.FailRowRemap(x.gpu)
		}
	}
	if n := d.cached(sn.name); n != nil {
		d.devicePluginEvents.Eventf(n, corev1.EventTypeWarning, xidEventReason, xidEventMessage, x.xid)
	}
	g := &sn.gpu
	if criticalXids[x.xid] {
		if len(g.critical) == 0 {
			g.critical = map[int]bool{}
			g.since = now.Truncate(time.Second)
			g.heartbeat = g.since
		}
		g.critical[x.xid] = true
	}
	if x.xid == xidUnhealthy {
		if g.unhealthy == nil {
			g.unhealthy = map[int]bool{}
		}
		g.unhealthy[x.gpu] = true
	}
}

// allocatableGPUs is what the kubelet reports allocatable of nvidia.com/gpu: the GPUs the device plugin has not
// marked unhealthy.
func allocatableGPUs(sn *simNode) int64 {
	return int64(sn.pool.AcceleratorCount - len(sn.gpu.unhealthy))
}

// gpuStatusDiffers tells whether the node's status lacks what the device plugin and the kubelet say of its GPUs
// and boot: the boot ID, the XidCriticalError condition, the allocatable GPUs.
func gpuStatusDiffers(n *corev1.Node, sn *simNode) bool {
	if n.Status.NodeInfo.BootID != sn.bootID {
		return true
	}
	want, got := sn.gpu.condition(sn.bootID), findCondition(n, gke.ConditionXidCriticalError)
	if (want == nil) != (got == nil) || want != nil && (want.Reason != got.Reason || want.Message != got.Message ||
		!want.LastHeartbeatTime.Equal(&got.LastHeartbeatTime)) {
		return true
	}
	if sn.pool.Accelerator != "" {
		q, ok := n.Status.Allocatable[resourceGPU]
		return !ok || q.Value() != allocatableGPUs(sn)
	}
	return false
}

// applyGPUStatus writes the boot ID, the device plugin's condition and the allocatable GPUs into status.
func applyGPUStatus(status *corev1.NodeStatus, sn *simNode) {
	status.NodeInfo.BootID = sn.bootID
	conds := slices.DeleteFunc(status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == gke.ConditionXidCriticalError
	})
	if c := sn.gpu.condition(sn.bootID); c != nil {
		conds = append(conds, *c)
	}
	status.Conditions = conds
	if sn.pool.Accelerator != "" {
		// A node just created has no status yet in the cache.
		if status.Allocatable = status.Allocatable.DeepCopy(); status.Allocatable == nil {
			status.Allocatable = corev1.ResourceList{}
		}
		status.Allocatable[resourceGPU] = *resource.NewQuantity(allocatableGPUs(sn), resource.DecimalSI)
	}
}

func findCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
