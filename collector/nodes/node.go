// Package nodes is the node collector: it watches Node objects and keeps each node's gke_node_* series rendered, so
// a scrape of a 65,000-node cluster is a byte copy.
package nodes

import (
	"strings"
	"unicode/utf8"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keptLabels are the only labels the informer cache holds.
var keptLabels = []string{
	gke.LabelNodePool, gke.LabelZone, gke.LabelZoneDeprecated, gke.LabelInstanceType, gke.LabelInstanceTypeDeprecated,
	gke.LabelAccelerator, gke.LabelTPUAccelerator, gke.LabelTPUTopology, gke.LabelProvisioning, gke.LabelSpot,
	gke.LabelScheduledMaintenanceTime, gke.LabelActiveNodeMaintenance, gke.LabelPerformMaintenance, gke.LabelOpportunisticDisable,
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
	if v, ok := node.Annotations[gke.AnnotationMaintenanceState]; ok {
		out.Annotations = map[string]string{gke.AnnotationMaintenanceState: v}
	}
	out.Spec.Unschedulable = node.Spec.Unschedulable
	for _, taint := range node.Spec.Taints {
		if taint.Key == gke.TaintImpendingTermination {
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
	if v := labelValue(labels, gke.LabelProvisioning); v != "" {
		return v
	}
	if labels[gke.LabelSpot] == "true" {
		return "spot"
	}
	return "standard"
}

// maintenanceState is active-node-maintenance lower-cased; unknown values pass through, empty means none.
func maintenanceState(labels map[string]string) string {
	return strings.ToLower(labelValue(labels, gke.LabelActiveNodeMaintenance))
}
