package workloads

import (
	"cmp"
	"slices"
	"strings"
)

// Workload is a top owner, named as in the collector's series.
type Workload struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

// WorkloadsOn returns the workloads with pods on node, sorted by namespace, kind and name. DaemonSet and static
// pods are not counted: they stay on a drained node. watched is false when the collector does not read the node's
// pods: a node it has not seen, or one that is neither GPU, TPU nor Spot.
func (c *Collector) WorkloadsOn(node string) (workloads []Workload, watched bool) {
	return c.state.workloadsOn(node)
}

// Placement is signalled, coalesced, after a change that alters what WorkloadsOn answers for some node; it is never
// closed.
func (c *Collector) Placement() <-chan struct{} { return c.state.placement }

func (s *state) workloadsOn(node string) ([]Workload, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.nodes[node]
	if !ok || !n.interesting() {
		return nil, false
	}
	list := s.byNode[node]
	out := make([]Workload, len(list))
	for i, w := range list {
		out[i] = Workload{Namespace: w.key.namespace, Kind: w.key.kind, Name: w.key.name}
	}
	slices.SortFunc(out, func(a, b Workload) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out, true
}
