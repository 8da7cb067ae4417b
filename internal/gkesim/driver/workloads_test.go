package driver

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

const jobSetScenario = `
cluster: {project: sim-project, location: us-central1, name: sim}
nodePools:
  - {name: tpu-v5p, machineType: ct5p-hightpu-4t, tpu: {accelerator: tpu-v5p-slice, topology: 2x2x2}, nodes: 2}
workloads:
  - {name: train-llm, namespace: training, kind: JobSet, nodePools: [tpu-v5p], terminationGracePeriod: 5m}
`

// TestJobSetWorkload: a JobSet's pods belong to its Job, whose controller is the JobSet, on every node of its pools.
func TestJobSetWorkload(t *testing.T) {
	api, d, _, _ := startDriver(t, jobSetScenario)
	ctx := context.Background()
	job, err := api.Client.BatchV1().Jobs("training").Get(ctx, "train-llm-slice-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "JobSet" || ref.Name != "train-llm" || ref.APIVersion != "jobset.x-k8s.io/v1alpha2" || ref.UID == "" {
		t.Fatalf("the Job's controller is %+v, want JobSet train-llm", ref)
	}
	if again := newJobSetJob(&d.sc.Workloads[0], 2); again.OwnerReferences[0].UID != ref.UID {
		t.Errorf("the JobSet's UID changes between runs: %s, then %s", ref.UID, again.OwnerReferences[0].UID)
	}
	testenv.Eventually(t, 30*time.Second, "a JobSet pod on every node of the slice", func() error {
		for _, node := range d.sc.NodeNames("tpu-v5p") {
			pods := podsOn(t, api, "training", node)
			if runningPods(pods) != 1 {
				return fmt.Errorf("node %s runs %d pods", node, runningPods(pods))
			}
			p := pods[0]
			if owner := metav1.GetControllerOf(&p); owner == nil || owner.UID != job.UID {
				return fmt.Errorf("pod %s is owned by %+v, not the Job", p.Name, owner)
			}
			if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != 300 {
				return fmt.Errorf("pod %s grace %v", p.Name, g)
			}
		}
		return nil
	})
}

// jobScenario plays a minute of story per second. The Jobs come before the marker Deployment: the driver
// reconciles workloads in scenario order, so once the marker's deleted pod has been replaced, the Jobs have had
// their turn in a pass that saw everything deleted before it.
const jobScenario = `
cluster: {project: sim-project, location: us-central1, name: sim}
timeScale: 60
gke: {podShutdown: 100ms}
nodePools:
  - {name: a2, machineType: a2-ultragpu-1g, accelerator: nvidia-a100-80gb, nodes: 3}
  - {name: cpu, machineType: e2-standard-8, nodes: 1}
workloads:
  - {name: sweep, namespace: research, kind: Job, nodePools: [a2], nodes: [0, 2], startAt: 3m, runFor: 4m}
  - {name: finetune, namespace: research, kind: Job, nodePools: [a2], nodes: [1], runFor: 10m}
  - {name: marker, namespace: web, kind: Deployment, nodePools: [cpu], replicas: 1}
`

// jobPods lists a Job's pods.
func jobPods(t *testing.T, api *testenv.APIServer, namespace, job string) []corev1.Pod {
	t.Helper()
	pods, err := api.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// replaceMarker deletes the marker Deployment's pod and waits for its replacement: proof that the driver has made
// a pass over everything that happened before.
func replaceMarker(t *testing.T, api *testenv.APIServer) {
	t.Helper()
	ctx := context.Background()
	var old corev1.Pod
	testenv.Eventually(t, 30*time.Second, "marker pod running", func() error {
		pods, err := api.Client.CoreV1().Pods("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || runningPods(pods.Items) != 1 {
			return fmt.Errorf("%d marker pods, %d running", len(pods.Items), runningPods(pods.Items))
		}
		old = pods.Items[0]
		return nil
	})
	zero := int64(0)
	if err := api.Client.CoreV1().Pods("web").Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "marker pod replaced", func() error {
		pods, err := api.Client.CoreV1().Pods("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].UID == old.UID {
			return fmt.Errorf("%d marker pods, the old one among them", len(pods.Items))
		}
		return nil
	})
}

func deletePods(t *testing.T, api *testenv.APIServer, pods []corev1.Pod) {
	t.Helper()
	zero := int64(0)
	for _, p := range pods {
		if err := api.Client.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSucceeded checks a pod as the kubelet reports one whose containers exited 0, after running at least runFor.
func checkSucceeded(p corev1.Pod, runFor time.Duration) error {
	if p.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
	}
	if podReady(&p) {
		return fmt.Errorf("pod %s succeeded but is still Ready", p.Name)
	}
	if len(p.Status.ContainerStatuses) != 1 {
		return fmt.Errorf("pod %s has %d container statuses", p.Name, len(p.Status.ContainerStatuses))
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		return fmt.Errorf("pod %s container state %+v, want terminated with exit code 0", p.Name, p.Status.ContainerStatuses[0].State)
	}
	// Both times are whole seconds, the start rounded down as much as the finish.
	if ran := term.FinishedAt.Sub(term.StartedAt.Time); ran < runFor || !term.StartedAt.Equal(p.Status.StartTime) {
		return fmt.Errorf("pod %s ran %s from %s (pod started %s), want at least %s", p.Name, ran, term.StartedAt, p.Status.StartTime, runFor)
	}
	return nil
}

func checkJobComplete(t *testing.T, api *testenv.APIServer, namespace, name, indexes string, succeeded int32) error {
	t.Helper()
	job, err := api.Client.BatchV1().Jobs(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s := job.Status
	complete := false
	for _, c := range s.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			complete = true
		}
	}
	if s.CompletedIndexes != indexes || s.Succeeded != succeeded || !complete || s.CompletionTime == nil || s.StartTime == nil {
		return fmt.Errorf("job %s status %+v, want indexes %s, %d succeeded, complete", name, s, indexes, succeeded)
	}
	return nil
}

// TestJobPodsStartAndFinish: a Job's pods are created at its startAt on the nodes it names, succeed after runFor
// and are not run again, not even when the finished pods are deleted; a pod deleted before it finished is
// replaced and runs the full time.
func TestJobPodsStartAndFinish(t *testing.T) {
	api, d, _, _ := startDriver(t, jobScenario)
	ctx := context.Background()
	nodes := d.sc.NodeNames("a2")
	const wait = 30 * time.Second
	start := d.clock.at(3 * time.Minute).Truncate(time.Second)

	var sweep []corev1.Pod
	testenv.Eventually(t, wait, "sweep pods running on nodes 0 and 2", func() error {
		sweep = jobPods(t, api, "research", "sweep")
		if len(sweep) != 2 || runningPods(sweep) != 2 {
			return fmt.Errorf("%d sweep pods, %d running", len(sweep), runningPods(sweep))
		}
		return nil
	})
	for _, p := range sweep {
		want := map[string]string{nodes[0]: "0", nodes[2]: "1"}[p.Spec.NodeName]
		if want == "" || p.Annotations[batchv1.JobCompletionIndexAnnotation] != want || p.Labels[batchv1.JobCompletionIndexAnnotation] != want {
			t.Errorf("pod %s on node %s with completion index %q, want nodes 0 and 2 with indexes 0 and 1",
				p.Name, p.Spec.NodeName, p.Annotations[batchv1.JobCompletionIndexAnnotation])
		}
		if p.CreationTimestamp.Before(&metav1.Time{Time: start}) {
			t.Errorf("pod %s created at %s, before the Job's startAt (%s)", p.Name, p.CreationTimestamp, start)
		}
	}

	t.Run("evicted pod replaced and runs the full time", func(t *testing.T) {
		var first corev1.Pod
		testenv.Eventually(t, wait, "finetune pod running", func() error {
			pods := jobPods(t, api, "research", "finetune")
			if len(pods) != 1 || runningPods(pods) != 1 {
				return fmt.Errorf("%d finetune pods, %d running", len(pods), runningPods(pods))
			}
			first = pods[0]
			return nil
		})
		// Evicted some seconds into its run, the replacement starts later and still runs the full 10 s.
		testenv.Eventually(t, wait, "finetune pod running for 3s", func() error {
			if ran := time.Since(first.Status.StartTime.Time); ran < 3*time.Second {
				return fmt.Errorf("running for %s", ran)
			}
			return nil
		})
		grace := int64(1)
		if err := api.Client.CoreV1().Pods("research").Delete(ctx, first.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace,
			Preconditions: &metav1.Preconditions{ResourceVersion: &first.ResourceVersion}}); err != nil {
			t.Fatalf("evicting the running pod (it may have finished first): %v", err)
		}
		testenv.Eventually(t, wait, "finetune pod replaced on its node and finished", func() error {
			pods := jobPods(t, api, "research", "finetune")
			if len(pods) != 1 || pods[0].UID == first.UID {
				return fmt.Errorf("%d finetune pods, the evicted one among them", len(pods))
			}
			if p := pods[0]; p.Spec.NodeName != nodes[1] {
				return fmt.Errorf("replacement on %s, want node 1", p.Spec.NodeName)
			}
			return checkSucceeded(pods[0], 10*time.Second)
		})
		if p := jobPods(t, api, "research", "finetune")[0]; p.Status.StartTime.Sub(first.Status.StartTime.Time) < 2*time.Second {
			t.Errorf("replacement started %s, want seconds after the evicted pod (%s)", p.Status.StartTime, first.Status.StartTime)
		}
	})

	testenv.Eventually(t, wait, "sweep pods succeeded after runFor", func() error {
		pods := jobPods(t, api, "research", "sweep")
		if len(pods) != 2 {
			return fmt.Errorf("%d sweep pods", len(pods))
		}
		for _, p := range pods {
			if err := checkSucceeded(p, 4*time.Second); err != nil {
				return err
			}
		}
		return nil
	})
	testenv.Eventually(t, wait, "sweep complete in its status", func() error {
		return checkJobComplete(t, api, "research", "sweep", "0,1", 2)
	})
	testenv.Eventually(t, wait, "finetune complete in its status", func() error {
		return checkJobComplete(t, api, "research", "finetune", "0", 1)
	})

	// A drain deletes finished pods too: the Job is still complete on those nodes.
	deletePods(t, api, jobPods(t, api, "research", "sweep"))
	replaceMarker(t, api)
	left, err := api.Client.CoreV1().Pods("research").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left.Items {
		if p.Labels["job-name"] == "sweep" || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("a completed Job runs again: pod %s on %s, %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}

// TestJobCompletionSurvivesRestart: a restarted driver completes the pods that ran before at their own time,
// leaves succeeded pods succeeded, and does not run a completed Job again even with its pods gone.
func TestJobCompletionSurvivesRestart(t *testing.T) {
	const scenario = `
cluster: {project: sim-project, location: us-central1, name: sim}
timeScale: 60
nodePools:
  - {name: a2, machineType: a2-ultragpu-1g, accelerator: nvidia-a100-80gb, nodes: 2}
  - {name: cpu, machineType: e2-standard-8, nodes: 1}
workloads:
  - {name: sweep, namespace: research, kind: Job, nodePools: [a2], runFor: 5m}
  - {name: marker, namespace: web, kind: Deployment, nodePools: [cpu], replicas: 1}
`
	api := testenv.StartAPIServer(t)
	const wait = 30 * time.Second
	_, _, stop := runDriver(t, api, scenario)
	uids := map[types.UID]bool{}
	testenv.Eventually(t, wait, "sweep pods running", func() error {
		pods := jobPods(t, api, "research", "sweep")
		if len(pods) != 2 || runningPods(pods) != 2 {
			return fmt.Errorf("%d sweep pods, %d running", len(pods), runningPods(pods))
		}
		for _, p := range pods {
			uids[p.UID] = true
		}
		return nil
	})
	stop()

	_, _, stop = runDriver(t, api, scenario)
	testenv.Eventually(t, wait, "the same pods succeeded after the restart", func() error {
		pods := jobPods(t, api, "research", "sweep")
		if len(pods) != 2 {
			return fmt.Errorf("%d sweep pods", len(pods))
		}
		for _, p := range pods {
			if !uids[p.UID] {
				return fmt.Errorf("pod %s is new", p.Name)
			}
			if err := checkSucceeded(p, 5*time.Second); err != nil {
				return err
			}
		}
		return checkJobComplete(t, api, "research", "sweep", "0,1", 2)
	})
	stop()

	_, _, stop = runDriver(t, api, scenario)
	replaceMarker(t, api)
	pods := jobPods(t, api, "research", "sweep")
	if len(pods) != 2 {
		t.Fatalf("after a restart with the Job's pods succeeded: %d pods, want the 2 succeeded ones", len(pods))
	}
	for _, p := range pods {
		if err := checkSucceeded(p, 5*time.Second); err != nil || !uids[p.UID] {
			t.Errorf("after a restart: %v (pod %s known %v)", err, p.Name, uids[p.UID])
		}
	}
	stop()

	// The finished pods deleted while the driver is down: the Job's status remembers.
	deletePods(t, api, pods)
	runDriver(t, api, scenario)
	replaceMarker(t, api)
	if pods := jobPods(t, api, "research", "sweep"); len(pods) != 0 {
		t.Errorf("the completed Job runs again after a restart: %d pods", len(pods))
	}
}
