package driver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// kubelet is the kubelets' part: pods bound to a Ready node start running, a Job's pod succeeds once it has run
// for its workload's runFor (counted from the pod's start time on the API server, so a restarted driver keeps it),
// deleted pods stop (after PodShutdown, never beyond their grace period) and are removed. It remembers what it has
// done per pod, because the informer cache shows its own writes only a moment later.
type kubelet struct {
	started      map[types.UID]bool
	succeeded    map[types.UID]bool
	deletingSeen map[types.UID]time.Time
	finished     map[types.UID]bool
	// deleted pods GKE has evicted; shared with evict.
	deleted map[types.UID]bool
}

func newKubelet() kubelet {
	return kubelet{
		started:      map[types.UID]bool{},
		succeeded:    map[types.UID]bool{},
		deletingSeen: map[types.UID]time.Time{},
		finished:     map[types.UID]bool{},
		deleted:      map[types.UID]bool{},
	}
}

// sync runs the node's pods: it reports new ones running, Job pods that have run their time succeeded, and
// finishes deleted ones.
func (k *kubelet) sync(ctx context.Context, d *Driver, sn *simNode, pods []*corev1.Pod, now time.Time) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			seen, ok := k.deletingSeen[pod.UID]
			if !ok {
				seen = now
				k.deletingSeen[pod.UID] = now
			}
			if !now.Before(seen.Add(time.Duration(d.sc.GKE.PodShutdown))) || !now.Before(pod.DeletionTimestamp.Time) {
				k.finish(ctx, d, pod)
			}
			continue
		}
		switch pod.Status.Phase {
		case corev1.PodRunning:
			k.complete(ctx, d, pod, now)
			continue
		case corev1.PodSucceeded, corev1.PodFailed:
			continue
		}
		if !sn.ready || k.started[pod.UID] {
			continue
		}
		pod = pod.DeepCopy()
		pod.Status = runningStatus(pod, hostIP(d, sn), now)
		_, err := d.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		switch {
		case err == nil:
			k.started[pod.UID] = true
		case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err):
			d.logger.Warn("reporting pod running", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
}

// complete reports a running pod succeeded once it has run for its workload's runFor.
func (k *kubelet) complete(ctx context.Context, d *Driver, pod *corev1.Pod, now time.Time) {
	runFor := d.runFor(pod)
	if runFor == 0 || k.succeeded[pod.UID] || pod.Status.StartTime == nil ||
		now.Before(pod.Status.StartTime.Add(d.clock.wall(runFor))) {
		return
	}
	pod = pod.DeepCopy()
	pod.Status = succeededStatus(pod, now)
	_, err := d.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	switch {
	case err == nil:
		k.succeeded[pod.UID] = true
		d.logger.Debug("pod succeeded", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err):
		d.logger.Warn("reporting pod succeeded", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// finish removes a stopped pod, as the kubelet does once its containers have exited.
func (k *kubelet) finish(ctx context.Context, d *Driver, pod *corev1.Pod) {
	if k.finished[pod.UID] {
		return
	}
	zero := int64(0)
	err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		d.logger.Warn("removing stopped pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	k.finished[pod.UID] = true
}

// forget drops what it remembers of pods that no longer exist.
func (k *kubelet) forget(pods []*corev1.Pod) {
	live := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		live[pod.UID] = true
	}
	for _, m := range []map[types.UID]bool{k.started, k.succeeded, k.finished, k.deleted} {
		for uid := range m {
			if !live[uid] {
				delete(m, uid)
			}
		}
	}
	for uid := range k.deletingSeen {
		if !live[uid] {
			delete(k.deletingSeen, uid)
		}
	}
}

func hostIP(d *Driver, sn *simNode) string {
	return nodeStatus(d.sc, sn, true, time.Time{}).Addresses[0].Address
}
