package gke

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// GPU faults as GKE's GPU device plugin reports them (GoogleCloudPlatform/container-engine-accelerators,
// pkg/gpu/nvidia/health_check/health_checker.go): on a critical Xid (48, 63, 64, 79, 119, 120, 123, 140) it sets
// the node condition ConditionXidCriticalError, status True, with the reason a JSON object whose keys are the Xids
// seen since boot ({"79":true}) and the message the boot ID it was set in; it removes the condition once it runs
// in another boot. Devices it marks unhealthy leave the node's allocatable of their resource below its capacity.
const (
	ConditionXidCriticalError = "XidCriticalError"
	// ResourceGPU and ResourceTPU are the extended resources of GKE's GPU and TPU device plugins.
	ResourceGPU = "nvidia.com/gpu"
	ResourceTPU = "google.com/tpu"
)

// ParseXids reads the XidCriticalError condition's reason: the Xids it names, sorted, each once. A reason that is
// not a JSON object gives none and an error; a key that is not an Xid (a non-negative integer) is left out and
// named in the error, the others kept.
func ParseXids(reason string) ([]uint32, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(reason), &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("xid condition reason %s is %w", Quote(reason), ErrNotJSONObject)
	}
	var xids []uint32
	var bad []string
	for k := range doc {
		xid, err := strconv.ParseUint(k, 10, 32)
		if err != nil {
			bad = append(bad, Quote(k))
			continue
		}
		xids = append(xids, uint32(xid))
	}
	slices.Sort(xids)
	xids = slices.Compact(xids)
	if len(bad) > 0 {
		slices.Sort(bad)
		return xids, fmt.Errorf("xid condition reason %s: keys %v are not Xids", Quote(reason), bad)
	}
	return xids, nil
}
