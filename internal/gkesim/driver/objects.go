package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

// Labels and taints GKE puts on nodes.
const (
	LabelNodePool              = "cloud.google.com/gke-nodepool"
	LabelAccelerator           = "cloud.google.com/gke-accelerator"
	LabelTPUAccelerator        = "cloud.google.com/gke-tpu-accelerator"
	LabelTPUTopology           = "cloud.google.com/gke-tpu-topology"
	LabelSpot                  = "cloud.google.com/gke-spot"
	LabelProvisioning          = "cloud.google.com/gke-provisioning"
	LabelMachineFamily         = "cloud.google.com/machine-family"
	LabelScheduledMaintenance  = "cloud.google.com/scheduled-maintenance-time"
	LabelActiveMaintenance     = "cloud.google.com/active-node-maintenance"
	LabelPerformMaintenance    = "cloud.google.com/perform-maintenance"
	TaintImpendingTermination  = "cloud.google.com/impending-node-termination"
	taintGPU                   = "nvidia.com/gpu"
	taintTPU                   = "google.com/tpu"
	resourceGPU                = corev1.ResourceName("nvidia.com/gpu")
	resourceTPU                = corev1.ResourceName("google.com/tpu")
	maintenanceOngoing         = "ONGOING"
	maintenanceTerminating     = "terminating"
	labelWorkload              = "gkesim.gke-disruption-exporter.io/workload"
	systemNamespace            = metav1.NamespaceSystem
	systemNodeCriticalPriority = "system-node-critical"
)

// newNode is the node sn as GKE registers it, without status.
func newNode(sc *Scenario, sn *simNode) *corev1.Node {
	p, i, name := sn.pool, sn.index, sn.name
	labels := map[string]string{
		LabelNodePool:                          p.Name,
		LabelMachineFamily:                     strings.SplitN(p.MachineType, "-", 2)[0],
		"node.kubernetes.io/instance-type":     p.MachineType,
		"topology.kubernetes.io/zone":          p.Zone,
		"topology.kubernetes.io/region":        region(p.Zone),
		"kubernetes.io/hostname":               name,
		"kubernetes.io/os":                     "linux",
		"kubernetes.io/arch":                   "amd64",
		"cloud.google.com/gke-os-distribution": "cos",
		LabelProvisioning:                      "standard",
	}
	var taints []corev1.Taint
	if p.Accelerator != "" {
		labels[LabelAccelerator] = p.Accelerator
		taints = append(taints, corev1.Taint{Key: taintGPU, Value: "present", Effect: corev1.TaintEffectNoSchedule})
	}
	if p.TPU != nil {
		labels[LabelTPUAccelerator] = p.TPU.Accelerator
		labels[LabelTPUTopology] = p.TPU.Topology
		taints = append(taints, corev1.Taint{Key: taintTPU, Value: "present", Effect: corev1.TaintEffectNoSchedule})
	}
	if p.Spot {
		labels[LabelSpot] = "true"
		labels[LabelProvisioning] = "spot"
	}
	var annotations map[string]string
	if !sn.ends.IsZero() {
		labels[LabelFlexStart] = "true"
		labels[LabelMaxRunDuration] = strconv.FormatInt(int64(time.Duration(p.MaxRunDuration)/time.Second), 10)
		annotations = map[string]string{AnnotationMachineTermination: sn.ends.UTC().Format(time.RFC3339)}
	}
	if block := p.Block(i); block >= 0 {
		labels[gke.LabelTopologyBlock] = topologyID(sc, p, "block", block)
		labels[gke.LabelTopologySubblock] = topologyID(sc, p, "subblock", i/p.Topology.NodesPerSubblock)
		labels[gke.LabelTopologyHost] = topologyID(sc, p, "host", i)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.NodeSpec{
			ProviderID: fmt.Sprintf("gce://%s/%s/%s", sc.Cluster.Project, p.Zone, name),
			PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", 100+poolIndex(sc, p)%100, i%256),
			Taints:     taints,
		},
	}
}

// topologyID names a block, sub-block or host of a pool's zone as GKE's labels do: an opaque hex ID.
func topologyID(sc *Scenario, p *NodePool, kind string, index int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%s/%d", sc.Cluster.Project, p.Zone, p.Name, kind, index))
	return hex.EncodeToString(h[:16])
}

func poolIndex(sc *Scenario, p *NodePool) int {
	for i := range sc.NodePools {
		if &sc.NodePools[i] == p {
			return i
		}
	}
	return 0
}

// region is the region of a zone (us-central1-a -> us-central1).
func region(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 && strings.Count(zone, "-") >= 2 {
		return zone[:i]
	}
	return zone
}

// nodeStatus is what the kubelet of sn reports: capacity, addresses, versions and the Ready condition.
func nodeStatus(sc *Scenario, sn *simNode, ready bool, now time.Time) corev1.NodeStatus {
	p, i := sn.pool, sn.index
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	if p.Accelerator != "" {
		capacity[resourceGPU] = *resource.NewQuantity(int64(p.AcceleratorCount), resource.DecimalSI)
	}
	if p.TPU != nil {
		capacity[resourceTPU] = *resource.NewQuantity(int64(p.TPU.ChipsPerNode), resource.DecimalSI)
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions:  nodeConditions(ready, now),
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.128.%d.%d", poolIndex(sc, p), i%250+2)},
			{Type: corev1.NodeHostName, Address: sn.name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          "v" + sn.version,
			ContainerRuntimeVersion: "containerd://2.0.6",
			OSImage:                 "Container-Optimized OS from Google",
			KernelVersion:           "6.6.97+",
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
}

func nodeConditions(ready bool, now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now)
	readyCond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: t, LastTransitionTime: t}
	if !ready {
		readyCond.Status, readyCond.Reason, readyCond.Message = corev1.ConditionUnknown, "NodeStatusUnknown",
			"Kubelet stopped posting node status."
	}
	conds := []corev1.NodeCondition{readyCond}
	for _, c := range []struct {
		t      corev1.NodeConditionType
		reason string
	}{
		{corev1.NodeMemoryPressure, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, "KubeletHasSufficientPID"},
	} {
		conds = append(conds, corev1.NodeCondition{Type: c.t, Status: corev1.ConditionFalse, Reason: c.reason,
			LastHeartbeatTime: t, LastTransitionTime: t})
	}
	return conds
}

// nodeReady reads the node's Ready condition.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// owner is the object a workload's pods belong to, as a controller reference.
type owner struct {
	ref    metav1.OwnerReference
	labels map[string]string // the pods' labels
}

// workloadLabels select a workload's pods.
func workloadLabels(w *Workload) map[string]string {
	return map[string]string{"app.kubernetes.io/name": w.Name, labelWorkload: w.Name}
}

func newDeployment(w *Workload) *appsv1.Deployment {
	replicas := int32(w.Replicas)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: workloadLabels(w)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: workloadLabels(w)},
			Template: podTemplate(w, corev1.RestartPolicyAlways),
		},
	}
}

// newReplicaSet is the Deployment's ReplicaSet, which owns the pods as it would with the controllers running.
func newReplicaSet(w *Workload, d *appsv1.Deployment) *appsv1.ReplicaSet {
	hash := templateHash(w)
	labels := workloadLabels(w)
	labels["pod-template-hash"] = hash
	tmpl := podTemplate(w, corev1.RestartPolicyAlways)
	tmpl.Labels = labels
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: w.Name + "-" + hash, Namespace: w.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", d.Name, d.UID)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: d.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tmpl,
		},
	}
}

func templateHash(w *Workload) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s", w.Namespace, w.Name)
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// newJob is an Indexed Job with one completion per node: the completion index says which node a pod is for.
func newJob(w *Workload, nodes int) *batchv1.Job {
	n := int32(nodes)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: workloadLabels(w)},
		Spec: batchv1.JobSpec{
			Parallelism:    &n,
			Completions:    &n,
			CompletionMode: ptrTo(batchv1.IndexedCompletion),
			Template:       podTemplate(w, corev1.RestartPolicyNever),
		},
	}
}

func newDaemonSet(w *Workload) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: workloadLabels(w)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: workloadLabels(w)},
			Template: podTemplate(w, corev1.RestartPolicyAlways),
		},
	}
}

func newPDB(w *Workload) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: workloadLabels(w)},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: workloadLabels(w)}},
	}
	if w.PDB.MinAvailable != nil {
		v := w.PDB.MinAvailable.IntOrString
		pdb.Spec.MinAvailable = &v
	} else {
		v := w.PDB.MaxUnavailable.IntOrString
		pdb.Spec.MaxUnavailable = &v
	}
	return pdb
}

func podTemplate(w *Workload, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	grace := int64(time.Duration(w.TerminationGracePeriod).Seconds())
	spec := corev1.PodSpec{
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name:  w.Name,
			Image: "registry.k8s.io/pause:3.10",
		}},
		// The pools' accelerator taints, which GKE's admission adds for pods requesting accelerators.
		Tolerations: []corev1.Toleration{
			{Key: taintGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: taintTPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
	}
	if w.Kind == KindDaemonSet {
		spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		if w.Namespace == systemNamespace {
			spec.PriorityClassName = systemNodeCriticalPriority
		}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: workloadLabels(w)}, Spec: spec}
}

// newPod is a pod of a workload bound to node, named the way its controller names pods; index is the completion
// index of an Indexed Job's pod (annotation and label, as the Job controller sets them), -1 for other pods.
func newPod(w *Workload, o owner, tmpl corev1.PodTemplateSpec, p *NodePool, node string, index int) *corev1.Pod {
	prefix := o.ref.Name + "-"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       w.Namespace,
			Labels:          maps.Clone(o.labels),
			OwnerReferences: []metav1.OwnerReference{o.ref},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	if index >= 0 {
		i := strconv.Itoa(index)
		pod.GenerateName = prefix + i + "-"
		pod.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: i}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = i
	}
	pod.Spec.NodeName = node
	if w.Kind != KindDaemonSet {
		if p.Accelerator != "" {
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{resourceGPU: *resource.NewQuantity(1, resource.DecimalSI)}
		}
		if p.TPU != nil {
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
				resourceTPU: *resource.NewQuantity(int64(p.TPU.ChipsPerNode), resource.DecimalSI)}
		}
	}
	return pod
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// runningStatus is the status the kubelet reports once a pod's containers run.
func runningStatus(pod *corev1.Pod, hostIP string, now time.Time) corev1.PodStatus {
	t := metav1.NewTime(now)
	var containers []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		containers = append(containers, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptrTo(true),
			ContainerID: "containerd://" + string(pod.UID),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		})
	}
	status := corev1.PodStatus{
		Phase:             corev1.PodRunning,
		HostIP:            hostIP,
		PodIP:             podIP(pod.UID),
		StartTime:         &t,
		ContainerStatuses: containers,
		QOSClass:          pod.Status.QOSClass, // set by the API server at creation, immutable
	}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: t})
	}
	return status
}

// succeededStatus is the status the kubelet reports once the containers of a running pod have exited 0.
func succeededStatus(pod *corev1.Pod, now time.Time) corev1.PodStatus {
	t := metav1.NewTime(now)
	status := *pod.Status.DeepCopy()
	status.Phase = corev1.PodSucceeded
	for i := range status.ContainerStatuses {
		c := &status.ContainerStatuses[i]
		started := t
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: t, ContainerID: c.ContainerID}}
		c.Ready, c.Started = false, ptrTo(false)
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", t
		}
	}
	return status
}

func podIP(uid types.UID) string {
	h := fnv.New32a()
	h.Write([]byte(uid))
	v := h.Sum32()
	return fmt.Sprintf("10.%d.%d.%d", 64+v%32, (v>>8)%256, (v>>16)%254+1)
}

// podReady reads the pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// systemPod tells the pods GKE evicts last: those of kube-system and node-critical ones.
func systemPod(pod *corev1.Pod) bool {
	return pod.Namespace == systemNamespace || pod.Spec.PriorityClassName == systemNodeCriticalPriority ||
		pod.Spec.PriorityClassName == "system-cluster-critical"
}

func ptrTo[T any](v T) *T { return &v }
