// Package config reads the actions policy file: which nodes may be disrupted, how many at a time and when, and how
// nodes are drained. Decoding is strict: an unknown key or a bad value is an error that names the key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/prometheus/common/model"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults for keys left out of the file.
const (
	DefaultDrainTimeout       = 30 * time.Minute
	DefaultEvictionRetryDelay = 5 * time.Second
	DefaultMaxUnavailable     = 1
	DefaultDrainHorizon       = 48 * time.Hour
	DefaultStartDeadline      = time.Hour
	// DefaultReportStartDeadline leaves GKE time to evict a node's pods (grace periods, PodDisruptionBudgets) before
	// it shows its first report-and-replace status.
	DefaultReportStartDeadline = 2 * time.Hour
)

// Config is the policy file.
type Config struct {
	// DryRun decides, logs, emits events and metrics, and changes nothing.
	DryRun bool `yaml:"dryRun"`
	// Paused stops new work (it waits with reason paused); work already started finishes.
	Paused bool `yaml:"paused"`
	// MaxDisruptedNodes caps disrupted nodes across the cluster; nil means no cluster-wide cap.
	MaxDisruptedNodes *IntOrPercent `yaml:"maxDisruptedNodes"`
	// OpportunisticHeadroom is the part of MaxDisruptedNodes opportunistic maintenance leaves free for due work;
	// nil: none (due work still has opportunistic work GKE has not started given back).
	OpportunisticHeadroom *IntOrPercent `yaml:"opportunisticHeadroom"`
	// Windows are when new actions may start; none means any time. Work already started continues outside them. A
	// pool's own windows replace them for that pool.
	Windows Windows `yaml:"windows"`
	// Pools are tried in order; the first whose selector matches a node governs it.
	Pools              []Pool             `yaml:"pools"`
	Drain              Drain              `yaml:"drain"`
	PerformMaintenance PerformMaintenance `yaml:"performMaintenance"`
	ReportFaultyHost   ReportFaultyHost   `yaml:"reportFaultyHost"`
	// AcceleratorResources are the extended resources whose pods keep a node busy for opportunistic maintenance
	// (default nvidia.com/gpu and google.com/tpu).
	AcceleratorResources []string `yaml:"acceleratorResources"`
	// Silences shapes the Alertmanager silences kept while work runs on a node (with --alertmanager.url).
	Silences Silences `yaml:"silences"`
	// Repair holds the cluster-wide guard rails of GPU-fault repairs; each pool's repair section has its own.
	Repair ClusterRepair `yaml:"repair"`
}

// ClusterRepair is the cluster-wide circuit breaker of GPU-fault repairs.
type ClusterRepair struct {
	// MaxPerHour is how many GPU-fault repairs the whole cluster may start in any hour, a count or a percentage of
	// its nodes (default 10%, at least 1). The one that would exceed it trips the breaker instead.
	MaxPerHour IntOrPercent `yaml:"maxPerHour"`
}

// Silences shapes the silences the leader keeps in Alertmanager for nodes it has work on.
type Silences struct {
	// Duration is one lease: a silence is extended while the work runs and lapses this long after the service
	// stops extending it (default 15m).
	Duration Duration `yaml:"duration"`
	// NodeLabels are the alert labels whose value is the node name; each gets a silence of its own, because a
	// silence's matchers must all match (default [node]; kube-prometheus also uses instance, exported_node).
	NodeLabels []string `yaml:"nodeLabels"`
	// AlertNames, when set, are the only alerts silenced; none means every alert of the node except the product's
	// own failure alerts (ProtectedAlerts).
	AlertNames []string `yaml:"alertNames"`
}

// Defaults of the silences section.
const DefaultSilenceDuration = 15 * time.Minute

// DefaultSilenceNodeLabels is the alert label that names the node in this project's and kube-prometheus' alerts.
var DefaultSilenceNodeLabels = []string{"node"}

// ProtectedAlerts are never silenced: they say the product itself needs a person.
var ProtectedAlerts = []string{"GKEDisruptionActionFailed", "GKENodeMaintenanceStuck", "GKEDisruptionActionsStalled"}

// DefaultAcceleratorResources are the accelerator resources GKE's GPU and TPU nodes expose.
var DefaultAcceleratorResources = []string{"nvidia.com/gpu", "google.com/tpu"}

// Opportunistic reports whether any pool has opportunistic maintenance.
func (c *Config) Opportunistic() bool {
	for _, p := range c.Pools {
		if p.Opportunistic != nil {
			return true
		}
	}
	return false
}

// Windows are when new work may start: weekly windows listed in the policy, or the cluster's own maintenance window
// and exclusions in the GKE API. In the file either a list of windows or the mapping {fromCluster: true}; none
// listed means any time.
type Windows struct {
	// Weekly are the windows listed.
	Weekly []Window
	// FromCluster takes the windows from the cluster's maintenance policy in the GKE API, so operators keep one
	// calendar: new work starts only while the cluster's maintenance window is open (any time when it has none) and
	// no maintenance exclusion is in force, whatever its scope. Needs the GKE API (roles/container.clusterViewer).
	FromCluster bool
}

// decodeYAML reads a list of windows, or the mapping {fromCluster: true}.
func (w *Windows) decodeYAML(d *decoder, n *yaml.Node, path string) error {
	switch {
	case isNull(n):
		return nil
	case n.Kind == yaml.SequenceNode:
		return d.decode(n, reflect.ValueOf(&w.Weekly).Elem(), path)
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch key := n.Content[i]; key.Value {
			case "days", "start", "end", "timezone":
				return fmt.Errorf("%s: line %d: a window given as a mapping; windows are a list (- start: ..., end: ...), or the mapping {fromCluster: true}",
					path, key.Line)
			}
		}
		var from struct {
			FromCluster bool `yaml:"fromCluster"`
		}
		if err := d.decodeStruct(n, reflect.ValueOf(&from).Elem(), path); err != nil {
			return err
		}
		if !d.present[path+".fromCluster"] {
			return fmt.Errorf("%s: line %d: a mapping of windows takes fromCluster (true: the cluster's maintenance window and exclusions); list weekly windows as a list",
				path, n.Line)
		}
		w.FromCluster = from.FromCluster
		return nil
	}
	return fmt.Errorf("%s: expected a list of windows or {fromCluster: true}, got %s", path, describe(n))
}

// Window is a weekly time range in a timezone. End before start runs past midnight into the next day; the days
// listed are the days the window starts on.
type Window struct {
	// Days the window opens on; none means every day.
	Days     []Weekday `yaml:"days"`
	Start    Clock     `yaml:"start"`
	End      Clock     `yaml:"end"`
	Timezone Location  `yaml:"timezone"`
}

// Pool is a set of nodes chosen by labels and the strategy that governs their disruption.
type Pool struct {
	Name         string            `yaml:"name"`
	NodeSelector map[string]string `yaml:"nodeSelector"`
	Strategy     Strategy          `yaml:"strategy"`
	// MaxUnavailable bounds the pool's disrupted nodes (rolling only; default 1).
	MaxUnavailable IntOrPercent `yaml:"maxUnavailable"`
	// MinAvailable is how many of the pool's nodes must stay undisrupted (rolling only; nil means no minimum).
	MinAvailable *IntOrPercent `yaml:"minAvailable"`
	// Opportunistic, when set, lets the service itself start reschedulable maintenance on idle nodes of the pool.
	Opportunistic *Opportunistic `yaml:"opportunistic"`
	// Windows, when set, replace the top-level windows for the pool's work (repairs have their own,
	// repair.windows).
	Windows *Windows `yaml:"windows"`
	// Repair, when set, governs maintenance whose reasons say the hardware failed (FAILURE_*): acted on as soon as
	// it is announced, whatever its window, under its own budget instead of maxUnavailable and the windows.
	Repair *Repair `yaml:"repair"`
	// Upgrade, when set, has a parallel pool's node pool upgrade done in the downtime of its host maintenance.
	Upgrade *Upgrade `yaml:"upgrade"`
}

// Upgrade is a parallel pool's node pool upgrade together with its host maintenance: one downtime, one job
// restart, where GKE's auto-upgrade would be a second.
type Upgrade struct {
	// WithMaintenance: once GKE has finished the host maintenance of the pool's group, and before the nodes are
	// handed back, the GKE node pools behind the control plane's version are upgraded to it (UpdateNodePool).
	WithMaintenance bool `yaml:"withMaintenance"`
	// Deadline bounds the wait, from a node's maintenance finished to its pool upgraded: past it the work ends
	// failed and the nodes are handed back.
	Deadline Duration `yaml:"deadline"`
}

// DefaultUpgradeDeadline is upgrade.deadline left out: a surge upgrade of a few GPU nodes, PDBs respected up to
// GKE's 1 h per node, with room.
const DefaultUpgradeDeadline = 6 * time.Hour

// UpgradesWithMaintenance reports whether the pool's node pool upgrade goes with its host maintenance.
func (p *Pool) UpgradesWithMaintenance() bool { return p.Upgrade != nil && p.Upgrade.WithMaintenance }

// NeedsGKEAPI names a key of the policy that needs the GKE API (windows from the cluster), or "" when none does.
func (c *Config) NeedsGKEAPI() string {
	if key := c.fromClusterKey(); key != "" {
		return key
	}
	return c.UpgradeKey()
}

// UpgradeKey names the first pool key of the policy that upgrades node pools (upgrade.withMaintenance), or "": the
// only key that needs the role container.clusters.update.
func (c *Config) UpgradeKey() string {
	for i := range c.Pools {
		if c.Pools[i].UpgradesWithMaintenance() {
			return fmt.Sprintf("pools[%d].upgrade.withMaintenance", i)
		}
	}
	return ""
}

// WindowsOf are the windows of the pool's work other than repairs: its own, else the top-level ones.
func (c *Config) WindowsOf(p *Pool) Windows {
	if p.Windows != nil {
		return *p.Windows
	}
	return c.Windows
}

// WindowsFromCluster reports whether any windows of the policy are the cluster's (Windows.FromCluster).
func (c *Config) WindowsFromCluster() bool { return c.fromClusterKey() != "" }

// fromClusterKey names the first windows of the policy taken from the cluster, or "".
func (c *Config) fromClusterKey() string {
	if c.Windows.FromCluster {
		return "windows.fromCluster"
	}
	for i, p := range c.Pools {
		if p.Windows != nil && p.Windows.FromCluster {
			return fmt.Sprintf("pools[%d].windows.fromCluster", i)
		}
		if p.Repair != nil && p.Repair.Windows.FromCluster {
			return fmt.Sprintf("pools[%d].repair.windows.fromCluster", i)
		}
	}
	return ""
}

// Defaults of a pool's repair section, which also hold for a pool without one.
const (
	// DefaultRepairMaxConcurrent is how many of a pool's nodes may be repaired at once.
	DefaultRepairMaxConcurrent = 1
	// DefaultRepairMaxPerNode is how many automatic GPU-fault repairs one node may have in RepairNodeWindow.
	DefaultRepairMaxPerNode = 2
	// DefaultCorrelationNodes within DefaultCorrelationWindow in one topology block (or pool) hold repairs there.
	DefaultCorrelationNodes  = 3
	DefaultCorrelationWindow = 10 * time.Minute
	// RepairNodeWindow is the span repair.maxPerNode counts over.
	RepairNodeWindow = 7 * 24 * time.Hour
)

// DefaultRepairMaxPerHour is a pool's (and the cluster's) circuit breaker when repair.maxPerHour is left out: 10%,
// at least 1.
var DefaultRepairMaxPerHour = IntOrPercent{Value: 10, Percent: true}

// DefaultRepair is the repair section of a pool that has none.
func DefaultRepair() *Repair {
	return &Repair{MaxConcurrent: DefaultRepairMaxConcurrent, MaxPerHour: DefaultRepairMaxPerHour,
		MaxPerNode:  DefaultRepairMaxPerNode,
		Correlation: Correlation{Nodes: DefaultCorrelationNodes, Window: Duration(DefaultCorrelationWindow)}}
}

// RepairSettings is the pool's repair section, or the defaults when it has none.
func (p *Pool) RepairSettings() *Repair {
	if p.Repair != nil {
		return p.Repair
	}
	return DefaultRepair()
}

// Repair configures the repair of failed hardware in a pool.
type Repair struct {
	// MaxConcurrent is how many of the pool's nodes (multi-host TPU slices: slices) this service may have under
	// repair at once (default 1). The pool's minAvailable still holds.
	MaxConcurrent int `yaml:"maxConcurrent"`
	// Windows are when repairs may start; none means any time (the top-level and the pool's windows do not hold
	// back repairs).
	Windows Windows `yaml:"windows"`
	// The guard rails of GPU-fault repairs (GKENodeGPUFailed, its alerts carry the xid): MaxPerHour is the pool's
	// circuit breaker, a count or a percentage of its nodes (default 10%, at least 1): the repair that would
	// exceed it in an hour trips it, and a tripped breaker holds every repair until an operator resets it.
	MaxPerHour IntOrPercent `yaml:"maxPerHour"`
	// MaxPerNode is how many automatic repairs one node may have in 7 days (default 2); the next is handed to a
	// person.
	MaxPerNode int `yaml:"maxPerNode"`
	// Correlation holds repairs where faults cluster: a shared cause (power, cooling, a switch) is not a host's.
	Correlation Correlation `yaml:"correlation"`
}

// Correlation holds automatic repairs in a topology block (cloud.google.com/gce-topology-block), or in the pool
// where blocks are unknown, once Nodes of its nodes have had a GPU fault within Window.
type Correlation struct {
	// Nodes is how many nodes with a fault make a correlation (default 3, at least 2).
	Nodes int `yaml:"nodes"`
	// Window is how close together their faults are (default 10m).
	Window Duration `yaml:"window"`
}

// Opportunistic configures opportunistic maintenance for a pool.
type Opportunistic struct {
	// NodeIdleTime is how long no pod requesting an accelerator may have run on a node (required, > 0).
	NodeIdleTime Duration `yaml:"nodeIdleTime"`
	// MinNodes is how many of the pool's nodes (multi-host TPU slices: slices) must stay available.
	MinNodes int `yaml:"minNodes"`
	// Window is how long before the scheduled maintenance a node may be taken (required, > 0).
	Window Duration `yaml:"window"`
}

// Drain configures evictions.
type Drain struct {
	// MaxGracePeriod caps each pod's terminationGracePeriodSeconds; zero leaves pods' own periods alone.
	MaxGracePeriod Duration `yaml:"maxGracePeriod"`
	// Timeout bounds a whole drain; a drain still blocked (for example by a PodDisruptionBudget) then fails.
	Timeout Duration `yaml:"timeout"`
	// EvictionRetryDelay is the pause before retrying an eviction the API refused with 429.
	EvictionRetryDelay Duration `yaml:"evictionRetryDelay"`
	// DeleteEmptyDirData allows evicting pods with emptyDir volumes (default true: the VM's emptyDirs are lost with
	// the maintenance anyway, and GPU pods commonly mount /dev/shm as one). When false those pods stay and the rest
	// are evicted.
	DeleteEmptyDirData bool `yaml:"deleteEmptyDirData"`
	// Horizon refuses drains for maintenance further away than this: a node drained for a maintenance months out
	// would stay cordoned until then.
	Horizon Duration `yaml:"horizon"`
}

// PerformMaintenance configures the perform-maintenance action.
type PerformMaintenance struct {
	// DrainFirst drains the node before asking GKE to start maintenance.
	DrainFirst bool `yaml:"drainFirst"`
	// StartDeadline ends a request GKE has not taken up (no maintenance under way) within this long: failed with
	// reason not_started, our cordon lifted and the request withdrawn, so the slot is free again.
	StartDeadline Duration `yaml:"startDeadline"`
}

// ReportFaultyHost configures the report-faulty-host action.
type ReportFaultyHost struct {
	// StartDeadline ends a report GKE has shown no progress on (no report-and-replace-status) within this long of
	// the fault-behavior label: failed with reason not_started and the label removed (a GKE older than
	// 1.32.3-gke.1057001, or a VM GKE cannot report, ignores it), so the repair slot is free again.
	StartDeadline Duration `yaml:"startDeadline"`
}

// Load reads and validates the policy file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates a policy document, filling defaults for absent keys.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; the policy is a single document")
	}
	cfg := &Config{}
	d := &decoder{present: map[string]bool{}}
	if root.Kind != 0 { // an empty file has no node at all
		if err := d.decode(&root, reflect.ValueOf(cfg).Elem(), ""); err != nil {
			return nil, err
		}
	}
	if err := cfg.complete(d.present); err != nil {
		return nil, err
	}
	return cfg, nil
}

// complete fills defaults and checks values that are valid on their own but wrong in context.
func (c *Config) complete(present map[string]bool) error {
	if c.OpportunisticHeadroom != nil && c.MaxDisruptedNodes == nil {
		return errors.New("opportunisticHeadroom: leaves part of maxDisruptedNodes free, which is not set")
	}
	if err := completeWindows(c.Windows.Weekly, "windows", present); err != nil {
		return err
	}

	if len(c.Pools) == 0 {
		return errors.New("pools: at least one pool is required (nodes matched by no pool are refused)")
	}
	names := map[string]int{}
	for i := range c.Pools {
		p := &c.Pools[i]
		path := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" {
			return fmt.Errorf("%s.name: required", path)
		}
		if j, dup := names[p.Name]; dup {
			return fmt.Errorf("%s.name: %q is already the name of pools[%d]", path, p.Name, j)
		}
		names[p.Name] = i
		for key, value := range p.NodeSelector {
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return fmt.Errorf("%s.nodeSelector: %q is not a label key: %s", path, key, errs[0])
			}
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				return fmt.Errorf("%s.nodeSelector[%q]: %q is not a label value: %s", path, key, value, errs[0])
			}
		}
		if p.Strategy == "" {
			p.Strategy = Rolling
		}
		if o := p.Opportunistic; o != nil {
			for key, d := range map[string]Duration{"nodeIdleTime": o.NodeIdleTime, "window": o.Window} {
				if !present[path+".opportunistic."+key] {
					return fmt.Errorf("%s.opportunistic.%s: required", path, key)
				}
				if d == 0 {
					return fmt.Errorf("%s.opportunistic.%s: must be greater than 0", path, key)
				}
			}
			if o.MinNodes < 0 {
				return fmt.Errorf("%s.opportunistic.minNodes: %d is negative", path, o.MinNodes)
			}
		}
		if w := p.Windows; w != nil {
			if err := completeWindows(w.Weekly, path+".windows", present); err != nil {
				return err
			}
		}
		if r := p.Repair; r != nil {
			if err := r.complete(path+".repair", present); err != nil {
				return err
			}
		}
		if u := p.Upgrade; u != nil {
			switch {
			case u.WithMaintenance && p.Strategy != Parallel:
				return fmt.Errorf("%s.upgrade.withMaintenance: only for strategy parallel (a rolling pool's upgrade is GKE's, and host maintenance waits for it: upgrade_replaces_node)", path)
			case !present[path+".upgrade.deadline"]:
				u.Deadline = Duration(DefaultUpgradeDeadline)
			case u.Deadline <= 0:
				return fmt.Errorf("%s.upgrade.deadline: must be greater than 0 (every upgrade needs an end)", path)
			}
		}
		switch p.Strategy {
		case Parallel:
			for _, key := range []string{"maxUnavailable", "minAvailable"} {
				if present[path+"."+key] {
					return fmt.Errorf("%s.%s: not allowed with strategy parallel (the whole pool goes together)", path, key)
				}
			}
		case Rolling:
			if !present[path+".maxUnavailable"] {
				p.MaxUnavailable = IntOrPercent{Value: DefaultMaxUnavailable}
			}
			if p.MaxUnavailable.Value == 0 {
				return fmt.Errorf("%s.maxUnavailable: %s would never let a node go; remove the pool to refuse its nodes", path, p.MaxUnavailable)
			}
		}
	}

	if !present["drain.timeout"] {
		c.Drain.Timeout = Duration(DefaultDrainTimeout)
	} else if c.Drain.Timeout == 0 {
		return errors.New("drain.timeout: must be greater than 0 (drains are always bounded)")
	}
	if !present["drain.evictionRetryDelay"] {
		c.Drain.EvictionRetryDelay = Duration(DefaultEvictionRetryDelay)
	} else if c.Drain.EvictionRetryDelay == 0 {
		return errors.New("drain.evictionRetryDelay: must be greater than 0 (a zero delay hammers the API server while a PodDisruptionBudget blocks)")
	}
	if present["drain.maxGracePeriod"] && c.Drain.MaxGracePeriod < Duration(time.Second) {
		return errors.New("drain.maxGracePeriod: must be at least 1s (a zero grace period kills pods without warning)")
	}
	if c.Drain.MaxGracePeriod > 0 && c.Drain.MaxGracePeriod >= c.Drain.Timeout {
		return fmt.Errorf("drain.maxGracePeriod (%s) must be below drain.timeout (%s): a pod using its whole grace period would fail every drain",
			time.Duration(c.Drain.MaxGracePeriod), time.Duration(c.Drain.Timeout))
	}
	if !present["drain.horizon"] {
		c.Drain.Horizon = Duration(DefaultDrainHorizon)
	} else if c.Drain.Horizon <= 0 {
		return errors.New("drain.horizon: must be greater than 0")
	}
	if !present["performMaintenance.startDeadline"] {
		c.PerformMaintenance.StartDeadline = Duration(DefaultStartDeadline)
	} else if c.PerformMaintenance.StartDeadline <= 0 {
		return errors.New("performMaintenance.startDeadline: must be greater than 0 (every request needs an end)")
	}
	if !present["reportFaultyHost.startDeadline"] {
		c.ReportFaultyHost.StartDeadline = Duration(DefaultReportStartDeadline)
	} else if c.ReportFaultyHost.StartDeadline <= 0 {
		return errors.New("reportFaultyHost.startDeadline: must be greater than 0 (every report needs an end)")
	}
	if !present["acceleratorResources"] {
		c.AcceleratorResources = DefaultAcceleratorResources
	} else if len(c.AcceleratorResources) == 0 {
		// No resource would keep a node busy: every GPU/TPU node would look idle to opportunistic maintenance.
		return fmt.Errorf("acceleratorResources: empty; list the resources whose pods keep a node busy, or leave the key out for %v",
			DefaultAcceleratorResources)
	}
	for i, r := range c.AcceleratorResources {
		if errs := validation.IsQualifiedName(r); len(errs) > 0 {
			return fmt.Errorf("acceleratorResources[%d]: %q is not a resource name: %s", i, r, errs[0])
		}
	}
	if !present["drain.deleteEmptyDirData"] {
		c.Drain.DeleteEmptyDirData = true
	}
	if !present["repair.maxPerHour"] {
		c.Repair.MaxPerHour = DefaultRepairMaxPerHour
	} else if c.Repair.MaxPerHour.Value == 0 {
		return fmt.Errorf("repair.maxPerHour: %s would hold every GPU-fault repair; leave the key out for %s", c.Repair.MaxPerHour, DefaultRepairMaxPerHour)
	}
	return c.Silences.complete(present)
}

// complete fills a pool's repair defaults and checks its values; path is the section's key.
func (r *Repair) complete(path string, present map[string]bool) error {
	if !present[path+".maxConcurrent"] {
		r.MaxConcurrent = DefaultRepairMaxConcurrent
	} else if r.MaxConcurrent < 1 {
		return fmt.Errorf("%s.maxConcurrent: %d would never repair a node; remove repair to handle failures as planned maintenance", path, r.MaxConcurrent)
	}
	if err := completeWindows(r.Windows.Weekly, path+".windows", present); err != nil {
		return err
	}
	if !present[path+".maxPerHour"] {
		r.MaxPerHour = DefaultRepairMaxPerHour
	} else if r.MaxPerHour.Value == 0 {
		return fmt.Errorf("%s.maxPerHour: %s would hold every GPU-fault repair; leave the key out for %s", path, r.MaxPerHour, DefaultRepairMaxPerHour)
	}
	if !present[path+".maxPerNode"] {
		r.MaxPerNode = DefaultRepairMaxPerNode
	} else if r.MaxPerNode < 1 {
		return fmt.Errorf("%s.maxPerNode: %d would hand every GPU fault to a person; leave the key out for %d", path, r.MaxPerNode, DefaultRepairMaxPerNode)
	}
	if !present[path+".correlation.nodes"] {
		r.Correlation.Nodes = DefaultCorrelationNodes
	} else if r.Correlation.Nodes < 2 {
		return fmt.Errorf("%s.correlation.nodes: %d; a correlation takes at least 2 nodes", path, r.Correlation.Nodes)
	}
	if !present[path+".correlation.window"] {
		r.Correlation.Window = Duration(DefaultCorrelationWindow)
	} else if r.Correlation.Window <= 0 {
		return fmt.Errorf("%s.correlation.window: must be greater than 0", path)
	}
	return nil
}

func (s *Silences) complete(present map[string]bool) error {
	if !present["silences.duration"] {
		s.Duration = Duration(DefaultSilenceDuration)
	} else if s.Duration < Duration(10*time.Second) {
		return errors.New("silences.duration: must be at least 10s (each lease is extended well before it ends)")
	}
	if !present["silences.nodeLabels"] {
		s.NodeLabels = DefaultSilenceNodeLabels
	} else if len(s.NodeLabels) == 0 {
		return fmt.Errorf("silences.nodeLabels: empty; list the alert labels that name the node, or leave the key out for %v", DefaultSilenceNodeLabels)
	}
	for i, l := range s.NodeLabels {
		if !model.LegacyValidation.IsValidLabelName(l) || l == model.AlertNameLabel {
			return fmt.Errorf("silences.nodeLabels[%d]: %q is not a label that can name a node", i, l)
		}
	}
	for i, name := range s.AlertNames {
		if name == "" {
			return fmt.Errorf("silences.alertNames[%d]: empty", i)
		}
		if slices.Contains(ProtectedAlerts, name) {
			return fmt.Errorf("silences.alertNames[%d]: %s is never silenced: it says the product itself needs a person", i, name)
		}
	}
	return nil
}

// completeWindows checks the windows listed under path and fills in their default timezone, UTC.
func completeWindows(windows []Window, path string, present map[string]bool) error {
	for i, w := range windows {
		path := fmt.Sprintf("%s[%d]", path, i)
		for _, key := range []string{"start", "end"} {
			if !present[path+"."+key] {
				return fmt.Errorf("%s.%s: required", path, key)
			}
		}
		if w.Start == 24*60 {
			return fmt.Errorf("%s.start: 24:00 is only allowed as an end", path)
		}
		if w.Start == w.End {
			return fmt.Errorf("%s: start and end are both %s; use start 00:00 and end 24:00 for whole days", path, w.Start)
		}
		if w.Timezone.Location == nil {
			windows[i].Timezone.Location = time.UTC
		}
	}
	return nil
}

// MatchPool returns the first pool whose selector matches the node's labels, or nil.
func (c *Config) MatchPool(labels map[string]string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Matches(labels) {
			return &c.Pools[i]
		}
	}
	return nil
}

// Matches reports whether every selector label is on the node with the same value; an empty selector matches all.
func (p *Pool) Matches(labels map[string]string) bool {
	for k, v := range p.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
