package gke

import (
	"slices"
	"strconv"
	"strings"
)

// tpuMachineFamilies are the Cloud TPU VM machine families GKE runs; their machine types end in the VM's chip
// count, "-<n>t" (ct5lp-hightpu-4t, ct6e-standard-8t).
var tpuMachineFamilies = []string{"ct3", "ct3p", "ct4p", "ct5l", "ct5lp", "ct5p", "ct6e", "tpu7x"}

// TPUChipsPerVM is the number of TPU chips on one VM of a machine type: the n of its last segment "<n>t". Machine
// types of other families, or not ending so, are not known: false.
func TPUChipsPerVM(machineType string) (int, bool) {
	family, _, ok := strings.Cut(machineType, "-")
	if !ok || !slices.Contains(tpuMachineFamilies, family) {
		return 0, false
	}
	last := machineType[strings.LastIndexByte(machineType, '-')+1:]
	count, ok := strings.CutSuffix(last, "t")
	if !ok {
		return 0, false
	}
	return positive(count)
}

// TPUTopologyChips is the chip count of a TPU topology such as "2x2x4": the product of its dimensions.
func TPUTopologyChips(topology string) (int, bool) {
	if topology == "" {
		return 0, false
	}
	chips := 1
	for _, dim := range strings.Split(topology, "x") {
		n, ok := positive(dim)
		if !ok || chips > maxTPUChips/n {
			return 0, false
		}
		chips *= n
	}
	return chips, true
}

// maxTPUChips bounds a topology's product, far above any real slice, so garbage cannot overflow.
const maxTPUChips = 1 << 20

// TPUSliceHosts is the number of VMs in the TPU slice of a node with these labels: the topology's chips divided by
// the chips per VM of the machine type; above 1 the node is one host of a multi-host slice. It is false, never a
// guess, for non-TPU nodes, unknown machine types, a missing or garbled topology, or a topology that is not a
// whole number of VMs.
func TPUSliceHosts(labels map[string]string) (int, bool) {
	chips, ok := TPUTopologyChips(labels[LabelTPUTopology])
	if !ok {
		return 0, false
	}
	perVM, ok := TPUChipsPerVM(MachineType(labels))
	if !ok || chips%perVM != 0 {
		return 0, false
	}
	return chips / perVM, true
}

func positive(s string) (int, bool) {
	if s == "" || len(s) > 7 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
