// Package nodes is the node collector: it watches Node objects and keeps each node's gke_node_* series rendered, so
// a scrape of a 65,000-node cluster is a byte copy.
package nodes

import (
	"strconv"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The GKE node labels, taint and annotation the series come from.
const (
	LabelNodePool                 = "cloud.google.com/gke-nodepool"
	LabelZone                     = "topology.kubernetes.io/zone"
	LabelZoneDeprecated           = "failure-domain.beta.kubernetes.io/zone"
	LabelInstanceType             = "node.kubernetes.io/instance-type"
	LabelInstanceTypeDeprecated   = "beta.kubernetes.io/instance-type"
	LabelAccelerator              = "cloud.google.com/gke-accelerator"
	LabelTPUAccelerator           = "cloud.google.com/gke-tpu-accelerator"
	LabelTPUTopology              = "cloud.google.com/gke-tpu-topology"
	LabelProvisioning             = "cloud.google.com/gke-provisioning"
	LabelSpot                     = "cloud.google.com/gke-spot"
	LabelScheduledMaintenanceTime = "cloud.google.com/scheduled-maintenance-time"
	LabelActiveNodeMaintenance    = "cloud.google.com/active-node-maintenance"
	LabelPerformMaintenance       = "cloud.google.com/perform-maintenance"
	LabelOpportunisticDisable     = "cloud.google.com/opportunistic-disable"
	TaintImpendingTermination     = "cloud.google.com/impending-node-termination"
	AnnotationMaintenanceState    = "node.gke.io/maintenance-state"
)

// keptLabels are the only labels the informer cache holds.
var keptLabels = []string{
	LabelNodePool, LabelZone, LabelZoneDeprecated, LabelInstanceType, LabelInstanceTypeDeprecated,
	LabelAccelerator, LabelTPUAccelerator, LabelTPUTopology, LabelProvisioning, LabelSpot,
	LabelScheduledMaintenanceTime, LabelActiveNodeMaintenance, LabelPerformMaintenance, LabelOpportunisticDisable,
}

// Strip is the informer transform: it keeps only what the series need, so the cache holds a few hundred bytes a
// node instead of the whole object (status, images, managed fields).
func Strip(obj any) (any, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil // tombstones pass through
	}
	out := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:            node.Name,
		UID:             node.UID,
		ResourceVersion: node.ResourceVersion,
	}}
	for _, key := range keptLabels {
		if v, ok := node.Labels[key]; ok {
			if out.Labels == nil {
				out.Labels = make(map[string]string, 8)
			}
			out.Labels[key] = v
		}
	}
	if v, ok := node.Annotations[AnnotationMaintenanceState]; ok {
		out.Annotations = map[string]string{AnnotationMaintenanceState: v}
	}
	out.Spec.Unschedulable = node.Spec.Unschedulable
	for _, taint := range node.Spec.Taints {
		if taint.Key == TaintImpendingTermination {
			out.Spec.Taints = append(out.Spec.Taints, v1.Taint{Key: taint.Key, Effect: taint.Effect})
		}
	}
	return out, nil
}

// labelValue is a node label as a Prometheus label value; values that are not valid UTF-8 are dropped.
func labelValue(labels map[string]string, keys ...string) string {
	for _, key := range keys {
		if v, ok := labels[key]; ok {
			if !utf8.ValidString(v) {
				return ""
			}
			return v
		}
	}
	return ""
}

// provisioning is the node's provisioning model: the GKE label, else spot for gke-spot=true, else standard.
func provisioning(labels map[string]string) string {
	if v := labelValue(labels, LabelProvisioning); v != "" {
		return v
	}
	if labels[LabelSpot] == "true" {
		return "spot"
	}
	return "standard"
}

// parseMaintenanceTime reads scheduled-maintenance-time: whole epoch seconds, not negative.
func parseMaintenanceTime(v string) (float64, bool) {
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return 0, false
	}
	return float64(secs), true
}

// maintenanceState is active-node-maintenance lower-cased; unknown values pass through, empty means none.
func maintenanceState(labels map[string]string) string {
	return strings.ToLower(labelValue(labels, LabelActiveNodeMaintenance))
}

// opportunisticTriggered reads node.gke.io/maintenance-state, which says "opportunistic-triggered" is true. The
// value is matched loosely (JSON, YAML or key=value spellings, any case) since GKE documents only its meaning.
func opportunisticTriggered(annotations map[string]string) bool {
	v, ok := annotations[AnnotationMaintenanceState]
	if !ok {
		return false
	}
	v = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '"', '\'', '{', '}':
			return -1
		}
		return r
	}, strings.ToLower(v))
	for _, field := range strings.Split(v, ",") {
		switch field {
		case "opportunistic-triggered", "opportunistic-triggered:true", "opportunistic-triggered=true":
			return true
		}
	}
	return false
}
