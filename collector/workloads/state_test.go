package workloads

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// owners is a metadata cache for state tests: UID → controller (nil for none).
type owners map[types.UID]*ownerInput

func (o owners) lookup(_, _, _, _ string, uid types.UID) (*ownerInput, bool) {
	next, ok := o[uid]
	return next, ok
}

func text(t *testing.T, s *state) string {
	t.Helper()
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func gpuNode(name string, maintenance int64) nodeInfo {
	return nodeInfo{name: name, Node: readiness.Node{Accelerated: true}, maintenance: maintenance}
}

func TestPodOnUnknownNodeKeptUntilNodeKnown(t *testing.T) {
	s := newState(testConfig, owners{}.lookup)
	s.setGracefulTermination(true)
	s.setPod(&podInput{namespace: "a", name: "p", node: "n1", grace: 600}, true)
	s.setPod(&podInput{namespace: "a", name: "q", node: "n2", grace: 600}, true)
	if got := text(t, s); got != "" {
		t.Fatalf("pods on unknown nodes exported:\n%s", got)
	}
	s.setNode(gpuNode("n1", 1764547200))
	s.setNode(nodeInfo{name: "n2"}) // ordinary: its pod is forgotten
	want := `gke_workload_nodes{namespace="a",workload="p",workload_kind="Pod"} 1
gke_workload_next_maintenance_timestamp_seconds{namespace="a",workload="p",workload_kind="Pod"} 1.7645472e+09
gke_workload_next_interruption_timestamp_seconds{interruption="maintenance",namespace="a",workload="p",workload_kind="Pod"} 1.7645472e+09`
	if got := text(t, s); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if len(s.pods) != 1 {
		t.Errorf("%d pods kept, want 1", len(s.pods))
	}
	s.deleteNode("n1")
	if got := text(t, s); got != "" {
		t.Errorf("pods of a deleted node still counted:\n%s", got)
	}
}

func TestOwnerSeenAfterPod(t *testing.T) {
	cache := owners{}
	s := newState(testConfig, cache.lookup)
	s.setGracefulTermination(true)
	s.setNode(gpuNode("n1", 0))
	rs := &ownerInput{apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-abc", uid: "rs"}
	s.setPod(&podInput{namespace: "a", name: "web-abc-1", node: "n1", owner: rs, grace: 600}, true)
	if got, want := text(t, s), `gke_workload_nodes{namespace="a",workload="web-abc",workload_kind="ReplicaSet"} 1`; got != want {
		t.Fatalf("before the ReplicaSet is known: got\n%s\nwant\n%s", got, want)
	}
	cache["rs"] = &ownerInput{apiVersion: "apps/v1", kind: "Deployment", name: "web", uid: "d"}
	s.ownerChanged("a", "rs", false)
	if got, want := text(t, s), `gke_workload_nodes{namespace="a",workload="web",workload_kind="Deployment"} 1`; got != want {
		t.Fatalf("after: got\n%s\nwant\n%s", got, want)
	}
	if len(s.workloads) != 1 || len(s.dense) != 1 {
		t.Errorf("%d workloads kept, want 1", len(s.workloads))
	}
}

func TestStatusUpdatesChangeNothing(t *testing.T) {
	s := newState(testConfig, owners{}.lookup)
	s.setNode(gpuNode("n1", 0))
	in := &podInput{namespace: "a", name: "p", node: "n1", grace: 10, labels: map[string]string{"app": "x"}}
	s.setPod(in, true)
	before := s.pods[podKey{"a", "p"}]
	s.setPod(&podInput{namespace: "a", name: "p", node: "n1", grace: 10, labels: map[string]string{"app": "x"}}, true)
	if s.pods[podKey{"a", "p"}] != before {
		t.Error("an unchanged pod was replaced")
	}
	s.setPod(in, false) // finished
	if len(s.pods) != 0 || len(s.workloads) != 0 || len(s.labelSets) != 0 || len(s.owners) != 0 {
		t.Errorf("a finished pod left state behind: %d pods, %d workloads, %d label sets", len(s.pods), len(s.workloads), len(s.labelSets))
	}
}

func TestPerPodLabelsShared(t *testing.T) {
	s := newState(testConfig, owners{}.lookup)
	s.setNode(gpuNode("n1", 0))
	for _, index := range []string{"0", "1", "2"} {
		s.setPod(&podInput{namespace: "a", name: "p" + index, node: "n1", grace: 600,
			labels: map[string]string{"app": "x", "batch.kubernetes.io/job-completion-index": index}}, true)
	}
	if len(s.labelSets) != 1 {
		t.Errorf("%d label sets for one Job's pods, want 1", len(s.labelSets))
	}
	sel, _ := labels.Parse("app=x")
	s.setPDB("a", "x", sel, true)
	if got := s.workloads[workloadKey{"a", "Pod", "p1"}].findings[readiness.CheckPDBBlocksDrain]; got != 1 {
		t.Errorf("blocking PDB not applied: %d", got)
	}
	s.setPDB("b", "x", sel, true) // another namespace selects none of them
	s.deletePDB("a", "x")
	if got := s.workloads[workloadKey{"a", "Pod", "p1"}].findings[readiness.CheckPDBBlocksDrain]; got != 0 {
		t.Errorf("deleted PDB still applied: %d", got)
	}
}

func TestNodeIndexFollowsPods(t *testing.T) {
	s := newState(testConfig, owners{}.lookup)
	s.setNode(gpuNode("n1", 0))
	s.setNode(gpuNode("n2", 0))
	job := &ownerInput{apiVersion: "batch/v1", kind: "Job", name: "j", uid: "j"}
	s.setPod(&podInput{namespace: "a", name: "j-0", node: "n1", owner: job, grace: 600}, true)
	s.setPod(&podInput{namespace: "a", name: "j-1", node: "n1", owner: job, grace: 600}, true)
	s.setPod(&podInput{namespace: "a", name: "j-2", node: "n2", owner: job, grace: 600}, true)
	if len(s.byNode["n1"]) != 1 || len(s.byNode["n2"]) != 1 {
		t.Fatalf("index %v", s.byNode)
	}
	s.setNode(gpuNode("n2", 1764547200))
	if got := text(t, s); !strings.Contains(got, `gke_workload_next_maintenance_timestamp_seconds{namespace="a",workload="j",workload_kind="Job"} 1.7645472e+09`) {
		t.Errorf("maintenance not followed:\n%s", got)
	}
	s.deletePod("a", "j-2")
	s.deletePod("a", "j-0")
	if len(s.byNode) != 1 || len(s.byNode["n1"]) != 1 {
		t.Errorf("index after deletes %v", s.byNode)
	}
	s.deletePod("a", "j-1")
	if len(s.byNode) != 0 {
		t.Errorf("index after the last pod %v", s.byNode)
	}
}

// TestLeaderWorkerSet: a worker pod's StatefulSet is owned by its group's leader pod, whose StatefulSet the
// LeaderWorkerSet owns; the worker's workload is the LeaderWorkerSet, even when the leader arrives last.
func TestLeaderWorkerSet(t *testing.T) {
	lws := &ownerInput{apiVersion: "leaderworkerset.x-k8s.io/v1", kind: "LeaderWorkerSet", name: "vllm", uid: "lws"}
	cache := owners{
		"leader-sts": lws,
		"worker-sts": {apiVersion: "v1", kind: "Pod", name: "vllm-0", uid: "leader-pod"},
	}
	s := newState(testConfig, cache.lookup)
	s.setGracefulTermination(true)
	s.setNode(gpuNode("n1", 0))
	s.setNode(gpuNode("n2", 0))
	s.setPod(&podInput{namespace: "a", name: "vllm-0-1", node: "n2", grace: 600,
		owner: &ownerInput{apiVersion: "apps/v1", kind: "StatefulSet", name: "vllm-0", uid: "worker-sts"}}, true)
	s.setPod(&podInput{namespace: "a", name: "vllm-0", uid: "leader-pod", node: "n1", grace: 600,
		owner: &ownerInput{apiVersion: "apps/v1", kind: "StatefulSet", name: "vllm", uid: "leader-sts"}}, true)
	if got, want := text(t, s), `gke_workload_nodes{namespace="a",workload="vllm",workload_kind="LeaderWorkerSet"} 2`; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestWorkloadLabels: a pod whose controller labels it with its LeaderWorkerSet or JobSet belongs to that workload
// even where the owner walk stops short: here a worker whose leader pod runs on a node the collector keeps no pods of.
func TestWorkloadLabels(t *testing.T) {
	cache := owners{"worker-sts": {apiVersion: "v1", kind: "Pod", name: "vllm-0", uid: "leader-pod"}}
	s := newState(testConfig, cache.lookup)
	s.setGracefulTermination(true)
	s.setNode(gpuNode("n2", 0))
	s.setPod(&podInput{namespace: "a", name: "vllm-0-1", node: "n2", grace: 600,
		labels: map[string]string{"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/worker-index": "1"},
		owner:  &ownerInput{apiVersion: "apps/v1", kind: "StatefulSet", name: "vllm-0", uid: "worker-sts"}}, true)
	s.setPod(&podInput{namespace: "a", name: "train-slice-0-0-x", node: "n2", grace: 600,
		labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "train"},
		owner:  &ownerInput{apiVersion: "batch/v1", kind: "Job", name: "train-slice-0", uid: "unknown-job"}}, true)
	want := `gke_workload_nodes{namespace="a",workload="vllm",workload_kind="LeaderWorkerSet"} 1
gke_workload_nodes{namespace="a",workload="train",workload_kind="JobSet"} 1`
	if got := text(t, s); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// A workload's next interruption is the earliest of its nodes' maintenance and planned VM ends, named.
func TestNextInterruption(t *testing.T) {
	s := newState(testConfig, owners{}.lookup)
	s.setGracefulTermination(true)
	s.setPod(&podInput{namespace: "a", name: "p", node: "n1", grace: 600}, true)
	s.setPod(&podInput{namespace: "a", name: "q", node: "n2", grace: 600}, true)
	flex := func(name string, end int64) nodeInfo {
		n := gpuNode(name, 0)
		n.termination = end
		return n
	}
	s.setNode(gpuNode("n1", 1764547200))
	s.setNode(flex("n2", 1764500000))
	want := `gke_workload_nodes{namespace="a",workload="p",workload_kind="Pod"} 1
gke_workload_nodes{namespace="a",workload="q",workload_kind="Pod"} 1
gke_workload_next_maintenance_timestamp_seconds{namespace="a",workload="p",workload_kind="Pod"} 1.7645472e+09
gke_workload_next_interruption_timestamp_seconds{interruption="maintenance",namespace="a",workload="p",workload_kind="Pod"} 1.7645472e+09
gke_workload_next_interruption_timestamp_seconds{interruption="termination",namespace="a",workload="q",workload_kind="Pod"} 1.7645e+09`
	if got := text(t, s); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Both on one node: the earlier wins; maintenance where they fall together.
	n := flex("n1", 1764540000)
	n.maintenance = 1764547200
	s.setNode(n)
	if got := text(t, s); !strings.Contains(got, `gke_workload_next_interruption_timestamp_seconds{interruption="termination",namespace="a",workload="p",workload_kind="Pod"} 1.76454e+09`) {
		t.Errorf("an earlier planned end is not the next interruption:\n%s", got)
	}
	n.termination = n.maintenance
	s.setNode(n)
	if got := text(t, s); !strings.Contains(got, `gke_workload_next_interruption_timestamp_seconds{interruption="maintenance",namespace="a",workload="p",workload_kind="Pod"} 1.7645472e+09`) {
		t.Errorf("a tie is not maintenance:\n%s", got)
	}
	s.setNode(gpuNode("n2", 0))
	if got := text(t, s); strings.Contains(got, `workload="q",workload_kind="Pod"} 1.7645e+09`) {
		t.Errorf("a planned end that is gone is still reported:\n%s", got)
	}
}
