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

// Findings returns what gke_readiness_findings shows, in the checks' order, then by namespace, kind and name. With
// onNode, only the pods on the nodes it accepts count (the cluster's own check always does).
func (c *Collector) Findings(onNode func(node string) bool) ([]Finding, error) {
	if !c.HasSynced() {
		return nil, errNotSynced
	}
	return c.state.findings(onNode), nil
}

func (s *state) findings(onNode func(node string) bool) []Finding {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Finding
	if s.clusterFinding() {
		out = append(out, Finding{Check: readiness.CheckGracefulTerminationDisabled, Pods: 1})
	}
	add := func(w *workload, counts *[readiness.NumChecks]int) {
		for id, pods := range counts {
			if pods > 0 {
				out = append(out, Finding{Check: readiness.ID(id), Pods: pods,
					Workload: Workload{Namespace: w.key.namespace, Kind: w.key.kind, Name: w.key.name}})
			}
		}
	}
	if onNode == nil {
		for _, w := range s.dense {
			add(w, &w.findings)
		}
	} else {
		// The workloads keep their counts over all their pods: count again over the accepted ones.
		counts := map[*workload]*[readiness.NumChecks]int{}
		for _, p := range s.pods {
			if p.findings == 0 || !onNode(p.node) {
				continue
			}
			c := counts[p.workload]
			if c == nil {
				c = &[readiness.NumChecks]int{}
				counts[p.workload] = c
			}
			for id := range readiness.NumChecks {
				if p.findings.Has(id) {
					c[id]++
				}
			}
		}
		for w, c := range counts {
			add(w, c)
		}
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Check, b.Check), strings.Compare(a.Workload.Namespace, b.Workload.Namespace),
			strings.Compare(a.Workload.Kind, b.Workload.Kind), strings.Compare(a.Workload.Name, b.Workload.Name))
	})
	return out
}
