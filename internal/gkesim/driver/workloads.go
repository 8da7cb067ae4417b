package driver

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
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
	// expected is the pods the owning controller wants.
	expected int
	owner    owner
	template corev1.PodTemplateSpec
	// pending are pods created but not yet seen in the cache, by name, with the node and the time of creation.
	pending map[string]pendingPod
}

type pendingPod struct {
	node    string
	created time.Time
}

func newSimWorkload(sc *Scenario, w *Workload) *simWorkload {
	sw := &simWorkload{w: w, pools: map[*NodePool]bool{}, pending: map[string]pendingPod{}}
	for i := range sc.NodePools {
		p := &sc.NodePools[i]
		if len(w.NodePools) == 0 {
			sw.pools[p] = true
		}
		for _, name := range w.NodePools {
			if name == p.Name {
				sw.pools[p] = true
			}
		}
	}
	if w.Kind == KindDeployment {
		sw.expected = w.Replicas
	} else {
		for p := range sw.pools {
			sw.expected += p.Nodes
		}
	}
	return sw
}

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
		node := newNode(d.sc, sn.pool, sn.index)
		created, err := core.Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = core.Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		created.Status = nodeStatus(d.sc, sn.pool, sn.index, true, now)
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
	case KindJobSet:
		api := d.client.BatchV1()
		job, err := createOrGet(ctx, newJobSetJob(w, sw.expected), api.Jobs(w.Namespace).Create, api.Jobs(w.Namespace).Get)
		if err != nil {
			return err
		}
		sw.owner = owner{ref: controllerRef("batch/v1", "Job", job.Name, job.UID), labels: job.Spec.Template.Labels}
		sw.template = job.Spec.Template
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

// reconcileWorkload creates the pods the workload is missing, as its controller and the scheduler would: a
// Deployment's replicas on the least loaded nodes that can take them, a Job's or DaemonSet's on every node of its
// pools that has none.
func (d *Driver) reconcileWorkload(ctx context.Context, sw *simWorkload, pods []*corev1.Pod, now time.Time) {
	perNode := map[string]int{}
	live := 0
	for _, pod := range pods {
		delete(sw.pending, pod.Name)
		if pod.DeletionTimestamp == nil && sw.ownedBy(pod) {
			perNode[pod.Spec.NodeName]++
			live++
		}
	}
	for name, p := range sw.pending {
		if now.Sub(p.created) > pendingTimeout {
			delete(sw.pending, name)
			continue
		}
		perNode[p.node]++
		live++
	}
	var candidates []*simNode
	for _, sn := range d.nodes {
		if sw.pools[sn.pool] && d.placeable(sw, sn) {
			candidates = append(candidates, sn)
		}
	}
	if sw.w.Kind != KindDeployment {
		for _, sn := range candidates {
			if perNode[sn.name] == 0 {
				d.createPod(ctx, sw, sn, now)
			}
		}
		return
	}
	for missing := sw.w.Replicas - live; missing > 0 && len(candidates) > 0; missing-- {
		sort.SliceStable(candidates, func(a, b int) bool { return perNode[candidates[a].name] < perNode[candidates[b].name] })
		sn := candidates[0]
		if !d.createPod(ctx, sw, sn, now) {
			return
		}
		perNode[sn.name]++
	}
}

func (d *Driver) createPod(ctx context.Context, sw *simWorkload, sn *simNode, now time.Time) bool {
	pod := newPod(sw.w, sw.owner, sw.template, sn.pool, sn.name)
	created, err := d.client.CoreV1().Pods(sw.w.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		d.logger.Warn("creating pod", "workload", sw.w.Namespace+"/"+sw.w.Name, "node", sn.name, "err", err)
		return false
	}
	sw.pending[created.Name] = pendingPod{node: sn.name, created: now}
	return true
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
