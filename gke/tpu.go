package gke

import (
	"strconv"
	"strings"
)

// TPUChipsPerVM reads the chips of one TPU VM from its machine type, the number before "t" in the last part
// (ct5lp-hightpu-4t → 4, ct6e-standard-8t → 8). Other machine types report false.
func TPUChipsPerVM(machineType string) (int, bool) {
	if !strings.HasPrefix(machineType, "ct") {
		return 0, false
	}
	last := machineType[strings.LastIndexByte(machineType, '-')+1:]
	digits, ok := strings.CutSuffix(last, "t")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// TPUTopologyChips multiplies the dimensions of a gke-tpu-topology value ("2x4" → 8, "4x4x4" → 64).
func TPUTopologyChips(topology string) (int, bool) {
	if topology == "" {
		return 0, false
	}
	chips := 1
	for _, dim := range strings.Split(topology, "x") {
		n, err := strconv.Atoi(dim)
		if err != nil || n <= 0 || chips > 1<<20 {
			return 0, false
		}
		chips *= n
	}
	return chips, true
}

// TPUSliceHosts is the number of VMs in the node's TPU slice: topology chips ÷ chips per VM. More than one is a
// multi-host slice, which GKE disrupts as a whole. Nodes that are not TPU nodes, or whose labels do not say, report
// false: never a guess.
func TPUSliceHosts(labels map[string]string) (int, bool) {
	chips, ok := TPUTopologyChips(labels[LabelTPUTopology])
	if !ok {
		return 0, false
	}
	machineType := labels[LabelInstanceType]
	if machineType == "" {
		machineType = labels[LabelInstanceTypeDeprecated]
	}
	perVM, ok := TPUChipsPerVM(machineType)
	if !ok || chips%perVM != 0 {
		return 0, false
	}
	return chips / perVM, true
}
