package gke

import "testing"

func TestTPUChipsPerVM(t *testing.T) {
	for machineType, want := range map[string]int{
		"ct5lp-hightpu-1t": 1, "ct5lp-hightpu-4t": 4, "ct5lp-hightpu-8t": 8, "ct5l-hightpu-8t": 8,
		"ct5p-hightpu-4t": 4, "ct4p-hightpu-4t": 4, "ct6e-standard-1t": 1, "ct6e-standard-4t": 4,
		"ct6e-standard-8t": 8, "tpu7x-standard-4t": 4,
	} {
		if got, ok := TPUChipsPerVM(machineType); !ok || got != want {
			t.Errorf("TPUChipsPerVM(%q) = %d, %v; want %d", machineType, got, ok, want)
		}
	}
	for _, machineType := range []string{
		"", "a3-highgpu-8g", "n2-standard-4", "ct5lp-hightpu", "ct5lp-hightpu-t", "ct5lp-hightpu-0t",
		"ct5lp-hightpu-04t", "ct5lp-hightpu-+4t", "ct5lp-hightpu-4", "ct9z-hightpu-4t", "ct5lp",
	} {
		if got, ok := TPUChipsPerVM(machineType); ok {
			t.Errorf("TPUChipsPerVM(%q) = %d, want unknown", machineType, got)
		}
	}
}

func TestTPUTopologyChips(t *testing.T) {
	for topology, want := range map[string]int{"1x1": 1, "2x2": 4, "2x4": 8, "2x2x1": 4, "2x2x2": 8, "4x4x4": 64, "16x16": 256, "8x16x16": 2048} {
		if got, ok := TPUTopologyChips(topology); !ok || got != want {
			t.Errorf("TPUTopologyChips(%q) = %d, %v; want %d", topology, got, ok, want)
		}
	}
	for _, topology := range []string{"", "x", "2x", "2x0", "2xx2", "2X2", "2x-2", "a x b", "2x2 ", "9999999x9999999x9999999"} {
		if got, ok := TPUTopologyChips(topology); ok {
			t.Errorf("TPUTopologyChips(%q) = %d, want garbled", topology, got)
		}
	}
}

func TestTPUSliceHosts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   int
		ok     bool
	}{
		{"v5e single host", map[string]string{LabelTPUTopology: "2x4", LabelInstanceType: "ct5lp-hightpu-8t"}, 1, true},
		{"v5e 2x2 single host pool", map[string]string{LabelTPUTopology: "2x2", LabelInstanceType: "ct5lp-hightpu-4t"}, 1, true},
		{"v5e 4x4 multi-host", map[string]string{LabelTPUTopology: "4x4", LabelInstanceType: "ct5lp-hightpu-4t"}, 4, true},
		{"v5p 2x2x2", map[string]string{LabelTPUTopology: "2x2x2", LabelInstanceType: "ct5p-hightpu-4t"}, 2, true},
		{"v4 4x4x4", map[string]string{LabelTPUTopology: "4x4x4", LabelInstanceType: "ct4p-hightpu-4t"}, 16, true},
		{"v6e 16x16", map[string]string{LabelTPUTopology: "16x16", LabelInstanceType: "ct6e-standard-4t"}, 64, true},
		{"deprecated instance type label", map[string]string{LabelTPUTopology: "4x4", LabelInstanceTypeDeprecated: "ct6e-standard-4t"}, 4, true},
		{"GPU node", map[string]string{LabelInstanceType: "a3-highgpu-8g"}, 0, false},
		{"missing topology", map[string]string{LabelInstanceType: "ct5p-hightpu-4t"}, 0, false},
		{"garbled topology", map[string]string{LabelTPUTopology: "2by2", LabelInstanceType: "ct5p-hightpu-4t"}, 0, false},
		{"unknown machine type", map[string]string{LabelTPUTopology: "2x2x2", LabelInstanceType: "ct9-mega-4t"}, 0, false},
		{"no machine type", map[string]string{LabelTPUTopology: "2x2x2"}, 0, false},
		{"topology smaller than a VM", map[string]string{LabelTPUTopology: "2x2", LabelInstanceType: "ct5lp-hightpu-8t"}, 0, false},
		{"not a whole number of VMs", map[string]string{LabelTPUTopology: "2x3", LabelInstanceType: "ct5lp-hightpu-4t"}, 0, false},
	} {
		got, ok := TPUSliceHosts(tc.labels)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: TPUSliceHosts = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
