package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// Output formats of status (-o).
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
)

// StatusOptions are the status command's flags.
type StatusOptions struct {
	Selector string // label selector
	Pool     string // node pool; added to Selector
	All      bool   // every node, not only those with something pending or in progress
	// Nodes, when set, are the only nodes shown (status NODE...), each whatever its state.
	Nodes  []string
	Output string // table, wide, or one of kubectl's formats (CheckOutput)
	// NoHeaders prints the table's node rows only: no pool counts, budgets or column names.
	NoHeaders bool
	Now       func() time.Time
	// PolicyFile is a local actions policy (--config.file); when empty the policy is read from the ConfigMap of
	// ActionsDeployment (namespace/name, default DefaultActionsDeployment).
	PolicyFile        string
	ActionsDeployment string
	// ActionsLease is the actions service's Lease (namespace/name, default DefaultActionsLease), next to which its
	// repair ledger says which circuit breakers are tripped.
	ActionsLease string
	// SyncTimeout bounds the initial read of pods and their owners (default one minute).
	SyncTimeout time.Duration
}

func (o StatusOptions) selector() (labels.Selector, error) {
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return nil, &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --selector %q: %v", o.Selector, err)}
	}
	if o.Pool != "" {
		// A requirement, not a selector string: "a,b" is no pool name, never two requirements.
		pool, err := labels.NewRequirement(gke.LabelNodePool, selection.Equals, []string{o.Pool})
		if err != nil {
			return nil, &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --pool %q: %s", o.Pool, oneLine(err.Error()))}
		}
		sel = sel.Add(*pool)
	}
	return sel, nil
}

// NodeStatus is one node's row; its JSON field names are stable.
type NodeStatus struct {
	Node        string `json:"node"`
	Pool        string `json:"pool"`
	Accelerator string `json:"accelerator,omitempty"`
	// MaintenanceStart is when the pending maintenance is due (label, else the announced window).
	MaintenanceStart *time.Time `json:"maintenanceStart,omitempty"`
	// WindowEnd and LatestWindowStart come from GKE's announced window, where known: the window's end, and the
	// deadline for starting (or rescheduling) the maintenance.
	WindowEnd         *time.Time `json:"windowEnd,omitempty"`
	LatestWindowStart *time.Time `json:"latestWindowStart,omitempty"`
	// MaintenanceKey identifies that maintenance as the actions service keys its work.
	MaintenanceKey string `json:"maintenanceKey,omitempty"`
	// CanReschedule is GKE's word: "true", "false" or "" (not announced).
	CanReschedule string `json:"canReschedule,omitempty"`
	// GKEState lists what GKE (or anyone) shows on the node: active-node-maintenance=<state>,
	// impending-termination, perform-maintenance-requested, cordoned, gpu-xid=<xids> (a critical GPU fault of this
	// boot, "?" when its Xids do not read), gpus-unhealthy=<n>, tpus-unhealthy=<n>, gke-operation=<types> (GKE's
	// own work: an upgrade, a repair, its drain), planned-termination=<time> (the end of a maximum run duration).
	GKEState      []string `json:"gkeState"`
	Action        string   `json:"action,omitempty"`
	ActionState   string   `json:"actionState,omitempty"`
	ActionReason  string   `json:"actionReason,omitempty"`
	TPUSliceHosts int      `json:"tpuSliceHosts,omitempty"`
	// GPUXids are the critical Xids GKE's GPU device plugin saw in the node's current boot, GPUXidSince when it
	// first did (its XidCriticalError condition); UnhealthyGPUs and UnhealthyTPUs the devices it marked unhealthy.
	GPUXids       []uint32   `json:"gpuXids,omitempty"`
	GPUXidSince   *time.Time `json:"gpuXidSince,omitempty"`
	UnhealthyGPUs int64      `json:"unhealthyGPUs,omitempty"`
	UnhealthyTPUs int64      `json:"unhealthyTPUs,omitempty"`
	// GKEOperations are GKE's own work on the node (operation types, lower-cased); PlannedTermination the end of
	// its VM's maximum run duration (flex-start, queued provisioning).
	GKEOperations      []string   `json:"gkeOperations,omitempty"`
	PlannedTermination *time.Time `json:"plannedTermination,omitempty"`
	// HeldBy is who holds the node: "actions/<replica>" for the actions service's own work (a claim, or a cordon
	// it keeps), else another hand (nodeview.OtherOwner: gke-maintenance-handler, cluster-autoscaler, nvsentinel,
	// cordon); empty when nobody does.
	HeldBy string `json:"heldBy,omitempty"`
	// Workloads are the top owners of the node's pods, DaemonSet and static pods left out (they stay on a drained
	// node). Null where not known: a node neither GPU, TPU nor Spot (the workloads collector does not read their
	// pods), or the pods could not be read at all.
	Workloads []workloads.Workload `json:"workloads"`
	// workloadsWatched tells an empty Workloads of a watched node from one that is not known.
	workloadsWatched bool

	// For the pool header.
	inMaintenance, cordoned, actionActive bool
}

// Interesting reports a node with anything pending or in progress.
func (s NodeStatus) Interesting() bool {
	return s.MaintenanceStart != nil || s.PlannedTermination != nil || len(s.GKEState) > 0 || s.ActionState != "" || s.HeldBy != ""
}

// heldByActions prefixes the replica holding a node for the actions service, in HeldBy.
const heldByActions = "actions"

// StatusOf is one node's row, from its view.
func StatusOf(node *nodeview.View) NodeStatus {
	s := NodeStatus{Node: node.Name, Pool: node.Pool, GKEState: []string{}}
	s.Accelerator = node.Labels[gke.LabelAccelerator]
	if s.Accelerator == "" {
		s.Accelerator = node.Labels[gke.LabelTPUAccelerator]
	}
	if m := node.Maintenance; m.Pending() {
		start := m.Start()
		s.MaintenanceStart, s.MaintenanceKey = &start, m.Key()
		if m.CanReschedule != gke.CanRescheduleUnknown {
			s.CanReschedule = m.CanReschedule.String()
		}
		if u := node.Upcoming; u.Announced {
			s.WindowEnd, s.LatestWindowStart = timeOrNil(u.WindowEnd), timeOrNil(u.LatestWindowStart)
		}
	}
	s.inMaintenance = node.InMaintenance
	if st := node.MaintenanceState; st != "" {
		s.GKEState = append(s.GKEState, "active-node-maintenance="+st)
	} else if s.inMaintenance {
		s.GKEState = append(s.GKEState, "in-maintenance")
	}
	if len(node.ImpendingTermination) > 0 {
		s.GKEState = append(s.GKEState, "impending-termination")
	}
	if node.MaintenanceRequested() {
		s.GKEState = append(s.GKEState, "perform-maintenance-requested")
	}
	if node.Unschedulable {
		s.cordoned = true
		s.GKEState = append(s.GKEState, "cordoned")
	}
	if x := node.XidCritical; x != nil {
		s.GPUXids, s.GPUXidSince = x.Xids, timeOrNil(x.Since)
		xids := make([]string, len(x.Xids))
		for i, xid := range x.Xids {
			xids[i] = strconv.FormatUint(uint64(xid), 10)
		}
		s.GKEState = append(s.GKEState, "gpu-xid="+cmp.Or(strings.Join(xids, "+"), "?"))
	}
	s.UnhealthyGPUs, s.UnhealthyTPUs = node.UnhealthyGPUs, node.UnhealthyTPUs
	if s.UnhealthyGPUs > 0 {
		s.GKEState = append(s.GKEState, "gpus-unhealthy="+strconv.FormatInt(s.UnhealthyGPUs, 10))
	}
	if s.UnhealthyTPUs > 0 {
		s.GKEState = append(s.GKEState, "tpus-unhealthy="+strconv.FormatInt(s.UnhealthyTPUs, 10))
	}
	if len(node.GKEOperations) > 0 {
		s.GKEOperations = node.GKEOperations
		s.GKEState = append(s.GKEState, "gke-operation="+strings.Join(node.GKEOperations, "+"))
	}
	if t := node.PlannedTermination; !t.IsZero() {
		s.PlannedTermination = &t
		s.GKEState = append(s.GKEState, "planned-termination="+t.UTC().Format(time.RFC3339))
	}
	// Only nodes the actions service has worked on carry its state; a record of work for an earlier maintenance,
	// finished and holding nothing, says nothing about now.
	if r := node.Record; r.Phase != "" {
		if m := node.Maintenance; r.Active() || r.HoldsCordon() || m.Pending() && nodestate.Serves(r, m) {
			s.Action, s.ActionState, s.ActionReason = string(r.Action), string(r.Phase), r.Reason
			s.actionActive = r.Active()
		}
	}
	s.HeldBy = node.HeldBy
	if r := node.Record; r.Active() || r.HoldsCordon() {
		// The replica working on it; once done, the one whose cordon stays.
		replica := r.ClaimedBy
		if !r.Active() {
			replica = cmp.Or(r.CordonedBy, r.ClaimedBy)
		}
		s.HeldBy = heldByActions
		if replica != "" {
			s.HeldBy += "/" + replica
		}
	}
	s.TPUSliceHosts = node.TPUSliceHosts
	return s
}

// Statuses are the rows for nodes, sorted by maintenance start (none last), then name.
func Statuses(nodes []*nodeview.View, all bool) []NodeStatus {
	return rowsOf(statusesOf(nodes), all)
}

func statusesOf(nodes []*nodeview.View) []NodeStatus {
	out := make([]NodeStatus, len(nodes))
	for i, n := range nodes {
		out[i] = StatusOf(n)
	}
	return out
}

// withWorkloads fills in the rows' workloads from on (the workloads collector's WorkloadsOn).
func withWorkloads(rows []NodeStatus, on func(node string) ([]workloads.Workload, bool)) {
	for i := range rows {
		r := &rows[i]
		r.Workloads, r.workloadsWatched = on(r.Node)
		if r.workloadsWatched && r.Workloads == nil {
			r.Workloads = []workloads.Workload{}
		}
	}
}

func rowsOf(statuses []NodeStatus, all bool) []NodeStatus {
	rows := make([]NodeStatus, 0, len(statuses))
	for _, s := range statuses {
		if all || s.Interesting() {
			rows = append(rows, s)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i].MaintenanceStart, rows[j].MaintenanceStart
		switch {
		case a != nil && b != nil && !a.Equal(*b):
			return a.Before(*b)
		case (a == nil) != (b == nil):
			return a != nil
		}
		return rows[i].Node < rows[j].Node
	})
	return rows
}

// PoolCounts is the header's line for one GKE node pool, over every node the selector matched.
type PoolCounts struct {
	Pool          string `json:"pool"`
	Nodes         int    `json:"nodes"`
	Scheduled     int    `json:"scheduled"`
	InMaintenance int    `json:"inMaintenance"`
	Cordoned      int    `json:"cordoned"`
	// Actions are the nodes the actions service is working on.
	Actions int `json:"actions"`
}

// Snapshot is what one status frame is drawn from.
type Snapshot struct {
	// Nodes are every node of the cluster: the selector picks the rows and pool counts among them, and budgets
	// count them all, as the actions service does.
	Nodes []*corev1.Node
	// Workloads reads the workloads on a node (the workloads collector's WorkloadsOn); nil when they could not be
	// read, WorkloadsUnknown saying why.
	Workloads        func(node string) ([]workloads.Workload, bool)
	WorkloadsUnknown string
	// Policy is the actions policy; nil when it could not be read, PolicyUnknown saying why.
	Policy        *Policy
	PolicyUnknown string
	// Stale says, under --watch, since when and why the node watch has failed: the frame shows what was last read.
	Stale string
	// Breakers are the tripped circuit breakers of GPU-fault repairs; BreakersUnknown says why they could not be
	// read.
	Breakers        []Breaker
	BreakersUnknown string
}

// Report is status's JSON output; its field names are stable.
type Report struct {
	Pools []PoolCounts `json:"pools"`
	// Budgets are the actions policy's budgets in use; null when the policy is not known, BudgetsUnknown saying
	// why.
	Budgets          *Budgets `json:"budgets"`
	BudgetsUnknown   string   `json:"budgetsUnknown,omitempty"`
	WorkloadsUnknown string   `json:"workloadsUnknown,omitempty"`
	// Stale is set while the API server cannot be watched (--watch): the report is what was last read.
	Stale string `json:"stale,omitempty"`
	// RepairBreakers are the tripped circuit breakers of GPU-fault repairs (none: omitted).
	RepairBreakers        []Breaker    `json:"repairBreakers,omitempty"`
	RepairBreakersUnknown string       `json:"repairBreakersUnknown,omitempty"`
	Nodes                 []NodeStatus `json:"nodes"`
}

// Render writes the status of snap in the chosen format.
func Render(w io.Writer, snap Snapshot, opts StatusOptions) error {
	sel, err := opts.selector()
	if err != nil {
		return err
	}
	views := make([]*nodeview.View, len(snap.Nodes))
	for i, n := range snap.Nodes {
		views[i] = nodeview.Of(n)
	}
	selected := views
	if !sel.Empty() {
		selected = make([]*nodeview.View, 0, len(views))
		for _, v := range views {
			if sel.Matches(labels.Set(v.Labels)) {
				selected = append(selected, v)
			}
		}
	}
	if len(opts.Nodes) > 0 {
		selected = slices.DeleteFunc(slices.Clone(selected), func(v *nodeview.View) bool { return !slices.Contains(opts.Nodes, v.Name) })
	}
	now := opts.Now()
	statuses := statusesOf(selected)
	rows := rowsOf(statuses, opts.All || len(opts.Nodes) > 0)
	if snap.Workloads != nil {
		withWorkloads(rows, snap.Workloads)
	}
	var budgets *Budgets
	if snap.Policy != nil {
		budgets = budgetsOf(snap.Policy, views, now)
	}
	if opts.Output != OutputTable && opts.Output != OutputWide {
		report := Report{Pools: countPools(statuses), Budgets: budgets, BudgetsUnknown: snap.PolicyUnknown,
			WorkloadsUnknown: snap.WorkloadsUnknown, Stale: snap.Stale, RepairBreakers: snap.Breakers,
			RepairBreakersUnknown: snap.BreakersUnknown, Nodes: rows}
		items := make([]any, len(rows))
		names := make([]runtime.Object, len(rows))
		for i, r := range rows {
			items[i], names[i] = r, named("", "Node", r.Node)
		}
		return printDocument(w, opts.Output, opts.NoHeaders, report, report, items, names)
	}
	wide := opts.Output == OutputWide
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if opts.NoHeaders {
		writeNodeRows(tw, rows, snap.Workloads != nil, wide, now)
		return tw.Flush()
	}
	if snap.Stale != "" {
		fmt.Fprintf(w, "STALE: %s\n\n", snap.Stale)
	}
	fmt.Fprintln(tw, "POOL\tNODES\tSCHEDULED\tIN-MAINTENANCE\tCORDONED\tACTIONS")
	for _, p := range countPools(statuses) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", orDash(p.Pool), p.Nodes, p.Scheduled, p.InMaintenance, p.Cordoned, p.Actions)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	if budgets != nil {
		writeBudgets(w, budgets, now)
	} else {
		fmt.Fprintf(w, "Budgets unknown: %s\n", snap.PolicyUnknown)
	}
	if snap.Workloads == nil {
		fmt.Fprintf(w, "Workloads unknown: %s\n", snap.WorkloadsUnknown)
	}
	writeBreakers(w, snap.Breakers, now)
	if snap.BreakersUnknown != "" {
		fmt.Fprintf(w, "Repair circuit breakers unknown: %s\n", snap.BreakersUnknown)
	}
	fmt.Fprintln(w)
	if len(rows) == 0 {
		fmt.Fprintln(w, "No nodes with maintenance pending or in progress.")
		return nil
	}
	// As kubectl get: the default table fits a terminal; -o wide has every column, each value whole.
	header := "NODE\tSCHEDULED\tGKE-STATE\tACTION-STATE\tHELD-BY\tWORKLOADS"
	if wide {
		zone := localZone(now)
		header = "NODE\tPOOL\tACCELERATOR\tSCHEDULED (" + zone + ")\tCAN-RESCHEDULE\tGKE-STATE\tACTION-STATE\tREASON\tHELD-BY" +
			"\tWINDOW-END (" + zone + ")\tLATEST-START (" + zone + ")\tMAINTENANCE\tACTION\tTPU-SLICE-HOSTS\tWORKLOADS"
	}
	fmt.Fprintln(tw, header)
	writeNodeRows(tw, rows, snap.Workloads != nil, wide, now)
	return tw.Flush()
}

// writeNodeRows writes the node table's rows, without its header.
func writeNodeRows(tw io.Writer, rows []NodeStatus, workloadsKnown, wide bool, now time.Time) {
	for _, r := range rows {
		workloads := workloadsCell(r, workloadsKnown, wide)
		if !wide {
			scheduled := "-"
			if r.MaintenanceStart != nil {
				scheduled = relative(r.MaintenanceStart.Sub(now))
			}
			heldBy, _, _ := strings.Cut(r.HeldBy, "/") // the actions service, not which replica
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, scheduled, orDash(shortGKEState(r.GKEState)),
				orDash(r.ActionState), orDash(heldBy), workloads)
			continue
		}
		scheduled := "-"
		if r.MaintenanceStart != nil {
			scheduled = localTime(*r.MaintenanceStart) + " (" + relative(r.MaintenanceStart.Sub(now)) + ")"
		}
		hosts := "-"
		if r.TPUSliceHosts > 0 {
			hosts = strconv.Itoa(r.TPUSliceHosts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, orDash(r.Pool), orDash(r.Accelerator),
			scheduled, orDash(r.CanReschedule), orDash(strings.Join(r.GKEState, ",")), orDash(r.ActionState),
			orDash(cell(r.ActionReason, maxReasonWidth)), orDash(r.HeldBy), timeOrDash(r.WindowEnd), timeOrDash(r.LatestWindowStart),
			orDash(r.MaintenanceKey), orDash(r.Action), hosts, workloads)
	}
}

// shortGKEState is GKEState in the default table's words: the maintenance state alone ("ongoing"), "terminating",
// "requested" (perform-maintenance), "cordoned".
func shortGKEState(states []string) string {
	short := make([]string, len(states))
	for i, st := range states {
		switch st {
		case "impending-termination":
			short[i] = "terminating"
		case "perform-maintenance-requested":
			short[i] = "requested"
		default:
			short[i] = strings.TrimPrefix(st, "active-node-maintenance=")
		}
	}
	return strings.Join(short, ",")
}

// maxWorkloadWidth bounds the default table's first workload: namespaces and names run to 63 characters each.
const maxWorkloadWidth = 30

// workloadsCell is "ns/name" for one workload, "ns/name,+2" for three (every ns/Kind/name in wide), "-" for none,
// "n/a" for a node whose pods the workloads collector does not read, "?" when no pods could be read.
func workloadsCell(r NodeStatus, known, wide bool) string {
	switch {
	case !known:
		return "?"
	case !r.workloadsWatched:
		return "n/a"
	case len(r.Workloads) == 0:
		return "-"
	case wide:
		names := make([]string, len(r.Workloads))
		for i, wl := range r.Workloads {
			names[i] = wl.Namespace + "/" + wl.Kind + "/" + wl.Name
		}
		return strings.Join(names, ",")
	}
	first := cell(r.Workloads[0].Namespace+"/"+r.Workloads[0].Name, maxWorkloadWidth)
	if len(r.Workloads) > 1 {
		first += ",+" + strconv.Itoa(len(r.Workloads)-1)
	}
	return first
}

func countPools(statuses []NodeStatus) []PoolCounts {
	byPool := map[string]*PoolCounts{}
	for _, s := range statuses {
		p, ok := byPool[s.Pool]
		if !ok {
			p = &PoolCounts{Pool: s.Pool}
			byPool[s.Pool] = p
		}
		p.Nodes++
		if s.MaintenanceStart != nil {
			p.Scheduled++
		}
		if s.inMaintenance {
			p.InMaintenance++
		}
		if s.cordoned {
			p.Cordoned++
		}
		if s.actionActive {
			p.Actions++
		}
	}
	out := make([]PoolCounts, 0, len(byPool))
	for _, p := range byPool {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return localTime(*t)
}

// localTime is t in the terminal's time zone ($TZ), as the operator reads a clock; localZone names that zone.
func localTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04") }

func localZone(now time.Time) string {
	name, _ := now.Local().Zone()
	return name
}

// maxReasonWidth bounds the REASON column: a failure's message can run to a kilobyte; JSON keeps it whole.
const maxReasonWidth = 80

// cell is s on one line, at most width characters, for a table.
func cell(s string, width int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > width {
		return string(r[:width-1]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// relative is "in 3h12m" or "5m ago", to the minute (days past 48 hours).
func relative(d time.Duration) string {
	ago := d < 0
	if ago {
		d = -d
	}
	d = d.Round(time.Minute)
	var s string
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if ago {
		return s + " ago"
	}
	return "in " + s
}

// session is what status reads besides the nodes: the policy, read once, and the workloads collector.
type session struct {
	policy           *Policy
	policyUnknown    string
	collector        *workloads.Collector // nil when the pods cannot be read
	workloadsUnknown string
	// breakers reads the tripped repair circuit breakers, for every frame: a reset shows at once.
	breakers func() ([]Breaker, string)
	stop     func()
}

// start checks the flags, reads the policy and starts the workloads collector. Listing nodes is the first read of
// the API server, and its failure (unreachable, credentials, RBAC) the command's; what fails after it is a header
// line.
func start(ctx context.Context, client kubernetes.Interface, meta metadata.Interface, opts StatusOptions) (*session, error) {
	if _, err := opts.selector(); err != nil {
		return nil, err
	}
	if _, err := ledgerStore(client, opts.actionsLease()); err != nil {
		return nil, err
	}
	var policy *Policy
	if opts.PolicyFile != "" {
		var err error
		if policy, err = loadPolicyFile(opts.PolicyFile); err != nil {
			return nil, err
		}
	} else if err := checkDeploymentRef(opts.actionsDeployment()); err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, apiError("listing nodes", err)
	}
	s := &session{stop: func() {}, policy: policy, breakers: func() ([]Breaker, string) {
		b, err := trippedBreakers(ctx, client, opts.actionsLease())
		if err != nil {
			return nil, err.Error()
		}
		return b, ""
	}}
	if policy == nil {
		var err error
		if s.policy, err = discoverPolicy(ctx, client, opts.actionsDeployment()); err != nil {
			s.policyUnknown = oneLine(err.Error()) + " (--config.file=PATH reads a local policy file)"
		}
	}
	// Without the rights to read pods and their owners, status still shows the nodes.
	if what, err := readAccess(ctx, client, meta); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, apiError(what, err)
		}
		s.workloadsUnknown = apiError(what, err).Error()
		return s, nil
	}
	// Only the collector's placement of workloads is read: its readiness thresholds do not matter here.
	col, stop, err := startWorkloads(ctx, slog.New(slog.DiscardHandler), client, meta, readiness.Config{}, opts.SyncTimeout)
	var timedOut *syncTimeoutError
	if errors.As(err, &timedOut) {
		s.workloadsUnknown = "pods and their owners " + err.Error()
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	s.collector, s.stop = col, stop
	return s, nil
}

func (s *session) snapshot(nodes []*corev1.Node) Snapshot {
	snap := Snapshot{Nodes: nodes, Policy: s.policy, PolicyUnknown: s.policyUnknown, WorkloadsUnknown: s.workloadsUnknown}
	snap.Breakers, snap.BreakersUnknown = s.breakers()
	if s.collector != nil {
		snap.Workloads = s.collector.WorkloadsOn
	}
	return snap
}

// Status lists the nodes once and writes their status.
func Status(ctx context.Context, client kubernetes.Interface, meta metadata.Interface, w io.Writer, opts StatusOptions) error {
	s, err := start(ctx, client, meta, opts)
	if err != nil {
		return err
	}
	defer s.stop()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError("listing nodes", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	// As kubectl get: a node asked for by name that does not exist is an error.
	for _, name := range opts.Nodes {
		if !slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return n.Name == name }) {
			return &ExitError{Code: ExitAPI, Err: fmt.Errorf("node %q not found", name)}
		}
	}
	return Render(w, s.snapshot(nodes), opts)
}

// watchHealth is whether the node watch works: failed since when, and why.
type watchHealth struct {
	mu      sync.Mutex
	since   time.Time
	err     string
	changed func()
}

// note records a list or watch call's outcome: a failure, or working again.
func (h *watchHealth) note(err error) {
	h.mu.Lock()
	was := !h.since.IsZero()
	switch {
	case err != nil && !was:
		h.since = time.Now()
		fallthrough
	case err != nil:
		h.err = oneLine(err.Error())
	default:
		h.since, h.err = time.Time{}, ""
	}
	now := !h.since.IsZero()
	h.mu.Unlock()
	if was || now {
		h.changed()
	}
}

func (h *watchHealth) stale() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		return ""
	}
	return fmt.Sprintf("cannot watch the API server since %s (%s); showing what was last read",
		h.since.Local().Format("15:04:05 MST"), h.err)
}

// redrawSettle is how long a redraw waits after a change for the changes that come with it: one event (a node
// deleted) reaches the node watch and the workloads collector's own watch separately, and a frame drawn between the
// two would show the node half gone.
const redrawSettle = 250 * time.Millisecond

// settle waits redrawSettle, taking in the changes that arrive meanwhile.
func settle(ctx context.Context, changes ...<-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(redrawSettle):
	}
	for _, c := range changes {
		select {
		case <-c:
		default:
		}
	}
}

// clearScreen moves the cursor home and clears a terminal before a redraw.
const clearScreen = "\x1b[H\x1b[2J"

// Watch writes the status, then again whenever a change of the nodes, or of the workloads on them, (or a minute
// passing) alters it, until ctx ends. Nodes come from an informer and workloads from the workloads collector's
// (watches, not polling); the policy is read once. On a terminal each redraw clears the screen first.
func Watch(ctx context.Context, client kubernetes.Interface, meta metadata.Interface, w io.Writer, terminal bool, opts StatusOptions) error {
	s, err := start(ctx, client, meta, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while reading the cluster
		}
		return err
	}
	defer s.stop()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	// Every node, whatever the selector: budgets count the whole cluster. A failing watch is shown on the frame,
	// as kubectl would end: the operator must not take the last frame for the present.
	health := &watchHealth{changed: poke}
	nodesAPI := client.CoreV1().Nodes()
	inf := cache.NewSharedIndexInformerWithOptions(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := nodesAPI.List(ctx, o)
			health.note(err)
			return list, err
		},
		// The reflector retries a refused watch by itself, without telling its error handler: note it here.
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := nodesAPI.Watch(ctx, o)
			health.note(err)
			return w, err
		},
	}, &corev1.Node{}, cache.SharedIndexInformerOptions{})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		health.note(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	go inf.RunWithContext(informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	var placement <-chan struct{} // nil, never ready, without the collector
	if s.collector != nil {
		placement = s.collector.Placement()
	}
	lister := corelisters.NewNodeLister(inf.GetIndexer())
	var last []byte
	redraw := func() error {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			return err
		}
		snap := s.snapshot(nodes)
		snap.Stale = health.stale()
		var buf bytes.Buffer
		if err := Render(&buf, snap, opts); err != nil {
			return err
		}
		if last != nil && bytes.Equal(buf.Bytes(), last) {
			return nil
		}
		switch {
		case terminal:
			io.WriteString(w, clearScreen)
		case last != nil:
			io.WriteString(w, "\n") // a blank line between redraws in a log
		}
		last = buf.Bytes()
		_, err = w.Write(last)
		return err
	}
	if err := redraw(); err != nil {
		return err
	}
	// Relative times ("in 3h12m") age, and windows open and close, without anything changing: re-render from the
	// caches every minute; a frame that comes out the same is not drawn.
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			settle(ctx, changed, placement)
		case <-placement:
			settle(ctx, changed, placement)
		case <-tick.C:
		}
		if err := redraw(); err != nil {
			return err
		}
	}
}
