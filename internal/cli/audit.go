package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// AuditOptions are the audit command's flags.
type AuditOptions struct {
	FailOn readiness.Severity
	Output string // table, or one of kubectl's formats (CheckOutput)
	// NoHeaders prints one line per finding and workload, without column names.
	NoHeaders bool
	// Namespace, when set, keeps only the workloads of that namespace (cluster checks always count).
	Namespace string
	Config    readiness.Config
	// Selector, a label selector over nodes, keeps the pods on the nodes it matches, and the node pools they are in.
	Selector string
	// PolicyFile is a local actions policy (--config.file); when empty the policy is read from the ConfigMap of
	// ActionsDeployment (namespace/name, default DefaultActionsDeployment), as status reads it.
	PolicyFile        string
	ActionsDeployment string
	// SyncTimeout bounds the initial read of nodes, pods, owners, PodDisruptionBudgets and the ConfigMap.
	SyncTimeout time.Duration
}

// WorkloadFinding is one workload failing a check, with the number of its pods that fail it (1 for cluster checks).
type WorkloadFinding struct {
	Namespace string `json:"namespace,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Workload  string `json:"workload,omitempty"`
	Pods      int    `json:"pods"`
}

// CheckResult is one failing check and what fails it; its JSON field names are stable.
type CheckResult struct {
	Check     string             `json:"check"`
	Severity  readiness.Severity `json:"severity"`
	Summary   string             `json:"summary"`
	Fix       string             `json:"fix"`
	Workloads []WorkloadFinding  `json:"workloads"`
	// Pools are the GKE node pools of a finding about node pools (maintenance_handler_conflict).
	Pools []string `json:"pools,omitempty"`
}

// severityRank orders severities for --fail-on.
func severityRank(s readiness.Severity) int {
	switch s {
	case readiness.Warning:
		return 1
	case readiness.Error:
		return 2
	}
	return 0
}

// Audit reads the cluster through the workloads collector (the same code that serves gke_readiness_findings),
// writes its findings grouped by check, and returns an ExitError with ExitFindings when one is at or above FailOn.
func Audit(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, meta metadata.Interface, w io.Writer, opts AuditOptions) error {
	sel, err := labels.Parse(opts.Selector)
	if err != nil {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --selector %q: %v", opts.Selector, err)}
	}
	var policy *Policy
	if opts.PolicyFile != "" {
		if policy, err = loadPolicyFile(opts.PolicyFile); err != nil {
			return err
		}
	} else if opts.ActionsDeployment == "" {
		opts.ActionsDeployment = DefaultActionsDeployment
	} else if err := checkDeploymentRef(opts.ActionsDeployment); err != nil {
		return err
	}
	if err := preflight(ctx, client, meta); err != nil {
		return err
	}
	if opts.Namespace != "" {
		if err := checkNamespace(ctx, client, opts.Namespace); err != nil {
			return err
		}
	}
	// The selected nodes, by name; nil: every node.
	var selected map[string]*nodeview.View
	if !sel.Empty() {
		if selected, err = listNodes(ctx, client, sel.String()); err != nil {
			return err
		}
	}
	col, stop, err := startWorkloads(ctx, logger, client, meta, opts.Config, opts.SyncTimeout)
	var timedOut *syncTimeoutError
	if errors.As(err, &timedOut) {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("reading the cluster: nodes, pods, owners and PodDisruptionBudgets %v", err)}
	}
	if err != nil {
		return err
	}
	defer stop()
	var onNode func(string) bool
	if selected != nil {
		onNode = func(node string) bool { return selected[node] != nil }
	}
	found, err := col.Findings(onNode)
	if err != nil {
		return err
	}
	results := resultsOf(found)
	conflict, note, err := auditHandlerConflict(ctx, client, selected, policy, opts.ActionsDeployment)
	if err != nil {
		return err
	}
	if conflict != nil {
		results = append(results, *conflict)
	}
	if opts.Namespace != "" {
		results = inNamespace(results, opts.Namespace)
	}
	if err := RenderAudit(w, results, opts.Output, opts.NoHeaders); err != nil {
		return err
	}
	if note != "" && opts.Output == OutputTable && !opts.NoHeaders {
		fmt.Fprintf(w, "\n%s\n", note)
	}
	for _, r := range results {
		if severityRank(r.Severity) >= severityRank(opts.FailOn) {
			return &ExitError{Code: ExitFindings, Err: fmt.Errorf("readiness findings at or above %s", opts.FailOn)}
		}
	}
	return nil
}

// auditHandlerConflict finds the node pools where GKE's maintenance handler runs and the actions policy drains too
// (among the selected nodes, when selected is not nil). policy is --config.file's; without it the actions
// Deployment's is read, and when that cannot be, note says so.
func auditHandlerConflict(ctx context.Context, client kubernetes.Interface, selected map[string]*nodeview.View, policy *Policy,
	actionsDeployment string) (conflict *CheckResult, note string, err error) {
	onHandler, err := maintenanceHandlerNodes(ctx, client)
	if err != nil || len(onHandler) == 0 {
		return nil, "", err
	}
	nodes := selected
	if nodes == nil {
		if nodes, err = listNodes(ctx, client, ""); err != nil {
			return nil, "", err
		}
	}
	var handlerNodes []*nodeview.View
	for name := range onHandler {
		if n := nodes[name]; n != nil {
			handlerNodes = append(handlerNodes, n)
		}
	}
	if len(handlerNodes) == 0 {
		return nil, "", nil
	}
	if policy == nil {
		if policy, note = discoverAuditPolicy(ctx, client, actionsDeployment); policy == nil {
			return nil, note, nil
		}
	}
	pools := handlerConflicts(policy, handlerNodes)
	if len(pools) == 0 {
		return nil, "", nil
	}
	r := maintenanceHandlerConflict
	r.Workloads, r.Pools = []WorkloadFinding{}, pools
	return &r, "", nil
}

// listNodes reads the nodes a label selector matches (every node for ""), by name.
func listNodes(ctx context.Context, client kubernetes.Interface, selector string) (map[string]*nodeview.View, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, apiError("listing nodes", err)
	}
	nodes := make(map[string]*nodeview.View, len(list.Items))
	for i := range list.Items {
		nodes[list.Items[i].Name] = nodeview.Of(&list.Items[i])
	}
	return nodes, nil
}

// preflight reads one of everything the collector watches, so an unreachable server or a missing permission is
// one clear line rather than reflectors retrying forever.
func preflight(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) error {
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return apiError("listing nodes", err)
	}
	if what, err := readAccess(ctx, client, meta); err != nil {
		return apiError(what, err)
	}
	return nil
}

// checkNamespace refuses a --namespace that does not exist, which would otherwise pass the gate having checked
// nothing. Reading namespaces is not among audit's required rights: when it is denied, audit goes on.
func checkNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case err == nil || apierrors.IsForbidden(err):
		return nil
	case apierrors.IsNotFound(err):
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("namespace %q not found", namespace)}
	}
	return apiError("reading namespace "+namespace, err)
}

// readAccess reads one of everything the workloads collector watches besides nodes; on failure what names the read.
func readAccess(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) (what string, err error) {
	one := metav1.ListOptions{Limit: 1}
	if _, err := client.CoreV1().Pods("").List(ctx, one); err != nil {
		return "listing pods", err
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("").List(ctx, one); err != nil {
		return "listing PodDisruptionBudgets", err
	}
	for _, gvr := range workloads.OwnerResources() {
		if _, err := meta.Resource(gvr).List(ctx, one); err != nil {
			return "listing " + gvr.Resource, err
		}
	}
	// The collector lists and watches the ConfigMap by a field selector on its name, which a grant of get on the
	// name alone does not allow; a missing ConfigMap is an empty list, not an error.
	cms := client.CoreV1().ConfigMaps(gke.NamespaceDisruptionHandling)
	cmName := gke.NamespaceDisruptionHandling + "/" + gke.ConfigMapDisruptionHandling
	byName := fields.OneTermEqualSelector("metadata.name", gke.ConfigMapDisruptionHandling).String()
	list, err := cms.List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: byName})
	if err != nil {
		return "listing ConfigMap " + cmName, err
	}
	watch, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return "watching ConfigMap " + cmName, err
	}
	watch.Stop()
	return "", nil
}

// resultsOf groups the collector's findings by check, in the checks' order (the order Findings keeps).
func resultsOf(found []workloads.Finding) []CheckResult {
	var out []CheckResult
	for _, f := range found {
		if n := len(out); n == 0 || out[n-1].Check != readiness.Checks[f.Check].Name {
			c := readiness.Checks[f.Check]
			out = append(out, CheckResult{Check: c.Name, Severity: c.Severity, Summary: c.Summary, Fix: c.Fix, Workloads: []WorkloadFinding{}})
		}
		if f.Workload != (workloads.Workload{}) { // a cluster check lists no workloads
			r := &out[len(out)-1]
			r.Workloads = append(r.Workloads, WorkloadFinding{Namespace: f.Workload.Namespace, Kind: f.Workload.Kind,
				Workload: f.Workload.Name, Pods: f.Pods})
		}
	}
	return out
}

// inNamespace keeps the workloads of namespace, and the checks still failed by one of them or by the cluster.
func inNamespace(results []CheckResult, namespace string) []CheckResult {
	var out []CheckResult
	for _, r := range results {
		cluster := len(r.Workloads) == 0
		kept := []WorkloadFinding{}
		for _, f := range r.Workloads {
			if f.Namespace == namespace {
				kept = append(kept, f)
			}
		}
		if cluster || len(kept) > 0 {
			r.Workloads = kept
			out = append(out, r)
		}
	}
	return out
}

// RenderAudit writes results as a table (grouped by check, with the fix) or as a JSON list.
func RenderAudit(w io.Writer, results []CheckResult, output string, noHeaders bool) error {
	if results == nil {
		results = []CheckResult{}
	}
	// One row per failing check and workload (one for a cluster check), for custom-columns and --no-headers.
	type row struct {
		Check    string             `json:"check"`
		Severity readiness.Severity `json:"severity"`
		Pool     string             `json:"pool,omitempty"`
		WorkloadFinding
	}
	var rows []row
	for _, r := range results {
		for _, p := range r.Pools {
			rows = append(rows, row{Check: r.Check, Severity: r.Severity, Pool: p})
		}
		if len(r.Workloads) == 0 && len(r.Pools) == 0 {
			rows = append(rows, row{Check: r.Check, Severity: r.Severity, WorkloadFinding: WorkloadFinding{Pods: 1}})
		}
		for _, f := range r.Workloads {
			rows = append(rows, row{Check: r.Check, Severity: r.Severity, WorkloadFinding: f})
		}
	}
	if output != OutputTable {
		items := make([]any, len(rows))
		var names []runtime.Object
		seen := map[string]bool{}
		for i, r := range rows {
			items[i] = r
			if k := r.Kind + "/" + r.Workload; r.Workload != "" && !seen[k] {
				seen[k] = true
				names = append(names, named(kindGroups[r.Kind], r.Kind, r.Workload))
			}
		}
		return printDocument(w, output, noHeaders, results, map[string]any{"items": results}, items, names)
	}
	if noHeaders {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, r := range rows {
			if r.Pool != "" {
				fmt.Fprintf(tw, "%s\t%s\t-\tNodePool\t%s\t-\n", r.Severity, r.Check, r.Pool)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.Severity, r.Check, orDash(r.Namespace), orDash(r.Kind), orDash(r.Workload), r.Pods)
		}
		return tw.Flush()
	}
	if len(results) == 0 {
		_, err := fmt.Fprintln(w, "No readiness findings.")
		return err
	}
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s %s\n  %s\n  Fix: %s\n", severityTag(r.Severity), r.Check, r.Summary, r.Fix)
		if len(r.Pools) > 0 {
			fmt.Fprintf(w, "  NODE-POOL\n  %s\n", strings.Join(r.Pools, "\n  "))
		}
		if len(r.Workloads) == 0 {
			continue // a cluster check
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAMESPACE\tKIND\tWORKLOAD\tPODS")
		for _, f := range r.Workloads {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", f.Namespace, f.Kind, f.Workload, f.Pods)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// kindGroups are the API groups of the workload kinds, for -o name; a kind not listed prints without its group.
var kindGroups = map[string]string{
	"Deployment": "apps", "StatefulSet": "apps", "ReplicaSet": "apps", "DaemonSet": "apps",
	"Job": "batch", "CronJob": "batch", "JobSet": "jobset.x-k8s.io", "LeaderWorkerSet": "leaderworkerset.x-k8s.io",
}

func severityTag(s readiness.Severity) string {
	if s == readiness.Error {
		return "ERROR"
	}
	return "WARNING"
}
