package workloads

import (
	"io"
	"math"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// The families the workloads collector renders, in exposition order.
const (
	familyNodes = iota
	familyNextMaintenance
	familyNextInterruption
	familyNodesInMaintenance
	familyFindings
	numFamilies
)

var families = [numFamilies]collector.TextFamily{
	familyNodes: {Name: "gke_workload_nodes", Type: "gauge",
		Help: "GPU, TPU and Spot nodes the workload's pods run on."},
	familyNextMaintenance: {Name: "gke_workload_next_maintenance_timestamp_seconds", Type: "gauge",
		Help: "Earliest scheduled maintenance among the workload's GPU, TPU and Spot nodes."},
	familyNextInterruption: {Name: "gke_workload_next_interruption_timestamp_seconds", Type: "gauge",
		Help: "Earliest planned interruption among the workload's GPU, TPU and Spot nodes: host maintenance, or the end of a VM's maximum run duration (interruption label)."},
	familyNodesInMaintenance: {Name: "gke_workload_nodes_in_maintenance", Type: "gauge",
		Help: "Of the workload's GPU, TPU and Spot nodes, those in host maintenance now."},
	familyFindings: {Name: "gke_readiness_findings", Type: "gauge",
		Help: "Pods of the workload (1 for checks of the cluster) failing a readiness check; see docs/readiness.md."},
}

// The interruption label values of gke_workload_next_interruption_timestamp_seconds.
const (
	interruptionMaintenance = "maintenance"
	interruptionTermination = "termination"
)

// nodeInfo is what the collector keeps of a node.
type nodeInfo struct {
	name string // the one copy of the name that pods on the node share
	readiness.Node
	maintenance   int64 // pending maintenance (nodeview.Maintenance), epoch seconds; 0 when none
	termination   int64 // planned end of the VM (nodeview.View.PlannedTermination), epoch seconds; 0 when none
	inMaintenance bool
}

func (n *nodeInfo) interesting() bool { return n.Accelerated || n.Spot }

// ownerRef is a pod's controller as the pod names it, shared by all its pods.
type ownerRef struct {
	apiVersion, kind, name string
	uid                    types.UID
	refs                   int
}

// labelSet is a pod's labels, shared by all pods with the same ones (a ReplicaSet's, a Job's).
type labelSet struct {
	key  string
	set  labels.Set
	refs int
}

// podInput is a pod as the collector reads it from the API, before it is kept.
type podInput struct {
	namespace, name, node string
	uid                   types.UID   // only to tell pods that own other pods' owners
	owner                 *ownerInput // nil: the pod has no controller
	labels                map[string]string
	grace                 int64
	tolerates             bool
}

type ownerInput struct {
	apiVersion, kind, name string
	uid                    types.UID
}

type podKey struct{ namespace, name string }

// pod is what the collector keeps of a pod of interest.
type pod struct {
	node      string
	owner     *ownerRef // nil: the pod is its own workload
	labels    *labelSet
	workload  *workload
	grace     int32 // seconds; int32 keeps the struct in a smaller size class
	tolerates bool
	findings  readiness.Findings
}

type workloadKey struct{ namespace, kind, name string }

// workload is a top owner with pods of interest, and its rendered samples.
type workload struct {
	key      workloadKey
	index    int            // in state.dense
	pods     int            // pods kept
	nodes    map[string]int // pods per node
	findings [readiness.NumChecks]int
	rendered [numFamilies][]byte
}

// pdbInfo is a PodDisruptionBudget that allows no disruption; others are not kept.
type pdbInfo struct {
	selector labels.Selector
	key      string // the selector as a string, to tell a change
}

// OwnerLookup reads the controller of an owner from the metadata caches: found is false when the owner is not
// (yet) known, next nil when it has no controller.
type OwnerLookup func(namespace, apiVersion, kind, name string, uid types.UID) (next *ownerInput, found bool)

// followed are the owner kinds whose own controller is looked up: those that workload controllers create. Any other
// owner (Deployment, JobSet, LeaderWorkerSet, CronJob, a custom resource) is the top owner.
func followed(apiVersion, kind string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	switch kind {
	case "ReplicaSet", "StatefulSet":
		return group == "apps"
	case "Job":
		return group == "batch"
	}
	return false
}

// maxOwnerDepth bounds the walk up ownerReferences, against cycles.
const maxOwnerDepth = 8

// state is the collector's model: nodes, pods of interest, their workloads and rendered series. Every change
// re-renders the workloads it touches before the lock is released, so a scrape is a byte copy.
type state struct {
	mu     sync.RWMutex
	cfg    readiness.Config
	lookup OwnerLookup

	nodes      map[string]*nodeInfo
	accel      int // GPU/TPU nodes
	pods       map[podKey]*pod
	namespaces map[string]string // one copy of each namespace name
	owners     map[types.UID]*ownerRef
	labelSets  map[string]*labelSet
	unresolved map[types.UID]bool // owners looked up and not found
	pdbs       map[string]map[string]*pdbInfo

	gracefulTermination bool

	workloads map[workloadKey]*workload
	dense     []*workload
	byNode    map[string][]*workload // the workloads with pods on each node
	counts    [numFamilies]int
	dirty     map[*workload]bool
	cluster   []byte // the cluster checks' findings

	// placement tells, once per flush that moved a workload onto or off a node or changed which nodes are
	// watched, that WorkloadsOn would answer differently; placed records such a change until then.
	placement chan struct{}
	placed    bool
}

func newState(cfg readiness.Config, lookup OwnerLookup) *state {
	return &state{
		cfg: cfg, lookup: lookup,
		nodes: map[string]*nodeInfo{}, pods: map[podKey]*pod{}, namespaces: map[string]string{},
		owners: map[types.UID]*ownerRef{}, labelSets: map[string]*labelSet{}, unresolved: map[types.UID]bool{},
		pdbs: map[string]map[string]*pdbInfo{}, workloads: map[workloadKey]*workload{}, byNode: map[string][]*workload{},
		dirty: map[*workload]bool{}, placement: make(chan struct{}, 1),
	}
}

// flush renders what changed. Callers hold the write lock.
func (s *state) flush() {
	for w := range s.dirty {
		if w.index >= 0 {
			s.render(w)
		}
		delete(s.dirty, w)
	}
	s.renderCluster()
	if s.placed {
		s.placed = false
		select {
		case s.placement <- struct{}{}:
		default: // one signal pending is enough
		}
	}
}

// setNode records a node added or changed.
func (s *state) setNode(n nodeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyNode(n)
	s.flush()
}

func (s *state) applyNode(n nodeInfo) {
	stored, existed := s.nodes[n.name]
	var old nodeInfo
	if existed {
		old = *stored
		n.name = old.name
		if old == n {
			return
		}
		if old.Accelerated {
			s.accel--
		}
		*stored = n
	} else {
		stored = &n
		s.nodes[n.name] = stored
	}
	if n.Accelerated {
		s.accel++
	}
	if !existed || old.interesting() != n.interesting() {
		s.placed = true
	}
	if !existed || old.Node != n.Node {
		// Pods on the node were kept while it was unknown, or its kind changed: look at them again.
		s.repods(func(p *pod) bool { return p.node == n.name })
	}
	s.touchNode(n.name)
}

// deleteNode forgets a node; its pods stay, uncounted, until they are deleted too.
func (s *state) deleteNode(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return
	}
	if n.Accelerated {
		s.accel--
	}
	delete(s.nodes, name)
	s.placed = true
	s.repods(func(p *pod) bool { return p.node == name })
	s.touchNode(name)
	s.flush()
}

// replaceNodes sets the whole node list (an informer's relist).
func (s *state) replaceNodes(nodes []nodeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = make(map[string]*nodeInfo, len(nodes))
	s.accel = 0
	for _, n := range nodes {
		stored := n
		s.nodes[n.name] = &stored
		if n.Accelerated {
			s.accel++
		}
	}
	s.placed = true
	s.repods(func(*pod) bool { return true })
	for _, w := range s.dense {
		s.dirty[w] = true
	}
	s.flush()
}

// touchNode marks the workloads with pods on the node for rendering.
func (s *state) touchNode(name string) {
	for _, w := range s.byNode[name] {
		s.dirty[w] = true
	}
}

// leaveNode takes one of a workload's pods off a node.
func (s *state) leaveNode(w *workload, node string) {
	if w.nodes[node]--; w.nodes[node] > 0 {
		return
	}
	delete(w.nodes, node)
	s.placed = true
	list := s.byNode[node]
	for i, x := range list {
		if x == w {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(s.byNode, node)
	} else {
		s.byNode[node] = list
	}
}

// repods re-evaluates the kept pods that match: dropped when their node turned out ordinary, findings
// recomputed otherwise.
func (s *state) repods(match func(*pod) bool) {
	for key, p := range s.pods {
		if !match(p) {
			continue
		}
		if n, ok := s.nodes[p.node]; ok && !n.interesting() {
			s.removePod(key)
			continue
		}
		s.refind(key, p)
	}
}

// refind recomputes a kept pod's findings.
func (s *state) refind(key podKey, p *pod) {
	f := s.podFindings(key.namespace, p)
	if f == p.findings {
		return
	}
	s.countFindings(p, -1)
	p.findings = f
	s.countFindings(p, 1)
	s.dirty[p.workload] = true
}

func (s *state) countFindings(p *pod, delta int) {
	for id := range readiness.NumChecks {
		if p.findings.Has(id) {
			p.workload.findings[id] += delta
		}
	}
}

func (s *state) podFindings(namespace string, p *pod) readiness.Findings {
	n, ok := s.nodes[p.node]
	if !ok {
		return 0
	}
	blocked := false
	for _, pdb := range s.pdbs[namespace] {
		if pdb.selector.Matches(p.labels.set) {
			blocked = true
			break
		}
	}
	return readiness.PodFindings(s.cfg, readiness.Pod{
		GracePeriodSeconds: int64(p.grace), ToleratesTerminationTaint: p.tolerates, BlockedByPDB: blocked,
	}, n.Node)
}

// setPod records a pod added or changed; pods of no interest are forgotten.
func (s *state) setPod(in *podInput, keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyPod(in, keep)
	s.flush()
}

// applyPod keeps a pod of interest. keep is false for pods that are of no interest whatever their node (not bound,
// finished, DaemonSet or static pods).
func (s *state) applyPod(in *podInput, keep bool) {
	key := podKey{in.namespace, in.name}
	if n, ok := s.nodes[in.node]; !keep || (ok && !n.interesting()) {
		s.removePod(key)
		return
	}
	if old, ok := s.pods[key]; ok && s.same(old, in) {
		return
	}
	s.removePod(key)
	key.namespace = s.namespace(in.namespace)
	p := &pod{node: in.node, grace: clampGrace(in.grace), tolerates: in.tolerates}
	if n, ok := s.nodes[in.node]; ok {
		p.node = n.name
	}
	if in.owner != nil {
		p.owner = s.internOwner(in.owner)
	}
	p.labels = s.internLabels(in.labels)
	p.workload = s.workloadOf(key, p)
	s.pods[key] = p
	s.addToWorkload(key, p)
	if in.uid != "" && s.unresolved[in.uid] {
		s.reresolve(key.namespace, in.uid)
	}
}

// same tells whether a kept pod already says what in does (a status update, say).
func (s *state) same(p *pod, in *podInput) bool {
	if p.node != in.node || p.grace != clampGrace(in.grace) || p.tolerates != in.tolerates || p.labels.key != labelKey(in.labels) {
		return false
	}
	if p.owner == nil || in.owner == nil {
		return p.owner == nil && in.owner == nil
	}
	return p.owner.uid == in.owner.uid && p.owner.kind == in.owner.kind && p.owner.name == in.owner.name &&
		p.owner.apiVersion == in.owner.apiVersion
}

func clampGrace(g int64) int32 {
	return int32(max(math.MinInt32, min(g, math.MaxInt32)))
}

// deletePod forgets a pod.
func (s *state) deletePod(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removePod(podKey{namespace, name})
	s.flush()
}

// replacePods sets the whole pod list (a relist).
func (s *state) replacePods(pods []*podInput, keep []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.pods {
		s.removePod(key)
	}
	clear(s.unresolved)
	for i, in := range pods {
		s.applyPod(in, keep[i])
	}
	s.flush()
}

func (s *state) removePod(key podKey) {
	p, ok := s.pods[key]
	if !ok {
		return
	}
	delete(s.pods, key)
	w := p.workload
	s.countFindings(p, -1)
	w.pods--
	s.leaveNode(w, p.node)
	if w.pods == 0 {
		s.dropWorkload(w)
	} else {
		s.dirty[w] = true
	}
	if p.owner != nil {
		if p.owner.refs--; p.owner.refs == 0 {
			delete(s.owners, p.owner.uid)
		}
	}
	if p.labels.refs--; p.labels.refs == 0 {
		delete(s.labelSets, p.labels.key)
	}
}

func (s *state) addToWorkload(key podKey, p *pod) {
	w := p.workload
	w.pods++
	if w.nodes[p.node]++; w.nodes[p.node] == 1 {
		s.byNode[p.node] = append(s.byNode[p.node], w)
		s.placed = true
	}
	p.findings = s.podFindings(key.namespace, p)
	s.countFindings(p, 1)
	s.dirty[w] = true
}

// workloadLabels name the workload of a pod its controller created, by the labels that controller puts on every pod
// it makes: the owner walk cannot always get there (a LeaderWorkerSet's workers are owned through their leader pod,
// which may run on a node the collector does not keep pods of).
var workloadLabels = []struct{ label, kind string }{
	{"leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"},
	{"jobset.sigs.k8s.io/jobset-name", "JobSet"},
}

// workloadKeyOf names the pod's workload: the one its controller labelled it with, else its top owner, else itself.
func (s *state) workloadKeyOf(key podKey, p *pod) workloadKey {
	wk := workloadKey{namespace: key.namespace, kind: "Pod", name: key.name}
	if p.owner == nil {
		return wk
	}
	for _, l := range workloadLabels {
		if name := p.labels.set[l.label]; name != "" {
			wk.kind, wk.name = l.kind, name
			return wk
		}
	}
	wk.kind, wk.name = s.topOwner(key.namespace, p.owner)
	return wk
}

// workloadOf is the pod's workload, created when new.
func (s *state) workloadOf(key podKey, p *pod) *workload {
	wk := s.workloadKeyOf(key, p)
	w, ok := s.workloads[wk]
	if !ok {
		w = &workload{key: wk, index: len(s.dense), nodes: map[string]int{}}
		s.workloads[wk] = w
		s.dense = append(s.dense, w)
	}
	return w
}

// topOwner walks up the controllers of owner through the metadata caches.
func (s *state) topOwner(namespace string, owner *ownerRef) (kind, name string) {
	cur := ownerInput{apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid: owner.uid}
	for range maxOwnerDepth {
		if cur.kind == "Pod" && cur.apiVersion == "v1" {
			// A LeaderWorkerSet's worker StatefulSets are owned by the group's leader pod: a kept one, else one
			// from the leader pods' metadata, wherever it runs.
			if leader, ok := s.pods[podKey{namespace, cur.name}]; ok {
				if leader.owner == nil {
					break
				}
				cur = ownerInput{apiVersion: leader.owner.apiVersion, kind: leader.owner.kind, name: leader.owner.name, uid: leader.owner.uid}
				continue
			}
		} else if !followed(cur.apiVersion, cur.kind) {
			break
		}
		next, found := s.lookup(namespace, cur.apiVersion, cur.kind, cur.name, cur.uid)
		if !found {
			s.unresolved[cur.uid] = true
			break
		}
		if next == nil {
			break
		}
		cur = *next
	}
	return cur.kind, cur.name
}

// ownerChanged is called when an owner object appears or its controller changes: the pods of its namespace are
// resolved again when it may change their workload.
func (s *state) ownerChanged(namespace string, uid types.UID, controllerChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !controllerChanged && !s.unresolved[uid] {
		return
	}
	s.reresolve(namespace, uid)
	s.flush()
}

// reresolve walks the owners of the namespace's pods again, moving those whose workload changed.
func (s *state) reresolve(namespace string, uid types.UID) {
	delete(s.unresolved, uid)
	for key, p := range s.pods {
		if key.namespace != namespace || p.owner == nil {
			continue
		}
		if s.workloadKeyOf(key, p) == p.workload.key {
			continue
		}
		s.detach(p)
		p.workload = s.workloadOf(key, p)
		s.addToWorkload(key, p)
	}
}

// detach takes a pod's counts off its workload, leaving the pod kept.
func (s *state) detach(p *pod) {
	w := p.workload
	s.countFindings(p, -1)
	w.pods--
	s.leaveNode(w, p.node)
	if w.pods == 0 {
		s.dropWorkload(w)
	} else {
		s.dirty[w] = true
	}
}

func (s *state) dropWorkload(w *workload) {
	for f, b := range w.rendered {
		if b != nil {
			s.counts[f]--
		}
	}
	last := len(s.dense) - 1
	s.dense[w.index] = s.dense[last]
	s.dense[w.index].index = w.index
	s.dense[last] = nil
	s.dense = s.dense[:last]
	delete(s.workloads, w.key)
	w.index = -1
}

// setPDB records a PodDisruptionBudget; blocks tells whether it allows no disruption.
func (s *state) setPDB(namespace, name string, selector labels.Selector, blocks bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.pdbs[namespace][name]
	switch {
	case !blocks && old == nil:
		return
	case !blocks:
		delete(s.pdbs[namespace], name)
	case old != nil && old.key == selector.String():
		return
	default:
		if s.pdbs[namespace] == nil {
			s.pdbs[namespace] = map[string]*pdbInfo{}
		}
		s.pdbs[namespace][name] = &pdbInfo{selector: selector, key: selector.String()}
	}
	s.repods(func(p *pod) bool { return p.workload.key.namespace == namespace })
	s.flush()
}

func (s *state) deletePDB(namespace, name string) {
	s.setPDB(namespace, name, nil, false)
}

// setGracefulTermination records whether GKE's graceful termination is on.
func (s *state) setGracefulTermination(enabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gracefulTermination = enabled
	s.flush()
}

func (s *state) namespace(ns string) string {
	if v, ok := s.namespaces[ns]; ok {
		return v
	}
	s.namespaces[ns] = ns
	return ns
}

// internOwner shares one ownerRef among the pods of an owner; a UID names one object, whose kind and name never
// change.
func (s *state) internOwner(in *ownerInput) *ownerRef {
	o, ok := s.owners[in.uid]
	if !ok {
		o = &ownerRef{apiVersion: in.apiVersion, kind: in.kind, name: in.name, uid: in.uid}
		s.owners[in.uid] = o
	}
	o.refs++
	return o
}

// perPodLabels differ between pods of one workload; no PodDisruptionBudget over a workload selects by them, and
// keeping them would give every pod its own label set.
var perPodLabels = map[string]bool{
	"statefulset.kubernetes.io/pod-name":       true,
	"apps.kubernetes.io/pod-index":             true,
	"batch.kubernetes.io/job-completion-index": true,
	"leaderworkerset.sigs.k8s.io/worker-index": true,
}

func labelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		if !perPodLabels[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *state) internLabels(l map[string]string) *labelSet {
	key := labelKey(l)
	ls, ok := s.labelSets[key]
	if !ok {
		set := make(labels.Set, len(l))
		for k, v := range l {
			if !perPodLabels[k] {
				set[k] = v
			}
		}
		ls = &labelSet{key: key, set: set}
		s.labelSets[key] = ls
	}
	ls.refs++
	return ls
}

// render turns a workload's state into its samples; series are sparse.
func (s *state) render(w *workload) {
	var r [numFamilies][]byte
	ns, kind, name := w.key.namespace, w.key.kind, w.key.name
	nodes, inMaintenance := 0, 0
	var next, nextTermination int64
	for n := range w.nodes {
		info, ok := s.nodes[n]
		if !ok {
			continue
		}
		nodes++
		if info.inMaintenance {
			inMaintenance++
		}
		if info.maintenance > 0 && (next == 0 || info.maintenance < next) {
			next = info.maintenance
		}
		if info.termination > 0 && (nextTermination == 0 || info.termination < nextTermination) {
			nextTermination = info.termination
		}
	}
	// The next interruption is the earlier of the two; maintenance where they fall together.
	interruption, nextInterruption := interruptionMaintenance, next
	if nextTermination > 0 && (next == 0 || nextTermination < next) {
		interruption, nextInterruption = interruptionTermination, nextTermination
	}
	// Label names in sorted order, as client_golang writes them.
	if nodes > 0 {
		r[familyNodes] = collector.AppendSample(nil, families[familyNodes].Name, float64(nodes),
			"namespace", ns, "workload", name, "workload_kind", kind)
	}
	if next > 0 {
		r[familyNextMaintenance] = collector.AppendSample(nil, families[familyNextMaintenance].Name, float64(next),
			"namespace", ns, "workload", name, "workload_kind", kind)
	}
	if nextInterruption > 0 {
		r[familyNextInterruption] = collector.AppendSample(nil, families[familyNextInterruption].Name, float64(nextInterruption),
			"interruption", interruption, "namespace", ns, "workload", name, "workload_kind", kind)
	}
	if inMaintenance > 0 {
		r[familyNodesInMaintenance] = collector.AppendSample(nil, families[familyNodesInMaintenance].Name, float64(inMaintenance),
			"namespace", ns, "workload", name, "workload_kind", kind)
	}
	for id, count := range w.findings {
		if count > 0 {
			r[familyFindings] = collector.AppendSample(r[familyFindings], families[familyFindings].Name, float64(count),
				"check", readiness.Checks[id].Name, "namespace", ns, "workload", name, "workload_kind", kind)
		}
	}
	for f := range r {
		if w.rendered[f] != nil {
			s.counts[f]--
		}
		if r[f] != nil {
			s.counts[f]++
		}
	}
	w.rendered = r
}

// clusterFinding tells whether the cluster fails its own check: graceful termination matters once the cluster has
// GPU/TPU nodes.
func (s *state) clusterFinding() bool { return !s.gracefulTermination && s.accel > 0 }

// renderCluster renders the cluster checks.
func (s *state) renderCluster() {
	s.cluster = nil
	if s.clusterFinding() {
		s.cluster = collector.AppendSample(nil, families[familyFindings].Name, 1,
			"check", readiness.Checks[readiness.CheckGracefulTerminationDisabled].Name)
	}
}

// WriteText writes every family that has samples: a header, then each workload's bytes.
func (s *state) WriteText(w io.Writer) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for f := range families {
		extra := f == familyFindings && s.cluster != nil
		if s.counts[f] == 0 && !extra {
			continue
		}
		if err := families[f].WriteHeader(w); err != nil {
			return err
		}
		if extra {
			if _, err := w.Write(s.cluster); err != nil {
				return err
			}
		}
		for _, wl := range s.dense {
			if b := wl.rendered[f]; b != nil {
				if _, err := w.Write(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
