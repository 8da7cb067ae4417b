package driver

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pendingTimeout is how long a created pod counts as running before the informer shows it; a create the cache
// never shows is retried after it.
const pendingTimeout = 30 * time.Second

// simWorkload is a workload with its owner object, once registered.
type simWorkload struct {
	w     *Workload
	pools map[*NodePool]bool
	// index numbers the nodes a Job, JobSet or DaemonSet runs a pod on, in scenario order: a Job's completion
	// index on the node. It is by place in the pool, so that a node an upgrade created in another's place takes
	// over its index.
	index map[nodeSlot]int
	// expected is the pods the owning controller wants.
	expected int
	owner    owner
	template corev1.PodTemplateSpec
	// pending are pods created but not yet seen in the cache, by name, with the node and the time of creation.
	pending map[string]pendingPod
	// completed are a Job's completion indexes whose pod succeeded; recorded is what the Job's status says
	// (status.completedIndexes), which outlives the pods and the driver.
	completed map[int]bool
	recorded  string
}

type pendingPod struct {
	node    string
	index   int // the Job completion index, -1 for other kinds
	created time.Time
}

// nodeSlot is a node's place in its pool, which outlives the VMs an upgrade replaces.
type nodeSlot struct {
	pool  *NodePool
	index int
}

func (sn *simNode) slot() nodeSlot { return nodeSlot{sn.pool, sn.index} }

func newSimWorkload(sc *Scenario, w *Workload) *simWorkload {
	sw := &simWorkload{w: w, pools: map[*NodePool]bool{}, index: map[nodeSlot]int{}, pending: map[string]pendingPod{},
		completed: map[int]bool{}}
	for i := range sc.NodePools {
		p := &sc.NodePools[i]
		if len(w.NodePools) == 0 || slices.Contains(w.NodePools, p.Name) {
			sw.pools[p] = true
		}
		if !sw.pools[p] || w.Kind == KindDeployment {
			continue
		}
		for n := range p.Nodes {
			if len(w.Nodes) == 0 || slices.Contains(w.Nodes, n) {
				sw.index[nodeSlot{p, n}] = len(sw.index)
			}
		}
	}
	sw.expected = len(sw.index)
	if w.Kind == KindDeployment {
		sw.expected = w.Replicas
	}
	return sw
}

// job tells whether the workload's pods belong to a Job (of its own or of a JobSet).
func (sw *simWorkload) job() bool { return sw.w.Kind == KindJob || sw.w.Kind == KindJobSet }

// register creates the namespaces, nodes, workload objects and PodDisruptionBudgets of the scenario; objects that
// exist already are kept.
func (d *Driver) register(ctx context.Context) error {
	core := d.client.CoreV1()
	namespaces := map[string]bool{}
	for _, sw := range d.workloads {
		ns := sw.w.Namespace
		if namespaces[ns] {
			continue
		}
		namespaces[ns] = true
		if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	now := time.Now()
	for _, sn := range d.nodes {
		sn.ends = d.flexStartEnd(sn.pool, now)
		node := newNode(d.sc, sn)
		created, err := core.Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = core.Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		// A restarted driver keeps the end the VM was created with.
		if end, err := time.Parse(time.RFC3339, created.Annotations[AnnotationMachineTermination]); err == nil && !sn.ends.IsZero() {
			sn.ends = end
		}
		created.Status = nodeStatus(d.sc, sn, true, now)
		applyGPUStatus(&created.Status, sn)
		if _, err := core.Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reporting node %s Ready: %w", node.Name, err)
		}
	}
	for _, sw := range d.workloads {
		if err := d.registerWorkload(ctx, sw); err != nil {
			return fmt.Errorf("creating workload %s/%s: %w", sw.w.Namespace, sw.w.Name, err)
		}
	}
	return nil
}

func (d *Driver) registerWorkload(ctx context.Context, sw *simWorkload) error {
	w := sw.w
	switch w.Kind {
	case KindDeployment:
		api := d.client.AppsV1()
		dep, err := createOrGet(ctx, newDeployment(w), api.Deployments(w.Namespace).Create, api.Deployments(w.Namespace).Get)
		if err != nil {
			return err
		}
		rs, err := createOrGet(ctx, newReplicaSet(w, dep), api.ReplicaSets(w.Namespace).Create, api.ReplicaSets(w.Namespace).Get)
		if err != nil {
			return err
		}
		sw.owner = owner{ref: controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID), labels: rs.Spec.Template.Labels}
		sw.template = rs.Spec.Template
	case KindJob:
		api := d.client.BatchV1()
		job, err := createOrGet(ctx, newJob(w, sw.expected), api.Jobs(w.Namespace).Create, api.Jobs(w.Namespace).Get)
		if err != nil {
			return err
		}
		// The API server adds the controller-uid and job-name labels to the template: the pods carry them.
		sw.owner = owner{ref: controllerRef("batch/v1", "Job", job.Name, job.UID), labels: job.Spec.Template.Labels}
		sw.template = job.Spec.Template
		sw.readCompletions(job)
	case KindJobSet:
		api := d.client.BatchV1()
		job, err := createOrGet(ctx, newJobSetJob(w, sw.expected), api.Jobs(w.Namespace).Create, api.Jobs(w.Namespace).Get)
		if err != nil {
			return err
		}
		sw.owner = owner{ref: controllerRef("batch/v1", "Job", job.Name, job.UID), labels: job.Spec.Template.Labels}
		sw.template = job.Spec.Template
		sw.readCompletions(job)
	case KindDaemonSet:
		api := d.client.AppsV1()
		ds, err := createOrGet(ctx, newDaemonSet(w), api.DaemonSets(w.Namespace).Create, api.DaemonSets(w.Namespace).Get)
		if err != nil {
			return err
		}
		sw.owner = owner{ref: controllerRef("apps/v1", "DaemonSet", ds.Name, ds.UID), labels: ds.Spec.Template.Labels}
		sw.template = ds.Spec.Template
	}
	if w.PDB != nil {
		api := d.client.PolicyV1()
		if _, err := createOrGet(ctx, newPDB(w), api.PodDisruptionBudgets(w.Namespace).Create, api.PodDisruptionBudgets(w.Namespace).Get); err != nil {
			return err
		}
	}
	return nil
}

// readCompletions takes up what the Job's status records as complete: after a restart the driver does not run a
// Job's pod again where it succeeded, even when the pod is gone.
func (sw *simWorkload) readCompletions(job *batchv1.Job) {
	sw.completed = parseIndexes(job.Status.CompletedIndexes, sw.expected)
	sw.recorded = formatIndexes(sw.completed)
}

// newJobSetJob is the one Job of a JobSet's replicated job, as the JobSet controller creates it. Neither the JobSet
// resource nor its controller run on the simulated cluster: the Job's controller reference names the JobSet, which
// is all that tells the pods' workload.
func newJobSetJob(w *Workload, nodes int) *batchv1.Job {
	job := newJob(w, nodes)
	job.Name = w.Name + "-slice-0"
	h := fnv.New64a()
	fmt.Fprintf(h, "jobset/%s/%s", w.Namespace, w.Name)
	sum := h.Sum64()
	uid := types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(sum>>32), uint16(sum>>16), uint16(sum)&0xfff, uint16(sum>>4)&0xfff, sum&0xffffffffffff))
	job.OwnerReferences = []metav1.OwnerReference{controllerRef("jobset.x-k8s.io/v1alpha2", "JobSet", w.Name, uid)}
	job.Labels["jobset.sigs.k8s.io/jobset-name"] = w.Name
	job.Spec.Template.Labels["jobset.sigs.k8s.io/jobset-name"] = w.Name
	return job
}

type objectWithName interface{ GetName() string }

// createOrGet creates obj, or returns the existing object of its name.
func createOrGet[T objectWithName](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error)) (T, error) {
	out, err := create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return get(ctx, obj.GetName(), metav1.GetOptions{})
	}
	return out, err
}

// ownedBy tells whether pod is one of the workload's.
func (sw *simWorkload) ownedBy(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.UID == sw.owner.ref.UID
}

// reconcileWorkload creates the pods the workload is missing once its start has come, as its controller and the
// scheduler would: a Deployment's replicas on the least loaded nodes that can take them, a DaemonSet's on each of
// its nodes that has none, a Job's for each completion index that has no live pod, except where the Job is
// complete. A Job's pod deleted before it succeeded is replaced by a new one, which runs the full runFor again.
func (d *Driver) reconcileWorkload(ctx context.Context, sw *simWorkload, pods []*corev1.Pod, now time.Time) {
	perNode := map[string]int{}
	// perIndex counts a Job's live pods by completion index: during an upgrade the old and the new node share one.
	perIndex := map[int]int{}
	live := 0
	var firstStart time.Time
	for _, pod := range pods {
		delete(sw.pending, pod.Name)
		if !sw.ownedBy(pod) {
			continue
		}
		if t := pod.Status.StartTime; t != nil && (firstStart.IsZero() || t.Time.Before(firstStart)) {
			firstStart = t.Time
		}
		if pod.Status.Phase == corev1.PodSucceeded {
			if i, ok := completionIndex(pod); ok && sw.job() && i < sw.expected {
				sw.completed[i] = true
			}
			continue
		}
		if pod.DeletionTimestamp == nil {
			perNode[pod.Spec.NodeName]++
			if i, ok := completionIndex(pod); ok {
				perIndex[i]++
			}
			live++
		}
	}
	if sw.job() && formatIndexes(sw.completed) != sw.recorded {
		d.recordCompletions(ctx, sw, firstStart, now)
	}
	for name, p := range sw.pending {
		if now.Sub(p.created) > pendingTimeout {
			delete(sw.pending, name)
			continue
		}
		perNode[p.node]++
		perIndex[p.index]++
		live++
	}
	if d.clock.story(now) < time.Duration(sw.w.StartAt) {
		return
	}
	var candidates []*simNode
	for _, sn := range d.nodes {
		if sw.pools[sn.pool] && d.placeable(sw, sn) {
			candidates = append(candidates, sn)
		}
	}
	if sw.w.Kind != KindDeployment {
		for _, sn := range candidates {
			i, ok := sw.index[sn.slot()]
			busy := perNode[sn.name] > 0 || (sw.job() && perIndex[i] > 0)
			if ok && !busy && !sw.completed[i] && d.createPod(ctx, sw, sn, i, now) {
				perIndex[i]++
			}
		}
		return
	}
	for missing := sw.w.Replicas - live; missing > 0 && len(candidates) > 0; missing-- {
		sort.SliceStable(candidates, func(a, b int) bool { return perNode[candidates[a].name] < perNode[candidates[b].name] })
		sn := candidates[0]
		if !d.createPod(ctx, sw, sn, -1, now) {
			return
		}
		perNode[sn.name]++
	}
}

// createPod creates a pod of the workload on sn; index is its Job completion index, -1 for other kinds.
func (d *Driver) createPod(ctx context.Context, sw *simWorkload, sn *simNode, index int, now time.Time) bool {
	if !sw.job() {
		index = -1
	}
	pod := newPod(sw.w, sw.owner, sw.template, sn.pool, sn.name, index)
	created, err := d.client.CoreV1().Pods(sw.w.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		d.logger.Warn("creating pod", "workload", sw.w.Namespace+"/"+sw.w.Name, "node", sn.name, "err", err)
		return false
	}
	sw.pending[created.Name] = pendingPod{node: sn.name, index: index, created: now}
	return true
}

// recordCompletions writes the Job's completed indexes and succeeded count into its status, and once every index
// is complete the Complete condition, as the Job controller does. A failed write is tried again on the next pass.
func (d *Driver) recordCompletions(ctx context.Context, sw *simWorkload, firstStart, now time.Time) {
	indexes := formatIndexes(sw.completed)
	jobs := d.client.BatchV1().Jobs(sw.w.Namespace)
	job, err := jobs.Get(ctx, sw.owner.ref.Name, metav1.GetOptions{})
	if err != nil {
		d.logger.Warn("reading job to record completions", "job", sw.w.Namespace+"/"+sw.owner.ref.Name, "err", err)
		return
	}
	t := metav1.NewTime(now)
	if job.Status.StartTime == nil {
		start := t
		if !firstStart.IsZero() {
			start = metav1.NewTime(firstStart)
		}
		job.Status.StartTime = &start
	}
	job.Status.CompletedIndexes = indexes
	job.Status.Succeeded = int32(len(sw.completed))
	if len(sw.completed) == sw.expected && job.Status.CompletionTime == nil {
		job.Status.CompletionTime = &t
		for _, c := range []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete} {
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue,
				Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods",
				LastProbeTime: t, LastTransitionTime: t})
		}
	}
	if _, err := jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) {
			d.logger.Warn("recording job completions", "job", job.Namespace+"/"+job.Name, "err", err)
		}
		return
	}
	sw.recorded = indexes
	d.logger.Info("job pods completed", "job", job.Namespace+"/"+job.Name, "completed_indexes", indexes,
		"succeeded", len(sw.completed), "completions", sw.expected)
}

// completionIndex reads a Job pod's completion index annotation.
func completionIndex(pod *corev1.Pod) (int, bool) {
	i, err := strconv.Atoi(pod.Annotations[batchv1.JobCompletionIndexAnnotation])
	return i, err == nil && i >= 0
}

// formatIndexes writes completion indexes as the Job controller does in status.completedIndexes: ascending,
// consecutive runs of three or more as ranges ("0,1,3-5").
func formatIndexes(set map[int]bool) string {
	indexes := slices.Sorted(maps.Keys(set))
	var b strings.Builder
	for i := 0; i < len(indexes); {
		j := i
		for j+1 < len(indexes) && indexes[j+1] == indexes[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(indexes[i]))
		switch {
		case j == i+1:
			b.WriteString("," + strconv.Itoa(indexes[j]))
		case j > i+1:
			b.WriteString("-" + strconv.Itoa(indexes[j]))
		}
		i = j + 1
	}
	return b.String()
}

// parseIndexes reads status.completedIndexes, keeping the indexes below completions.
func parseIndexes(s string, completions int) map[int]bool {
	set := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := max(first, 0); i <= last && i < completions; i++ {
			set[i] = true
		}
	}
	return set
}

// reconcilePDB keeps the workload's PodDisruptionBudget status current, as the disruption controller does.
func (d *Driver) reconcilePDB(ctx context.Context, sw *simWorkload, pods []*corev1.Pod, now time.Time) {
	if sw.w.PDB == nil {
		return
	}
	pdb, err := d.pdbLister.PodDisruptionBudgets(sw.w.Namespace).Get(sw.w.Name)
	if err != nil {
		return
	}
	var owned []*corev1.Pod
	for _, pod := range pods {
		if pod.Namespace == sw.w.Namespace && sw.ownedBy(pod) {
			owned = append(owned, pod)
		}
	}
	status := pdbStatus(pdb, owned, sw.expected, now)
	if !pdbStatusChanged(pdb, status) {
		return
	}
	pdb = pdb.DeepCopy()
	pdb.Status = status
	_, err = d.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		d.logger.Warn("updating disruption budget status", "pdb", pdb.Namespace+"/"+pdb.Name, "err", err)
	}
}

// runFor is how long (story time) the pod runs before it succeeds: its Job's runFor, 0 for pods that run until
// they are deleted.
func (d *Driver) runFor(pod *corev1.Pod) time.Duration {
	for _, sw := range d.workloads {
		if sw.job() && sw.ownedBy(pod) {
			return time.Duration(sw.w.RunFor)
		}
	}
	return 0
}
