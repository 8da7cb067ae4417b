package workloads

import (
	"reflect"
	"testing"
)

// placed drains one placement signal, reporting whether there was one.
func placed(s *state) bool {
	select {
	case <-s.placement:
		return true
	default:
		return false
	}
}

// TestWorkloadsOn follows a node's workloads through pods arriving, moving to a new owner, leaving, and the node
// turning ordinary, with a placement signal for each change and none for a change that moves nothing.
func TestWorkloadsOn(t *testing.T) {
	cache := owners{}
	s := newState(testConfig, cache.lookup)
	if _, watched := s.workloadsOn("n1"); watched {
		t.Fatal("a node never seen is watched")
	}
	s.setNode(gpuNode("n1", 0))
	s.setNode(gpuNode("n2", 0))
	placed(s)
	if got, watched := s.workloadsOn("n1"); !watched || len(got) != 0 {
		t.Fatalf("empty GPU node: %v, watched %v", got, watched)
	}

	rs := &ownerInput{apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-abc", uid: "rs"}
	cache["rs"] = &ownerInput{apiVersion: "apps/v1", kind: "Deployment", name: "web", uid: "d"}
	s.setPod(&podInput{namespace: "serving", name: "web-abc-1", node: "n1", owner: rs, grace: 30}, true)
	s.setPod(&podInput{namespace: "serving", name: "web-abc-2", node: "n1", owner: rs, grace: 30}, true)
	s.setPod(&podInput{namespace: "batch", name: "debug", node: "n1", grace: 30}, true)
	// A DaemonSet pod is not kept (podFrom says so): it changes nothing.
	ds := &ownerInput{apiVersion: "apps/v1", kind: "DaemonSet", name: "agent", uid: "ds"}
	s.setPod(&podInput{namespace: "kube-system", name: "agent-x", node: "n1", owner: ds}, false)
	if !placed(s) {
		t.Error("no placement signal after pods arrived")
	}
	want := []Workload{{"batch", "Pod", "debug"}, {"serving", "Deployment", "web"}}
	if got, _ := s.workloadsOn("n1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("n1: got %v, want %v", got, want)
	}

	// A status update of a pod already counted moves nothing.
	s.setPod(&podInput{namespace: "serving", name: "web-abc-2", node: "n1", owner: rs, grace: 30}, true)
	// One of two pods of a workload leaving the node leaves the workload on it.
	s.deletePod("serving", "web-abc-2")
	if placed(s) {
		t.Error("placement signal though no workload moved")
	}

	s.deletePod("batch", "debug")
	if !placed(s) {
		t.Error("no placement signal after a workload left the node")
	}
	if got, _ := s.workloadsOn("n1"); !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("n1 after the bare pod left: got %v", got)
	}

	// The node turning ordinary: no longer watched, its pods forgotten.
	s.setNode(nodeInfo{name: "n1"})
	if !placed(s) {
		t.Error("no placement signal after the node turned ordinary")
	}
	if got, watched := s.workloadsOn("n1"); watched || got != nil {
		t.Errorf("ordinary node: %v, watched %v", got, watched)
	}
	if got, watched := s.workloadsOn("n2"); !watched || len(got) != 0 {
		t.Errorf("n2: %v, watched %v", got, watched)
	}
}
