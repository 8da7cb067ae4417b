// Package driver plays GKE on a real kube-apiserver for tests and the demo. From a scenario it registers the node
// pools' nodes and the workloads' pods, then acts as GKE does: it schedules host maintenance (node label
// cloud.google.com/scheduled-maintenance-time and the node's metadata upcoming-maintenance), starts it at the
// window or when perform-maintenance=true is set on a node whose maintenance can be rescheduled (ONGOING and the
// impending-node-termination taint, workload pods evicted, then system pods, terminating, VM down, all cleared),
// maintains a multi-host TPU slice as a whole, preempts Spot VMs, and records each interruption in the Cloud
// Monitoring simulator. It plays GPU faults as GKE's GPU device plugin reports them (the XidCriticalError condition
// with the node's boot ID, XIDError Events, unhealthy GPUs), serves each GPU node's dcgm-exporter, announces the
// repair as GKE did in the field, and gives a node a new boot ID each time its VM comes back. It plays surge
// upgrades of node pools (a new node first, then the old one cordoned, drained through the Eviction API and deleted)
// and shows them in the GKE API simulator, and ends flex-start VMs at their maximum run duration. A node an upgrade
// or a flex-start end replaces keeps its index in the pool under a new name, with the index's metadata server and
// dcgm-exporter.
//
// No controllers run on the simulated cluster, so the driver also plays the kubelet (pod status, Job pods that
// succeed after their runFor, finishing deleted pods, node Ready), the workload controllers and scheduler (it
// creates the workloads' pods from their startAt on nodes that can take them, recreates deleted ones, and records a
// Job's completions in its status, never running it again where it succeeded) and the disruption controller
// (PodDisruptionBudget status, which the eviction API depends on).
package driver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/dcgm"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
)

// Options configure a Driver.
type Options struct {
	Client   kubernetes.Interface
	Scenario *Scenario
	// Monitoring receives the interruptions; nil records none.
	Monitoring *monitoring.Server
	// Tick is how often the driver acts without a change on the API server (default 100ms).
	Tick time.Duration
	// Reporter, when set, plays the operator of the scenario's report events (the demo: report-faulty); it runs
	// in the background. Nil: the driver labels the nodes itself, as an operator would by hand.
	Reporter func(ctx context.Context, node string, behavior gke.FaultBehavior) error
	// GKE is the GKE API simulator holding the scenario's cluster (SetCluster with Scenario.GKECluster), in which the
	// driver shows node pool upgrades; nil shows them nowhere.
	GKE *container.Server
	// Begin, when set, holds the story until it is closed: the cluster is registered (Registered) and waits, its
	// nodes Ready, for whoever watches it to start, and the story's clock starts at zero when Begin closes. Nil
	// starts the story as soon as the cluster is registered.
	Begin <-chan struct{}
}

// Node is a simulated node, the metadata server of its VM and, on a GPU node, its dcgm-exporter; serve each on its
// own listener.
type Node struct {
	Name     string
	Pool     string
	Metadata *metadata.Server
	DCGM     *dcgm.Exporter // nil without GPUs
}

// Driver plays one scenario. Create it with New and run it with Run.
type Driver struct {
	logger    *slog.Logger
	client    kubernetes.Interface
	sc        *Scenario
	mon       *monitoring.Server
	tick      time.Duration
	reporter  func(ctx context.Context, node string, behavior gke.FaultBehavior) error
	nodes     []*simNode
	byName    map[string]*simNode
	workloads []*simWorkload
	// registered are the nodes New made, which Nodes lists; Run changes only nodes.
	registered []Node
	gke        *container.Server
	// clusterName is the cluster's resource name in the GKE API.
	clusterName string
	upgrades    map[*NodePool]*poolUpgrade
	// creating are the VMs GKE creates in place of flex-start VMs that ended.
	creating []vmCreation

	clock      storyClock
	events     []timedEvent
	nextEvent  int
	nodeLister corelisters.NodeLister
	podLister  corelisters.PodLister
	pdbLister  policylisters.PodDisruptionBudgetLister
	kubelet    kubelet
	// devicePluginEvents records Events as GKE's GPU device plugin does.
	devicePluginEvents record.EventRecorder
	wake               chan struct{}
	// begin holds the story (Options.Begin); ready is closed once the cluster is registered, started once the
	// story runs.
	begin          <-chan struct{}
	ready, started chan struct{}

	mu     sync.Mutex
	status Status
	// requested are the upgrades the GKE API simulator's UpdateNodePool started, not yet begun.
	requested []requestedUpgrade
}

// simNode is one node: its pool, its VM's metadata server and what GKE is doing to it. Only the Run goroutine
// touches the fields below meta.
type simNode struct {
	name  string
	pool  *NodePool
	index int
	// generation counts the upgrades that replaced the node at this index: the VM's name follows from it.
	generation int
	// version is the GKE version the kubelet reports.
	version string
	// ends is when GKE deletes a flex-start VM (zero for other VMs).
	ends time.Time
	meta *metadata.Server
	dcgm *dcgm.Exporter

	// boots counts the VM's restarts; bootID is the current boot's, which the kubelet reports.
	boots  int
	bootID string
	gpu    gpuHealth

	ready       bool // the Ready condition the kubelet reports
	maintenance *maintenance
	preemption  *preemption
	// clearPerformMaintenance is set when maintenance completed, until the perform-maintenance label is gone.
	clearPerformMaintenance bool
	maintained, preempted   int
	// report is GKE's handling of a host reported as faulty, reportStatus the status it shows, clearFaultBehavior
	// set until the fault-behavior label is removed after the report ended.
	report             *faultReport
	reportStatus       gke.ReportStatus
	clearFaultBehavior bool
}

// New prepares the driver and one metadata server per node of the scenario.
func New(logger *slog.Logger, opts Options) (*Driver, error) {
	if opts.Client == nil || opts.Scenario == nil {
		return nil, fmt.Errorf("the driver needs a client and a scenario")
	}
	d := &Driver{
		logger:   logger,
		client:   opts.Client,
		sc:       opts.Scenario,
		mon:      opts.Monitoring,
		tick:     opts.Tick,
		reporter: opts.Reporter,
		gke:      opts.GKE,
		begin:    opts.Begin,
		clusterName: container.ClusterName(opts.Scenario.Cluster.Project, opts.Scenario.Cluster.Location,
			opts.Scenario.Cluster.Name),
		upgrades: map[*NodePool]*poolUpgrade{},
		byName:   map[string]*simNode{},
		wake:     make(chan struct{}, 1),
	}
	if d.tick <= 0 {
		d.tick = 100 * time.Millisecond
	}
	if d.gke != nil {
		d.gke.OnNodePoolUpgrade(d.requestUpgrade)
	}
	d.ready, d.started = make(chan struct{}), make(chan struct{})
	project := d.sc.Cluster.Project
	for p := range d.sc.NodePools {
		pool := &d.sc.NodePools[p]
		for i := range pool.Nodes {
			name := d.sc.NodeName(pool.Name, i)
			sn := &simNode{name: name, pool: pool, index: i, version: d.sc.Cluster.Version, ready: true, meta: metadata.New(metadata.Instance{
				Name:             name,
				ID:               instanceID(name),
				Zone:             pool.Zone,
				ProjectID:        project,
				NumericProjectID: instanceID(project)[:12],
			}), bootID: bootID(name, 0)}
			if pool.Accelerator != "" {
				sn.dcgm = dcgm.New(name, dcgm.ModelName(pool.Accelerator), pool.AcceleratorCount, 0)
			}
			d.nodes = append(d.nodes, sn)
			d.byName[name] = sn
			d.registered = append(d.registered, Node{Name: name, Pool: pool.Name, Metadata: sn.meta, DCGM: sn.dcgm})
		}
	}
	for i := range d.sc.Workloads {
		d.workloads = append(d.workloads, newSimWorkload(d.sc, &d.sc.Workloads[i]))
	}
	return d, nil
}

func instanceID(name string) string {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(name) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return strconv.FormatUint(h%9e18+1e18, 10)
}

// Nodes lists the simulated nodes in scenario order, as registered: call it before Run. A node an upgrade creates
// later takes over the metadata server and dcgm-exporter of the node it replaces.
func (d *Driver) Nodes() []Node { return slices.Clone(d.registered) }

// Registered is closed once the cluster is registered: its namespaces and its nodes, Ready.
func (d *Driver) Registered() <-chan struct{} { return d.ready }

// Started is closed once the cluster is registered and the story clock runs.
func (d *Driver) Started() <-chan struct{} { return d.started }

// Run registers the cluster and plays the scenario until ctx ends. It returns an error only when the cluster
// cannot be registered; later API errors are logged and the step is tried again.
func (d *Driver) Run(ctx context.Context) error {
	if err := d.register(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(d.client, 0)
	nodeInformer := factory.Core().V1().Nodes()
	podInformer := factory.Core().V1().Pods()
	pdbInformer := factory.Policy().V1().PodDisruptionBudgets()
	for _, inf := range []cache.SharedIndexInformer{nodeInformer.Informer(), podInformer.Informer(), pdbInformer.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { d.poke() },
			UpdateFunc: func(any, any) { d.poke() },
			DeleteFunc: func(any) { d.poke() },
		}); err != nil {
			return err
		}
	}
	d.nodeLister, d.podLister, d.pdbLister = nodeInformer.Lister(), podInformer.Lister(), pdbInformer.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.Informer().HasSynced, podInformer.Informer().HasSynced,
		pdbInformer.Informer().HasSynced) {
		return ctx.Err()
	}
	d.kubelet = newKubelet()
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.client.CoreV1().Events("")})
	defer events.Shutdown()
	d.devicePluginEvents = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: devicePluginName})
	close(d.ready)
	if d.begin != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-d.begin:
		}
	}
	d.clock = storyClock{start: time.Now(), scale: d.sc.TimeScale}
	d.events = timeline(d.sc, d.clock)
	d.logger.Info("story started", "nodes", len(d.nodes), "workloads", len(d.workloads), "events", len(d.events),
		"time_scale", d.sc.TimeScale)
	close(d.started)

	ticker := time.NewTicker(d.tick)
	defer ticker.Stop()
	for {
		d.pass(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-d.wake:
		}
	}
}

func (d *Driver) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// pass does everything that is due: the scenario's events, GKE's steps, the kubelet's, the controllers'.
func (d *Driver) pass(ctx context.Context, now time.Time) {
	for d.nextEvent < len(d.events) && !now.Before(d.events[d.nextEvent].at) {
		d.fire(ctx, d.events[d.nextEvent], now)
		d.nextEvent++
	}
	d.startRequestedUpgrades(now)
	for _, sn := range d.nodes {
		d.advanceMaintenance(sn, now)
		d.advancePreemption(sn, now)
		d.advanceReport(sn, now)
		d.advanceGPU(sn, now)
	}
	pods, err := d.podLister.List(labels.Everything())
	if err != nil {
		d.logger.Error("listing pods from the cache", "err", err)
		return
	}
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if d.byName[pod.Spec.NodeName] != nil {
			byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod)
		}
	}
	d.advanceUpgrades(ctx, byNode, now)
	d.advanceFlexStart(ctx, byNode, now)
	for _, sn := range d.nodes {
		d.syncNode(ctx, sn, now)
		d.syncReport(ctx, sn)
		d.evict(ctx, sn, byNode[sn.name])
		d.kubelet.sync(ctx, d, sn, byNode[sn.name], now)
	}
	d.kubelet.forget(pods)
	for _, w := range d.workloads {
		d.reconcileWorkload(ctx, w, pods, now)
		d.reconcilePDB(ctx, w, pods, now)
	}
	d.publishStatus(now)
}

// fire starts what a scenario event announces.
func (d *Driver) fire(ctx context.Context, te timedEvent, now time.Time) {
	e := te.event
	switch {
	case e.Maintenance != nil:
		m := e.Maintenance
		pool := d.sc.Pool(m.NodePool)
		windowStart := now.Add(d.clock.wall(time.Duration(m.WindowStartsIn))).Truncate(time.Second)
		md := metadata.Maintenance{
			Type:              m.Type,
			Status:            "PENDING",
			CanReschedule:     m.CanReschedule,
			WindowStart:       windowStart,
			WindowEnd:         windowStart.Add(d.clock.wall(time.Duration(m.WindowLength))),
			LatestWindowStart: windowStart,
			Reasons:           m.Reasons,
		}
		for _, sn := range d.targets(pool, m.Nodes) {
			if sn.maintenance != nil || sn.preemption != nil {
				d.logger.Warn("node busy, maintenance event left out", "event", te.index, "node", sn.name)
				continue
			}
			d.scheduleMaintenance(sn, md)
		}
	case e.Preemption != nil:
		pool := d.sc.Pool(e.Preemption.NodePool)
		notice := time.Duration(d.sc.GKE.PreemptionNotice)
		for _, sn := range d.targets(pool, e.Preemption.Nodes) {
			if sn.maintenance != nil || sn.preemption != nil {
				d.logger.Warn("node busy, preemption left out", "event", te.index, "node", sn.name)
				continue
			}
			sn.preemption = &preemption{phase: preemptionWorkloads, until: now.Add(notice / 2)}
			sn.meta.Preempt()
			d.logger.Info("spot VM preempted", "node", sn.name, "pool", pool.Name, "notice", notice)
		}
	case e.Report != nil:
		behavior, _ := gke.ParseFaultBehavior(e.Report.Behavior) // validated with the scenario
		for _, sn := range d.targets(d.sc.Pool(e.Report.NodePool), e.Report.Nodes) {
			d.reportHost(ctx, sn.name, behavior)
		}
	case e.GPUFault != nil:
		d.startGPUFault(te.index, e.GPUFault, now)
	case e.Upgrade != nil:
		d.startUpgrade(te, now)
	case e.AutoUpgrade != nil:
		d.announceAutoUpgrade(e.AutoUpgrade, now)
	}
}

// scheduleMaintenance announces md on the node and its metadata server.
func (d *Driver) scheduleMaintenance(sn *simNode, md metadata.Maintenance) {
	sn.maintenance = &maintenance{windowStart: md.WindowStart, canReschedule: md.CanReschedule, announced: md,
		failure: gke.HardwareFailure(md.Reasons)}
	sn.meta.ScheduleMaintenance(md)
	d.logger.Info("maintenance scheduled", "node", sn.name, "pool", sn.pool.Name, "window_start", md.WindowStart,
		"can_reschedule", md.CanReschedule, "reasons", md.Reasons,
		"story_window_start", d.clock.story(md.WindowStart).Round(time.Minute))
}

// reportHost plays the operator who reports a node's host as faulty.
func (d *Driver) reportHost(ctx context.Context, node string, behavior gke.FaultBehavior) {
	d.logger.Info("operator reports the host as faulty", "node", node, "behavior", behavior, "through_product", d.reporter != nil)
	if d.reporter != nil {
		go func() {
			if err := d.reporter(ctx, node, behavior); err != nil {
				d.logger.Warn("reporting the host as faulty", "node", node, "err", err)
			}
		}()
		return
	}
	if err := updateNode(ctx, d.client, node, func(n *corev1.Node) bool {
		if n.Labels[gke.LabelFaultBehavior] == string(behavior) {
			return false
		}
		n.Labels[gke.LabelFaultBehavior] = string(behavior)
		return true
	}); err != nil {
		d.logger.Warn("labelling the node with its fault behavior", "node", node, "err", err)
	}
}

// targets are the nodes of pool an event names; none named means all. Nodes an upgrade is replacing are leaving
// and never targets: their index is the new node's.
func (d *Driver) targets(pool *NodePool, indexes []int) []*simNode {
	var out []*simNode
	for _, sn := range d.nodes {
		if sn.pool != pool || d.upgrading(sn) {
			continue
		}
		if len(indexes) == 0 {
			out = append(out, sn)
			continue
		}
		for _, i := range indexes {
			if i == sn.index {
				out = append(out, sn)
			}
		}
	}
	return out
}

// cached returns the node as the informer last saw it, or nil.
func (d *Driver) cached(name string) *corev1.Node {
	n, err := d.nodeLister.Get(name)
	if err != nil {
		return nil
	}
	return n
}

// recordInterruption counts an interruption of sn in the Cloud Monitoring simulator.
func (d *Driver) recordInterruption(sn *simNode, kind, reason string, now time.Time) {
	if d.mon == nil {
		return
	}
	err := d.mon.Record(monitoring.Interruption{
		Project:  d.sc.Cluster.Project,
		Location: d.sc.Cluster.Location,
		Cluster:  d.sc.Cluster.Name,
		Node:     sn.name,
		NodePool: sn.pool.Name,
		Type:     kind,
		Reason:   reason,
		Count:    1,
		Time:     now,
	})
	if err != nil {
		d.logger.Error("recording interruption", "node", sn.name, "type", kind, "err", err)
	}
}

// syncNode brings the Node object in line with what GKE, the kubelet and the GPU device plugin say about it: the
// maintenance labels and taint, the Ready condition, the boot ID, the XidCriticalError condition and the
// allocatable GPUs.
func (d *Driver) syncNode(ctx context.Context, sn *simNode, now time.Time) {
	n := d.cached(sn.name)
	if n == nil {
		return
	}
	if nodeMetaDiffers(n, sn) {
		err := updateNode(ctx, d.client, sn.name, func(n *corev1.Node) bool { return applyNodeMeta(n, sn) })
		if err != nil {
			d.logger.Warn("updating node labels and taints", "node", sn.name, "err", err)
			return
		}
	}
	if sn.clearPerformMaintenance && n.Labels[LabelPerformMaintenance] == "" {
		sn.clearPerformMaintenance = false
	}
	if nodeReady(n) != sn.ready || gpuStatusDiffers(n, sn) {
		n = n.DeepCopy()
		if nodeReady(n) != sn.ready {
			n.Status.Conditions = nodeStatus(d.sc, sn, sn.ready, now).Conditions
		}
		applyGPUStatus(&n.Status, sn)
		if _, err := d.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			d.logger.Warn("updating node status", "node", sn.name, "err", err)
		}
	}
}

func setLabel(l map[string]string, key, value string) {
	if value == "" {
		delete(l, key)
	} else {
		l[key] = value
	}
}

// evict deletes the pods GKE stops in the node's current phase: workload pods first, then system pods too, and
// every pod at once when the VM stops.
func (d *Driver) evict(ctx context.Context, sn *simNode, pods []*corev1.Pod) {
	var system, force bool
	switch {
	case sn.maintenance != nil && sn.maintenance.phase == phaseWorkloadEviction,
		sn.maintenance != nil && sn.maintenance.windowStartedTaint && sn.ready,
		sn.report != nil && sn.report.phase == reportEvicting,
		sn.preemption != nil && sn.preemption.phase == preemptionWorkloads:
	case sn.maintenance != nil && sn.maintenance.phase == phaseSystemEviction,
		sn.preemption != nil && sn.preemption.phase == preemptionSystem:
		system = true
	case !sn.ready:
		system, force = true, true
	default:
		return
	}
	grace := time.Duration(d.sc.GKE.WorkloadEviction)
	if sn.preemption != nil {
		grace = time.Duration(d.sc.GKE.PreemptionNotice) / 2
	}
	for _, pod := range pods {
		if systemPod(pod) && !system {
			continue
		}
		if force {
			d.kubelet.finish(ctx, d, pod)
			continue
		}
		if pod.DeletionTimestamp != nil || d.kubelet.deleted[pod.UID] {
			continue
		}
		seconds := int64(max(1, grace/time.Second))
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < seconds {
			seconds = *g
		}
		err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &seconds, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			d.logger.Warn("evicting pod", "pod", pod.Namespace+"/"+pod.Name, "node", sn.name, "err", err)
			continue
		}
		d.kubelet.deleted[pod.UID] = true
		d.logger.Debug("pod evicted by GKE", "pod", pod.Namespace+"/"+pod.Name, "node", sn.name)
	}
}

// placeable tells whether a new pod of w may go to sn: the node is up and GKE is not taking it down; a node
// cordoned (unschedulable) takes only DaemonSet pods, as with the real scheduler.
func (d *Driver) placeable(w *simWorkload, sn *simNode) bool {
	if !sn.ready || sn.preemption != nil || sn.report != nil || (sn.maintenance != nil && sn.maintenance.phase >= phaseWorkloadEviction) {
		return false
	}
	if w.w.Kind == KindDaemonSet {
		return true
	}
	n := d.cached(sn.name)
	return n != nil && !n.Spec.Unschedulable && !hasTerminationTaint(n)
}

// Status is a summary of the story for displays.
type Status struct {
	// Story is the story time played so far.
	Story time.Duration
	// Scheduled nodes have maintenance announced that has not started yet; InMaintenance nodes are in it (from
	// GKE's start until the node is back); Maintained counts completed maintenances.
	Scheduled, InMaintenance, Maintained int
	// Preempting nodes are between a preemption notice and their replacement; Preempted counts preemptions.
	Preempting, Preempted int
	// EventsLeft are the scenario's events still to come.
	EventsLeft int
	Nodes      []NodeStatus
}

// NodeStatus is one node's part of the story.
type NodeStatus struct {
	Name, Pool string
	// Phase is what is happening: "" (nothing), scheduled, starting, evicting-workloads, evicting-system,
	// host-down, preempted, replacing, upgrading (an old node an upgrade drains and deletes).
	Phase string
	// WindowStart is the start of a scheduled maintenance window.
	WindowStart time.Time
}

// Status returns the current summary.
func (d *Driver) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.status
	s.Nodes = append([]NodeStatus(nil), s.Nodes...)
	return s
}

func (d *Driver) publishStatus(now time.Time) {
	s := Status{Story: d.clock.story(now), EventsLeft: len(d.events) - d.nextEvent}
	for _, sn := range d.nodes {
		ns := NodeStatus{Name: sn.name, Pool: sn.pool.Name}
		switch {
		case sn.maintenance != nil:
			ns.Phase, ns.WindowStart = sn.maintenance.phase.String(), sn.maintenance.windowStart
			if sn.maintenance.phase == phaseScheduled {
				s.Scheduled++
			} else {
				s.InMaintenance++
			}
		case sn.preemption != nil:
			ns.Phase = sn.preemption.phase.String()
			s.Preempting++
		case d.upgrading(sn):
			ns.Phase = "upgrading"
		}
		s.Maintained += sn.maintained
		s.Preempted += sn.preempted
		s.Nodes = append(s.Nodes, ns)
	}
	sort.SliceStable(s.Nodes, func(a, b int) bool { return s.Nodes[a].Pool < s.Nodes[b].Pool })
	d.mu.Lock()
	d.status = s
	d.mu.Unlock()
}

// updateNode applies mutate to the current node and writes it when mutate reports a change, retrying conflicts.
func updateNode(ctx context.Context, client kubernetes.Interface, name string, mutate func(*corev1.Node) bool) error {
	for attempt := 0; ; attempt++ {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !mutate(n) {
			return nil
		}
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			return err
		}
	}
}
