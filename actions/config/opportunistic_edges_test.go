package config

import "testing"

// Guards against this: an empty acceleratorResources (`[]`, or the key left with its items commented out, which YAML reads as
// null) is accepted and means "no pod uses an accelerator": every GPU/TPU node looks idle, and the drain before
// perform-maintenance evicts the running GPU jobs. An operator expects the default or a start-up error naming the key.
func TestAcceleratorResourcesEmptyIsNotSilent(t *testing.T) {
	for name, doc := range map[string]string{
		"empty list":          "acceleratorResources: []\npools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 1h}}]\n",
		"items commented out": "acceleratorResources:\n#  - nvidia.com/gpu\npools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 1h}}]\n",
	} {
		cfg, err := Parse([]byte(doc))
		if err == nil && len(cfg.AcceleratorResources) == 0 {
			t.Errorf("%s: accepted with no accelerator resources: every node running GPU or TPU pods counts as idle", name)
		}
	}
}
