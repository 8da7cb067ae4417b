package workloads

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// Finding is a workload failing a readiness check and the number of its pods that fail it: one sample of
// gke_readiness_findings. A check of the cluster names no workload and counts 1.
type Finding struct {
	Check    readiness.ID
	Workload Workload // zero for a check of the cluster
	Pods     int
}

// Findings returns what gke_readiness_findings shows, in the checks' order, then by namespace, kind and name.
func (c *Collector) Findings() ([]Finding, error) {
	if !c.HasSynced() {
		return nil, errNotSynced
	}
	return c.state.findings(), nil
}

func (s *state) findings() []Finding {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Finding
	if s.clusterFinding() {
		out = append(out, Finding{Check: readiness.CheckGracefulTerminationDisabled, Pods: 1})
	}
	for _, w := range s.dense {
		for id, pods := range w.findings {
			if pods > 0 {
				out = append(out, Finding{Check: readiness.ID(id), Pods: pods,
					Workload: Workload{Namespace: w.key.namespace, Kind: w.key.kind, Name: w.key.name}})
			}
		}
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Check, b.Check), strings.Compare(a.Workload.Namespace, b.Workload.Namespace),
			strings.Compare(a.Workload.Kind, b.Workload.Kind), strings.Compare(a.Workload.Name, b.Workload.Name))
	})
	return out
}
