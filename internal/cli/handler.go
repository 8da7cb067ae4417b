package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// CheckMaintenanceHandlerConflict is audit's finding of GKE node pools drained by two hands: GKE's maintenance handler
// and the actions service. It is audit's own (it reads the actions policy), not a gke_readiness_findings check.
const CheckMaintenanceHandlerConflict = "maintenance_handler_conflict"

// maintenanceHandlerConflict describes the finding; Pools name the GKE node pools.
var maintenanceHandlerConflict = CheckResult{
	Check:    CheckMaintenanceHandlerConflict,
	Severity: readiness.Warning,
	Summary: "GKE's maintenance handler (DaemonSet " + nodeview.MaintenanceHandlerNamespace + "/maintenance-handler) runs on these node " +
		"pools and drains a node once perform-maintenance is requested, while the actions policy drains it first " +
		"(performMaintenance.drainFirst): two hands cordon and evict the same node.",
	Fix: "Switch off the actions service's drain: set performMaintenance.drainFirst: false in its policy and let GKE's " +
		"maintenance handler drain. The handler is a GKE add-on that the add-on manager restores: do not delete it.",
}

// handlerConflicts are the GKE node pools of handlerNodes (the nodes GKE's maintenance handler runs on) that policy
// drains before perform-maintenance, sorted. A dry run drains nothing.
func handlerConflicts(policy *Policy, handlerNodes []*nodeview.View) []string {
	if policy == nil || policy.DryRun() || !policy.Config.PerformMaintenance.DrainFirst {
		return nil
	}
	var pools []string
	for _, n := range handlerNodes {
		if policy.Config.MatchPool(n.Labels) != nil && !slices.Contains(pools, n.Pool) {
			pools = append(pools, n.Pool)
		}
	}
	slices.Sort(pools)
	return pools
}

// maintenanceHandlerNodes names the nodes GKE's maintenance handler has a pod on.
func maintenanceHandlerNodes(ctx context.Context, client kubernetes.Interface) (map[string]bool, error) {
	pods, err := client.CoreV1().Pods(nodeview.MaintenanceHandlerNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: nodeview.MaintenanceHandlerPodSelector})
	if err != nil {
		return nil, apiError("listing GKE's maintenance handler pods", err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	return nodes, nil
}

// discoverAuditPolicy is the policy the actions Deployment (namespace/name) runs. No such Deployment is no policy
// (nothing drains); a policy that cannot be read otherwise is a note saying why.
func discoverAuditPolicy(ctx context.Context, client kubernetes.Interface, ref string) (policy *Policy, note string) {
	ns, name, _ := strings.Cut(ref, "/")
	if _, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, ""
	}
	policy, err := discoverPolicy(ctx, client, ref)
	if err != nil {
		return nil, fmt.Sprintf("%s not checked: %s (--config.file=PATH reads a local policy file)",
			CheckMaintenanceHandlerConflict, oneLine(err.Error()))
	}
	return policy, ""
}
