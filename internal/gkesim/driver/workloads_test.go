package driver

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
