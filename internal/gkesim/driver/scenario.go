package driver

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Scenario is a story for the simulated cluster: its node pools and workloads, and what GKE does to them when.
// Times of events are story time, played TimeScale times faster than the wall clock; the durations of GKE's own
// mechanics (GKE) are wall-clock time, so that each phase stays long enough to be scraped and alerted on.
type Scenario struct {
	Cluster Cluster `yaml:"cluster"`
	// TimeScale is story seconds per wall-clock second: 288 plays 24 h of story in 5 min. Default 1.
	TimeScale float64    `yaml:"timeScale"`
	GKE       Mechanics  `yaml:"gke"`
	NodePools []NodePool `yaml:"nodePools"`
	Workloads []Workload `yaml:"workloads"`
	Events    []Event    `yaml:"events"`
}

// Cluster names the simulated cluster as Cloud Monitoring labels its interruptions.
type Cluster struct {
	Project  string `yaml:"project"`
	Location string `yaml:"location"` // region or zone of the cluster
	Name     string `yaml:"name"`
	// Version is the GKE version the nodes' kubelets report.
	Version string `yaml:"version"`
}

// Mechanics are the wall-clock durations of what GKE and the VMs do. Zero fields take GKE's values.
type Mechanics struct {
	// MaintenanceStartDelay is how long after the window starts, or after perform-maintenance=true is set, GKE
	// marks the node ONGOING and taints it. GKE: within 60 s.
	MaintenanceStartDelay Duration `yaml:"maintenanceStartDelay"`
	// WorkloadEviction is the time workload pods get before system pods are evicted.
	WorkloadEviction Duration `yaml:"workloadEviction"`
	// SystemEviction is the time system pods get before the VM stops (state terminating).
	SystemEviction Duration `yaml:"systemEviction"`
	// HostMaintenance is how long the VM is down for the maintenance before the node is Ready again.
	HostMaintenance Duration `yaml:"hostMaintenance"`
	// PreemptionNotice is a Spot VM's warning before it stops: half for workload pods, half for system pods.
	// GKE: 30 s.
	PreemptionNotice Duration `yaml:"preemptionNotice"`
	// SpotReplacement is how long a preempted Spot node is down before its replacement VM is Ready.
	SpotReplacement Duration `yaml:"spotReplacement"`
	// PodShutdown is how long a deleted pod takes to stop (never beyond its grace period): the kubelet's part.
	PodShutdown Duration `yaml:"podShutdown"`
	// FailureRepair is how long the VM is down for a maintenance whose reasons say the hardware failed (FAILURE_*):
	// the host is repaired, not updated. HostMaintenance is for the others. Field: about 4 h.
	FailureRepair Duration `yaml:"failureRepair"`
	// ReportOperation is how long Compute Engine's report-faulty-host operation runs once GKE has evicted the pods
	// of a node labelled cloud.google.com/fault-behavior (status OperationRUNNING); the VM is then moved to a
	// healthy host, down for FailureRepair. GKE: 10-12 min.
	ReportOperation Duration `yaml:"reportOperation"`
	// Sequence is what GKE does after perform-maintenance=true: SequenceField (default) what was measured on GKE,
	// SequenceDocumented what GKE documents for a maintenance that starts (ONGOING, the termination taint,
	// evictions, terminating). A maintenance whose window starts plays the documented sequence either way.
	Sequence string `yaml:"sequence"`
	// Field times the field sequence.
	Field FieldSequence `yaml:"field"`
	// XidDetection is how long after a GPU logs an Xid GKE's GPU device plugin (node condition, Event, unhealthy
	// devices) and dcgm-exporter show it. Field: the Xid reaches the serial console in 0.06-2 s.
	XidDetection Duration `yaml:"xidDetection"`
	// XidHeartbeat is how often the device plugin refreshes the XidCriticalError condition's heartbeat. GKE: 1 min.
	XidHeartbeat Duration `yaml:"xidHeartbeat"`
	// NodeCreation is how long a node pool upgrade's new VM takes from its creation until its node is Ready.
	NodeCreation Duration `yaml:"nodeCreation"`
	// DrainTimeout is how long an upgrade keeps retrying evictions a PodDisruptionBudget refuses before it deletes
	// the old node anyway. GKE: 1 h.
	DrainTimeout Duration `yaml:"drainTimeout"`
}

// The sequences GKE plays after perform-maintenance=true.
const (
	SequenceField      = "field"
	SequenceDocumented = "documented"
)

// FieldSequence is when each step of GKE's answer to perform-maintenance=true happens, measured from the request
// (wall clock), as measured on GKE 1.35 with a4-highgpu-8g nodes: the label consumed (~4 s), passthrough and the
// announcement ONGOING (11 s), the window start rewritten to now and can_reschedule false (21 s), the
// maintenance-window-started taint (33 s) with the node still Ready, NotReady (41 min); then the repair
// (Mechanics.FailureRepair or HostMaintenance) until the node is Ready and everything is cleared.
type FieldSequence struct {
	LabelConsumed      Duration `yaml:"labelConsumed"`
	Passthrough        Duration `yaml:"passthrough"`
	WindowRewritten    Duration `yaml:"windowRewritten"`
	WindowStartedTaint Duration `yaml:"windowStartedTaint"`
	NotReady           Duration `yaml:"notReady"`
}

// steps are the field sequence's times in the order GKE takes them.
func (f FieldSequence) steps() []struct {
	key string
	at  Duration
} {
	return []struct {
		key string
		at  Duration
	}{{"labelConsumed", f.LabelConsumed}, {"passthrough", f.Passthrough}, {"windowRewritten", f.WindowRewritten},
		{"windowStartedTaint", f.WindowStartedTaint}, {"notReady", f.NotReady}}
}

// GKE's values of the mechanics where documented, else typical ones.
var defaultMechanics = Mechanics{
	MaintenanceStartDelay: Duration(60 * time.Second),
	WorkloadEviction:      Duration(30 * time.Second),
	SystemEviction:        Duration(30 * time.Second),
	HostMaintenance:       Duration(5 * time.Minute),
	PreemptionNotice:      Duration(30 * time.Second),
	SpotReplacement:       Duration(2 * time.Minute),
	PodShutdown:           Duration(5 * time.Second),
	FailureRepair:         Duration(4*time.Hour + 10*time.Minute),
	ReportOperation:       Duration(11 * time.Minute),
	Sequence:              SequenceField,
	XidDetection:          Duration(time.Second),
	XidHeartbeat:          Duration(time.Minute),
	NodeCreation:          Duration(90 * time.Second),
	DrainTimeout:          Duration(time.Hour),
	Field: FieldSequence{
		LabelConsumed:      Duration(4 * time.Second),
		Passthrough:        Duration(11 * time.Second),
		WindowRewritten:    Duration(21 * time.Second),
		WindowStartedTaint: Duration(33 * time.Second),
		NotReady:           Duration(41 * time.Minute),
	},
}

// NodePool is a GKE node pool. A pool with a TPU and more than one node is a multi-host TPU slice: GKE maintains
// it as a whole.
type NodePool struct {
	Name        string `yaml:"name"`
	MachineType string `yaml:"machineType"`
	// Zone defaults to zone a of the cluster's region.
	Zone  string `yaml:"zone"`
	Nodes int    `yaml:"nodes"`
	// Accelerator is the GPU type (label cloud.google.com/gke-accelerator), AcceleratorCount the GPUs per node.
	Accelerator      string `yaml:"accelerator"`
	AcceleratorCount int    `yaml:"acceleratorCount"`
	TPU              *TPU   `yaml:"tpu"`
	Spot             bool   `yaml:"spot"`
	// Topology places the nodes in the physical topology GKE labels reservation-bound VMs with
	// (cloud.google.com/gce-topology-block, -subblock, -host); without it the nodes carry none of these labels.
	Topology *Topology `yaml:"topology"`
	// MaxRunDuration makes a flex-start pool (NodeConfig.max_run_duration, story time, GKE: at most 168h): each VM
	// is deleted that long after its creation, its end on the node as annotation
	// node.gke.io/machine-termination-datetime, with labels cloud.google.com/gke-flex-start=true and
	// cloud.google.com/gke-max-run-duration-seconds.
	MaxRunDuration Duration `yaml:"maxRunDuration"`
	// ReplaceAtEnd: GKE creates a new VM in place of a flex-start VM that ended (the workloads still want the
	// node), Ready after Mechanics.NodeCreation; without it the pool has one node fewer from then on.
	ReplaceAtEnd bool `yaml:"replaceAtEnd"`
}

// maxRunDurationLimit is the longest a flex-start VM may run.
const maxRunDurationLimit = 7 * 24 * time.Hour

// Topology groups a pool's nodes by index: the first NodesPerBlock nodes share block 0, the next ones block 1, and
// so on; within a block every NodesPerSubblock nodes share a sub-block. Every node has a host of its own.
type Topology struct {
	NodesPerBlock int `yaml:"nodesPerBlock"`
	// NodesPerSubblock defaults to NodesPerBlock: one sub-block per block.
	NodesPerSubblock int `yaml:"nodesPerSubblock"`
}

// Block is the topology block of node i, or -1 when the pool has no topology.
func (p *NodePool) Block(i int) int {
	if p.Topology == nil || p.Topology.NodesPerBlock < 1 {
		return -1
	}
	return i / p.Topology.NodesPerBlock
}

// Blocks is the number of topology blocks the pool's nodes are in (0 without a topology).
func (p *NodePool) Blocks() int {
	if p.Block(0) < 0 {
		return 0
	}
	return p.Block(p.Nodes-1) + 1
}

// TPU describes a TPU node pool.
type TPU struct {
	Accelerator  string `yaml:"accelerator"` // label cloud.google.com/gke-tpu-accelerator, e.g. tpu-v5p-slice
	Topology     string `yaml:"topology"`    // label cloud.google.com/gke-tpu-topology, e.g. 2x2x2
	ChipsPerNode int    `yaml:"chipsPerNode"`
}

// MultiHostTPU tells whether the pool is a multi-host TPU slice: its topology spans more than one VM.
func (p *NodePool) MultiHostTPU() bool { return p.SliceHosts() > 1 }

// SliceHosts is the number of VMs in one TPU slice of the pool: the topology's chips over the chips per node; 0
// for pools without a TPU or with a topology that is not whole VMs.
func (p *NodePool) SliceHosts() int {
	if p.TPU == nil || p.TPU.ChipsPerNode <= 0 {
		return 0
	}
	chips, ok := topologyChips(p.TPU.Topology)
	if !ok || chips%p.TPU.ChipsPerNode != 0 {
		return 0
	}
	return chips / p.TPU.ChipsPerNode
}

// topologyChips is the product of a TPU topology's dimensions, "2x2x4" → 16.
func topologyChips(topology string) (int, bool) {
	chips := 1
	for _, dim := range strings.Split(topology, "x") {
		n, err := strconv.Atoi(dim)
		if err != nil || n < 1 || n > 64 {
			return 0, false
		}
		chips *= n
	}
	return chips, true
}

// Workload kinds.
const (
	KindDeployment = "Deployment" // Replicas pods spread over the pools' nodes
	KindJob        = "Job"        // one pod on every node of the pools, or on the nodes listed (a training job)
	KindJobSet     = "JobSet"     // a Job owned by a JobSet, one pod on every node of the pools (a slice's training)
	KindDaemonSet  = "DaemonSet"  // one pod on every node of the pools, also cordoned ones
)

// Workload is a set of pods the driver keeps running, playing the controller and the scheduler: controllers do not
// run on the simulated cluster.
type Workload struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	Kind      string `yaml:"kind"`
	// NodePools the pods run on; a DaemonSet without any runs on every node.
	NodePools []string `yaml:"nodePools"`
	Replicas  int      `yaml:"replicas"` // Deployment only
	PDB       *PDB     `yaml:"pdb"`
	// TerminationGracePeriod of the pods (default 30s).
	TerminationGracePeriod Duration `yaml:"terminationGracePeriod"`
	// Nodes are indexes into each of its pools the pods run on; none means every node (Job only).
	Nodes []int `yaml:"nodes"`
	// StartAt is when the first pods are created (story time from the start; default 0).
	StartAt Duration `yaml:"startAt"`
	// RunFor is how long each pod runs before it succeeds (story time; default forever; Job and JobSet only). The
	// Job is then complete on that node: no pod of it runs there again, even when the finished pod is deleted.
	RunFor Duration `yaml:"runFor"`
}

// PDB is a PodDisruptionBudget over a workload's pods: exactly one of its fields.
type PDB struct {
	MinAvailable   *IntOrPercent `yaml:"minAvailable"`
	MaxUnavailable *IntOrPercent `yaml:"maxUnavailable"`
}

// Event is one thing that happens at At (story time from the start): exactly one of its kinds.
type Event struct {
	At          Duration          `yaml:"at"`
	Maintenance *MaintenanceEvent `yaml:"maintenance"`
	Preemption  *PreemptionEvent  `yaml:"preemption"`
	Report      *ReportEvent      `yaml:"report"`
	GPUFault    *GPUFaultEvent    `yaml:"gpuFault"`
	Upgrade     *UpgradeEvent     `yaml:"upgrade"`
	AutoUpgrade *AutoUpgradeEvent `yaml:"autoUpgrade"`
}

// Node pool upgrade strategies, as the GKE API names them (NodePool.upgrade_settings.strategy).
const (
	StrategySurge     = "SURGE"
	StrategyBlueGreen = "BLUE_GREEN"
)

// UpgradeEvent is GKE upgrading a node pool to Version with a surge upgrade: the pool RECONCILING and an
// UPGRADE_NODES operation counting the nodes done; per node a new VM at the new version is created first (Ready
// after Mechanics.NodeCreation), then the old node is labelled operation.gke.io/type=drain, annotated
// gke-current-operation, cordoned and drained through the Eviction API, PodDisruptionBudgets respected up to
// Mechanics.DrainTimeout, and deleted. The new node takes the old one's index in the pool under a new name.
//
// With strategy BLUE_GREEN the pool goes through GKE's phases instead, shown in NodePool.update_info.blue_green_info:
// CREATING_GREEN_POOL (a new VM per node, Ready after Mechanics.NodeCreation), CORDONING_BLUE_POOL (every old node
// cordoned), DRAINING_BLUE_POOL (BlueGreen.BatchNodes old nodes at a time labelled, annotated and drained as above,
// BlueGreen.BatchSoak after each batch), NODE_POOL_SOAKING (BlueGreen.PoolSoak) and DELETING_BLUE_POOL.
type UpgradeEvent struct {
	NodePool string `yaml:"nodePool"`
	// Version is the target GKE version, e.g. 1.33.5-gke.1201000.
	Version string `yaml:"version"`
	// Strategy is SURGE (default) or BLUE_GREEN.
	Strategy string `yaml:"strategy"`
	// MaxSurge is how many nodes a surge upgrade replaces at once (default 1).
	MaxSurge int `yaml:"maxSurge"`
	// BlueGreen is a blue-green upgrade's rollout (BlueGreenSettings' standard rollout policy).
	BlueGreen BlueGreenRollout `yaml:"blueGreen"`
}

// BlueGreenRollout is how a blue-green upgrade drains the old nodes: BatchNodes at a time (default 1), BatchSoak
// after each batch, PoolSoak once all are drained before they are deleted (story times; GKE's defaults are no batch
// soak and a pool soak of one hour).
type BlueGreenRollout struct {
	BatchNodes int      `yaml:"batchNodes"`
	BatchSoak  Duration `yaml:"batchSoak"`
	PoolSoak   Duration `yaml:"poolSoak"`
}

// AutoUpgradeEvent is GKE announcing an auto-upgrade of a node pool in the GKE API: the pool's
// management.upgrade_options.auto_upgrade_start_time and FetchNodePoolUpgradeInfo's target version. The upgrade
// itself is an upgrade event of its own, so that a scenario says when it plays.
type AutoUpgradeEvent struct {
	NodePool string `yaml:"nodePool"`
	Version  string `yaml:"version"`
	// StartsIn is the time from the announcement to the upgrade's start (story time).
	StartsIn Duration `yaml:"startsIn"`
}

// GPUFaultEvent is a GPU of nodes of a GPU pool logging an Xid, as GKE and NVIDIA's tools see it in the field: GKE's
// GPU device plugin sets the node condition XidCriticalError for a critical Xid (48, 63, 64, 79, 119, 120, 123,
// 140) and records a Warning Event for every Xid; Xid 48 makes the GPU unhealthy; dcgm-exporter shows the last Xid
// of each GPU; the other GPUs log their companion Xids; GKE may announce a maintenance to repair the host hours
// later. A new boot of the node ends it all.
type GPUFaultEvent struct {
	NodePool string `yaml:"nodePool"`
	// Nodes are indexes into the pool; none (and no block) means all.
	Nodes []int `yaml:"nodes"`
	// Block, instead of nodes, is the index of one of the pool's topology blocks: all its nodes at once (an Xid
	// storm across a block).
	Block *int `yaml:"block"`
	Xid   int  `yaml:"xid"`
	// GPU is the index of the GPU that logs the Xid on each node (default 0).
	GPU int `yaml:"gpu"`
	// RowRemapFailure: the GPU's memory also fails to remap a row (dcgm-exporter's DCGM_FI_DEV_ROW_REMAP_FAILURE 1
	// until the next boot), as with a double-bit ECC error (Xid 48) or Xid 64.
	RowRemapFailure bool `yaml:"rowRemapFailure"`
	// Companions are the Xids the node's GPUs log after it. Left out: after Xid 79 what was seen in the field
	// within 4 s (Xid 154 on every GPU at 2 s, Xid 145 and 45 on the next three GPUs at 4 s), after other Xids
	// none; an empty list: none.
	Companions *[]CompanionXid `yaml:"companions"`
	// Notice is GKE's maintenance announcing the host's repair; left out, GKE announces none.
	Notice *GPUFaultNotice `yaml:"notice"`
	// Lingers is how long the fault still shows after the node's next boot (story time; default: until the device
	// plugin runs, xidDetection): the device plugin keeps the last boot's condition, and dcgm-exporter, whose host
	// engine kept its state, its last Xids. What the product must not take for a new fault.
	Lingers Duration `yaml:"lingers"`
}

// CompanionXid is an Xid GPUs of the node log after the fault.
type CompanionXid struct {
	Xid int `yaml:"xid"`
	// GPUs are the indexes of the GPUs that log it; none means all.
	GPUs []int `yaml:"gpus"`
	// After is the time from the fault (story time).
	After Duration `yaml:"after"`
}

// GPUFaultNotice is GKE announcing a GPU fault as host maintenance, as measured in the field: reasons
// FAILURE_GPU_XID and FAILURE_GPU, reschedulable, booked days out. A node that has booted again by then, or that
// has other maintenance announced, gets none.
type GPUFaultNotice struct {
	// After is the time from the fault to the announcement (story time). Field: 19 min to 5 h 36 min.
	After Duration `yaml:"after"`
	// WindowStartsIn is the time from the announcement to the window start (story time, default 168h: the field's
	// week), WindowLength the window's length (story time, default 1h).
	WindowStartsIn Duration `yaml:"windowStartsIn"`
	WindowLength   Duration `yaml:"windowLength"`
}

// ReportEvent is an operator reporting the hosts of nodes of a pool as faulty (GKE's fault-behavior label), for
// example after the GPUs logged Xid errors: through Options.Reporter when set (the demo runs report-faulty), else
// by labelling the nodes as by hand.
type ReportEvent struct {
	NodePool string `yaml:"nodePool"`
	Nodes    []int  `yaml:"nodes"` // none means all
	// Behavior is the fault behavior reported (PERFORMANCE, SDC, XID, unspecified; default unspecified).
	Behavior string `yaml:"behavior"`
}

// MaintenanceEvent is GKE scheduling host maintenance on nodes of a pool.
type MaintenanceEvent struct {
	NodePool string `yaml:"nodePool"`
	// Nodes are indexes into the pool; none means all. A multi-host TPU slice always goes as a whole.
	Nodes []int `yaml:"nodes"`
	// WindowStartsIn is the time from the event to the window start (story time).
	WindowStartsIn Duration `yaml:"windowStartsIn"`
	// WindowLength is the length of the window (story time, default 1h).
	WindowLength  Duration `yaml:"windowLength"`
	CanReschedule bool     `yaml:"canReschedule"`
	// Type is SCHEDULED (default) or UNSCHEDULED.
	Type    string   `yaml:"type"`
	Reasons []string `yaml:"reasons"`
}

// PreemptionEvent is Compute Engine preempting Spot nodes of a pool.
type PreemptionEvent struct {
	NodePool string `yaml:"nodePool"`
	Nodes    []int  `yaml:"nodes"` // none means all
}

// Duration is a Go duration string (90s, 10m, 20h).
type Duration time.Duration

// UnmarshalYAML reads a non-negative Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a non-negative duration (examples: 30s, 10m, 20h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// IntOrPercent is a count (1) or a percentage ("50%").
type IntOrPercent struct{ intstr.IntOrString }

// UnmarshalYAML reads a non-negative count or a percentage from 0% to 100%.
func (v *IntOrPercent) UnmarshalYAML(n *yaml.Node) error {
	if p, ok := strings.CutSuffix(n.Value, "%"); ok {
		if x, err := strconv.Atoi(p); err == nil && x >= 0 && x <= 100 {
			v.IntOrString = intstr.FromString(n.Value)
			return nil
		}
	} else if x, err := strconv.Atoi(n.Value); err == nil && x >= 0 {
		v.IntOrString = intstr.FromInt32(int32(x))
		return nil
	}
	return fmt.Errorf("line %d: %q is neither a count nor a percentage such as \"50%%\"", n.Line, n.Value)
}

// Load reads a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// Parse decodes a scenario strictly (unknown keys are errors), fills in defaults and validates it.
func Parse(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the scenario is empty")
		}
		return nil, err
	}
	sc.defaults()
	if err := sc.validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

func (sc *Scenario) defaults() {
	if sc.TimeScale == 0 {
		sc.TimeScale = 1
	}
	if sc.Cluster.Version == "" {
		sc.Cluster.Version = "1.33.5-gke.1162000"
	}
	m := &sc.GKE
	if m.Sequence == "" {
		m.Sequence = defaultMechanics.Sequence
	}
	for _, f := range []struct{ v, def *Duration }{
		{&m.MaintenanceStartDelay, &defaultMechanics.MaintenanceStartDelay},
		{&m.WorkloadEviction, &defaultMechanics.WorkloadEviction},
		{&m.SystemEviction, &defaultMechanics.SystemEviction},
		{&m.HostMaintenance, &defaultMechanics.HostMaintenance},
		{&m.PreemptionNotice, &defaultMechanics.PreemptionNotice},
		{&m.SpotReplacement, &defaultMechanics.SpotReplacement},
		{&m.PodShutdown, &defaultMechanics.PodShutdown},
		{&m.FailureRepair, &defaultMechanics.FailureRepair},
		{&m.ReportOperation, &defaultMechanics.ReportOperation},
		{&m.Field.LabelConsumed, &defaultMechanics.Field.LabelConsumed},
		{&m.Field.Passthrough, &defaultMechanics.Field.Passthrough},
		{&m.Field.WindowRewritten, &defaultMechanics.Field.WindowRewritten},
		{&m.Field.WindowStartedTaint, &defaultMechanics.Field.WindowStartedTaint},
		{&m.Field.NotReady, &defaultMechanics.Field.NotReady},
		{&m.XidDetection, &defaultMechanics.XidDetection},
		{&m.XidHeartbeat, &defaultMechanics.XidHeartbeat},
		{&m.NodeCreation, &defaultMechanics.NodeCreation},
		{&m.DrainTimeout, &defaultMechanics.DrainTimeout},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	for i := range sc.NodePools {
		p := &sc.NodePools[i]
		if p.Zone == "" {
			p.Zone = defaultZone(sc.Cluster.Location)
		}
		if p.Accelerator != "" && p.AcceleratorCount == 0 {
			p.AcceleratorCount = 1
		}
		if p.TPU != nil && p.TPU.ChipsPerNode == 0 {
			p.TPU.ChipsPerNode = 4
		}
		if t := p.Topology; t != nil && t.NodesPerSubblock == 0 {
			t.NodesPerSubblock = t.NodesPerBlock
		}
	}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		if w.Namespace == "" {
			w.Namespace = "default"
		}
		if w.TerminationGracePeriod == 0 {
			w.TerminationGracePeriod = Duration(30 * time.Second)
		}
	}
	for i := range sc.Events {
		if m := sc.Events[i].Maintenance; m != nil {
			if m.WindowLength == 0 {
				m.WindowLength = Duration(time.Hour)
			}
			if m.Type == "" {
				m.Type = "SCHEDULED"
			}
		}
		if u := sc.Events[i].Upgrade; u != nil {
			if u.Strategy == "" {
				u.Strategy = StrategySurge
			}
			if u.MaxSurge == 0 {
				u.MaxSurge = 1
			}
			if u.BlueGreen.BatchNodes == 0 {
				u.BlueGreen.BatchNodes = 1
			}
		}
		if f := sc.Events[i].GPUFault; f != nil {
			if f.Companions == nil {
				if p := sc.Pool(f.NodePool); p != nil {
					f.Companions = ptrTo(fieldCompanions(f.Xid, f.GPU, p.AcceleratorCount))
				}
			}
			if n := f.Notice; n != nil {
				if n.WindowStartsIn == 0 {
					n.WindowStartsIn = Duration(7 * 24 * time.Hour)
				}
				if n.WindowLength == 0 {
					n.WindowLength = Duration(time.Hour)
				}
			}
		}
	}
}

// defaultZone is zone a of a region; a zonal location is its own zone.
func defaultZone(location string) string {
	if strings.Count(location, "-") >= 2 {
		return location
	}
	return location + "-a"
}

// dnsLabel is what Kubernetes accepts as a namespace and what GKE accepts as a pool name.
var dnsLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)

func (sc *Scenario) validate() error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if sc.Cluster.Project == "" {
		fail("cluster.project", "required")
	}
	if sc.Cluster.Location == "" {
		fail("cluster.location", "required")
	}
	if !dnsLabel.MatchString(sc.Cluster.Name) {
		fail("cluster.name", "%q is not a lower-case name of letters, digits and dashes", sc.Cluster.Name)
	}
	if sc.TimeScale <= 0 {
		fail("timeScale", "%v must be positive", sc.TimeScale)
	}
	if sc.GKE.Sequence != SequenceField && sc.GKE.Sequence != SequenceDocumented {
		fail("gke.sequence", "%q is not %s or %s", sc.GKE.Sequence, SequenceField, SequenceDocumented)
	}
	steps := sc.GKE.Field.steps()
	for i := 1; i < len(steps); i++ {
		if steps[i].at < steps[i-1].at {
			fail("gke.field."+steps[i].key, "%s comes before %s (%s); GKE takes the steps in order",
				time.Duration(steps[i].at), steps[i-1].key, time.Duration(steps[i-1].at))
		}
	}
	pools := map[string]*NodePool{}
	for i := range sc.NodePools {
		p := &sc.NodePools[i]
		key := fmt.Sprintf("nodePools[%d]", i)
		switch {
		case !dnsLabel.MatchString(p.Name):
			fail(key+".name", "%q is not a lower-case name of letters, digits and dashes", p.Name)
		case pools[p.Name] != nil:
			fail(key+".name", "%q is used twice", p.Name)
		}
		pools[p.Name] = p
		if p.MachineType == "" {
			fail(key+".machineType", "required")
		}
		if p.Nodes < 1 || p.Nodes > 1000 {
			fail(key+".nodes", "%d is not from 1 to 1000", p.Nodes)
		}
		if p.Accelerator != "" && p.TPU != nil {
			fail(key, "a pool has either a GPU accelerator or a TPU, not both")
		}
		if p.TPU != nil && (p.TPU.Accelerator == "" || p.TPU.Topology == "") {
			fail(key+".tpu", "accelerator and topology are required")
		}
		// As GKE builds TPU pools: the machine type names the chips per VM, the topology is whole VMs, and a
		// multi-host slice pool has exactly the slice's VMs.
		if p.TPU != nil && p.TPU.Topology != "" {
			hosts := p.SliceHosts()
			switch {
			case !strings.HasSuffix(p.MachineType, "-"+strconv.Itoa(p.TPU.ChipsPerNode)+"t"):
				fail(key+".machineType", "%q does not end in -%dt, the chips per node", p.MachineType, p.TPU.ChipsPerNode)
			case hosts == 0:
				fail(key+".tpu.topology", "%q is not a whole number of %d-chip VMs", p.TPU.Topology, p.TPU.ChipsPerNode)
			case hosts > 1 && p.Nodes != hosts:
				fail(key+".nodes", "%d, but a %s slice of %d-chip VMs has %d", p.Nodes, p.TPU.Topology, p.TPU.ChipsPerNode, hosts)
			}
		}
	}
	for i, p := range sc.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		if time.Duration(p.MaxRunDuration) > maxRunDurationLimit {
			fail(key+".maxRunDuration", "%s is beyond GKE's limit of 7 days (168h)", time.Duration(p.MaxRunDuration))
		}
		if p.ReplaceAtEnd && p.MaxRunDuration == 0 {
			fail(key+".replaceAtEnd", "only the VMs of a flex-start pool end: set maxRunDuration")
		}
		if p.MaxRunDuration > 0 && p.Spot {
			fail(key+".maxRunDuration", "a pool is either flex-start or Spot, not both")
		}
	}
	for i := range sc.NodePools {
		t := sc.NodePools[i].Topology
		if t == nil {
			continue
		}
		key := fmt.Sprintf("nodePools[%d].topology", i)
		switch {
		case t.NodesPerBlock < 1:
			fail(key+".nodesPerBlock", "%d: a block holds at least one node", t.NodesPerBlock)
		case t.NodesPerSubblock < 1 || t.NodesPerBlock%t.NodesPerSubblock != 0:
			fail(key+".nodesPerSubblock", "%d does not divide the %d nodes of a block into whole sub-blocks",
				t.NodesPerSubblock, t.NodesPerBlock)
		}
	}
	if len(pools) == 0 {
		fail("nodePools", "at least one node pool is required")
	}
	workloads := map[string]bool{}
	for i, w := range sc.Workloads {
		key := fmt.Sprintf("workloads[%d]", i)
		if !dnsLabel.MatchString(w.Name) {
			fail(key+".name", "%q is not a lower-case name of letters, digits and dashes", w.Name)
		}
		if !dnsLabel.MatchString(w.Namespace) {
			fail(key+".namespace", "%q is not a namespace name", w.Namespace)
		}
		if workloads[w.Namespace+"/"+w.Name] {
			fail(key+".name", "%s/%s is used twice", w.Namespace, w.Name)
		}
		workloads[w.Namespace+"/"+w.Name] = true
		switch w.Kind {
		case KindDeployment:
			if w.Replicas < 1 {
				fail(key+".replicas", "a Deployment needs at least 1")
			}
		case KindJob, KindJobSet, KindDaemonSet:
			if w.Replicas != 0 {
				fail(key+".replicas", "only a Deployment has replicas; a %s runs one pod per node", w.Kind)
			}
		default:
			fail(key+".kind", "%q is not one of Deployment, Job, JobSet, DaemonSet", w.Kind)
		}
		if len(w.NodePools) == 0 && w.Kind != KindDaemonSet {
			fail(key+".nodePools", "a %s needs at least one node pool", w.Kind)
		}
		for j, name := range w.NodePools {
			if pools[name] == nil {
				fail(fmt.Sprintf("%s.nodePools[%d]", key, j), "%q is not a node pool of the scenario", name)
			}
		}
		if w.RunFor != 0 && w.Kind != KindJob && w.Kind != KindJobSet {
			fail(key+".runFor", "only the pods of a Job or JobSet complete; a %s's run until they are deleted", w.Kind)
		}
		if len(w.Nodes) > 0 && w.Kind != KindJob {
			fail(key+".nodes", "only a Job runs on chosen nodes of its pools; a %s runs on all of them", w.Kind)
		}
		listed := map[int]bool{}
		for j, n := range w.Nodes {
			if listed[n] {
				fail(fmt.Sprintf("%s.nodes[%d]", key, j), "node %d is listed twice", n)
			}
			listed[n] = true
		}
		for _, name := range w.NodePools {
			if p := pools[name]; p != nil {
				validIndexes(fail, key+".nodes", w.Nodes, p)
			}
		}
		if w.PDB != nil && (w.PDB.MinAvailable == nil) == (w.PDB.MaxUnavailable == nil) {
			fail(key+".pdb", "set exactly one of minAvailable and maxUnavailable")
		}
	}
	for i, e := range sc.Events {
		key := fmt.Sprintf("events[%d]", i)
		switch {
		case countSet(e.Maintenance != nil, e.Preemption != nil, e.Report != nil, e.GPUFault != nil, e.Upgrade != nil,
			e.AutoUpgrade != nil) != 1:
			fail(key, "set exactly one of maintenance, preemption, report, gpuFault, upgrade and autoUpgrade")
		case e.Upgrade != nil:
			validUpgrade(fail, key+".upgrade", e.Upgrade, pools[e.Upgrade.NodePool])
		case e.AutoUpgrade != nil:
			key += ".autoUpgrade"
			if pools[e.AutoUpgrade.NodePool] == nil {
				fail(key+".nodePool", "%q is not a node pool of the scenario", e.AutoUpgrade.NodePool)
			}
			validVersion(fail, key+".version", e.AutoUpgrade.Version)
		case e.GPUFault != nil:
			validGPUFault(fail, key+".gpuFault", e.GPUFault, pools[e.GPUFault.NodePool])
		case e.Report != nil:
			key += ".report"
			p := pools[e.Report.NodePool]
			if p == nil {
				fail(key+".nodePool", "%q is not a node pool of the scenario", e.Report.NodePool)
				continue
			}
			validIndexes(fail, key+".nodes", e.Report.Nodes, p)
			if _, ok := gke.ParseFaultBehavior(e.Report.Behavior); !ok {
				fail(key+".behavior", "%q is not a fault behavior (PERFORMANCE, SDC, XID, unspecified)", e.Report.Behavior)
			}
		case e.Maintenance != nil:
			m := e.Maintenance
			key += ".maintenance"
			p := pools[m.NodePool]
			if p == nil {
				fail(key+".nodePool", "%q is not a node pool of the scenario", m.NodePool)
				continue
			}
			if p.MultiHostTPU() && len(m.Nodes) > 0 {
				fail(key+".nodes", "node pool %s is a multi-host TPU slice, maintained as a whole: leave nodes out", p.Name)
			}
			validIndexes(fail, key+".nodes", m.Nodes, p)
			if m.Type != "SCHEDULED" && m.Type != "UNSCHEDULED" {
				fail(key+".type", "%q is not SCHEDULED or UNSCHEDULED", m.Type)
			}
		default:
			key += ".preemption"
			p := pools[e.Preemption.NodePool]
			if p == nil {
				fail(key+".nodePool", "%q is not a node pool of the scenario", e.Preemption.NodePool)
				continue
			}
			if !p.Spot {
				fail(key+".nodePool", "node pool %s is not a Spot pool: only Spot VMs are preempted", p.Name)
			}
			validIndexes(fail, key+".nodes", e.Preemption.Nodes, p)
		}
	}
	return errors.Join(errs...)
}

// validUpgrade checks an upgrade event against its pool (nil when the scenario has none of that name).
func validUpgrade(fail func(key, format string, args ...any), key string, u *UpgradeEvent, p *NodePool) {
	if p == nil {
		fail(key+".nodePool", "%q is not a node pool of the scenario", u.NodePool)
	}
	validVersion(fail, key+".version", u.Version)
	switch u.Strategy {
	case StrategySurge, StrategyBlueGreen:
	default:
		fail(key+".strategy", "%q is not %s or %s", u.Strategy, StrategySurge, StrategyBlueGreen)
	}
	if b := u.BlueGreen; b.BatchNodes < 0 || (p != nil && b.BatchNodes > p.Nodes) || b.BatchSoak < 0 || b.PoolSoak < 0 {
		fail(key+".blueGreen", "batchNodes %d is not from 1 to the pool's nodes, or a soak is negative", b.BatchNodes)
	}
	if u.MaxSurge < 0 || (p != nil && u.MaxSurge > p.Nodes) {
		fail(key+".maxSurge", "%d is not from 1 to the pool's nodes", u.MaxSurge)
	}
	if p != nil && p.MultiHostTPU() {
		fail(key+".nodePool", "node pool %s is a multi-host TPU slice, which GKE recreates as a whole: not simulated", p.Name)
	}
}

// gkeVersion is how GKE spells a node version: 1.33.5-gke.1162000.
var gkeVersion = regexp.MustCompile(`^1\.[0-9]+\.[0-9]+-gke\.[0-9]+$`)

func validVersion(fail func(key, format string, args ...any), key, version string) {
	if !gkeVersion.MatchString(version) {
		fail(key, "%q is not a GKE version such as 1.33.5-gke.1162000", version)
	}
}

// validGPUFault checks a gpuFault event against its pool (nil when the scenario has none of that name).
func validGPUFault(fail func(key, format string, args ...any), key string, f *GPUFaultEvent, p *NodePool) {
	switch {
	case p == nil:
		fail(key+".nodePool", "%q is not a node pool of the scenario", f.NodePool)
		return
	case p.Accelerator == "":
		fail(key+".nodePool", "node pool %s has no GPUs (accelerator)", p.Name)
		return
	}
	validIndexes(fail, key+".nodes", f.Nodes, p)
	if f.Block != nil {
		switch {
		case len(f.Nodes) > 0:
			fail(key+".block", "set nodes or block, not both")
		case p.Topology == nil:
			fail(key+".block", "node pool %s has no topology: set nodePools[].topology", p.Name)
		case *f.Block < 0 || *f.Block >= p.Blocks():
			fail(key+".block", "block %d is not in node pool %s (blocks 0 to %d)", *f.Block, p.Name, p.Blocks()-1)
		}
	}
	validXid(fail, key+".xid", f.Xid)
	validGPU := func(k string, gpu int) {
		if gpu < 0 || gpu >= p.AcceleratorCount {
			fail(k, "GPU %d is not on the nodes of pool %s (GPUs 0 to %d)", gpu, p.Name, p.AcceleratorCount-1)
		}
	}
	validGPU(key+".gpu", f.GPU)
	if f.Lingers < 0 {
		fail(key+".lingers", "%s: a fault lingers for no time or longer", time.Duration(f.Lingers))
	}
	if f.Companions != nil {
		for i, c := range *f.Companions {
			ck := fmt.Sprintf("%s.companions[%d]", key, i)
			validXid(fail, ck+".xid", c.Xid)
			for j, gpu := range c.GPUs {
				validGPU(fmt.Sprintf("%s.gpus[%d]", ck, j), gpu)
			}
		}
	}
}

// validXid accepts the Xids NVIDIA's driver logs: positive numbers (0 is dcgm-exporter's "no error").
func validXid(fail func(key, format string, args ...any), key string, xid int) {
	if xid < 1 || xid > 65535 {
		fail(key, "%d is not an Xid (a number from 1)", xid)
	}
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

func validIndexes(fail func(key, format string, args ...any), key string, indexes []int, p *NodePool) {
	for j, n := range indexes {
		if n < 0 || n >= p.Nodes {
			fail(fmt.Sprintf("%s[%d]", key, j), "node %d is not in node pool %s (nodes 0 to %d)", n, p.Name, p.Nodes-1)
		}
	}
}

// Pool returns the named node pool, or nil.
func (sc *Scenario) Pool(name string) *NodePool {
	for i := range sc.NodePools {
		if sc.NodePools[i].Name == name {
			return &sc.NodePools[i]
		}
	}
	return nil
}

// NodeName is the name of node i of a pool, shaped like GKE's: gke-CLUSTER-POOL-HASH-SUFFIX. The suffix is a
// permutation of the index, so names in a pool never collide.
func (sc *Scenario) NodeName(pool string, i int) string { return sc.nodeName(pool, i) }

// ReplacementNodeName is the name of the node that took node i's place after generation replacements (an upgrade
// each): a new suffix in the same instance group, as GKE names a surge node; generation 0 is NodeName.
func (sc *Scenario) ReplacementNodeName(pool string, i, generation int) string {
	nodes := 0
	if p := sc.Pool(pool); p != nil {
		nodes = p.Nodes
	}
	return sc.nodeName(pool, generation*nodes+i)
}

// nodeName names the slot-th VM ever created in a pool.
func (sc *Scenario) nodeName(pool string, i int) string {
	const suffixes = 36 * 36 * 36 * 36
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s", sc.Cluster.Name, pool)
	// 1000003 is prime and so coprime with 36^4: i -> suffix is one to one.
	n := (uint64(i)*1000003 + uint64(h.Sum32())) % suffixes
	suffix := strconv.FormatUint(n, 36)
	suffix = strings.Repeat("0", 4-len(suffix)) + suffix
	return fmt.Sprintf("gke-%s-%s-%08x-%s", sc.Cluster.Name, pool, h.Sum32(), suffix)
}

// NodeNames are the names of a pool's nodes, by index.
func (sc *Scenario) NodeNames(pool string) []string {
	p := sc.Pool(pool)
	if p == nil {
		return nil
	}
	names := make([]string, p.Nodes)
	for i := range names {
		names[i] = sc.NodeName(pool, i)
	}
	return names
}
