package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
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
	Output   string
	Now      func() time.Time
}

func (o StatusOptions) selector() (labels.Selector, error) {
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return nil, &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --selector %q: %v", o.Selector, err)}
	}
	if o.Pool != "" {
		pool, err := labels.Parse(gke.LabelNodePool + "=" + o.Pool)
		if err != nil {
			return nil, &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --pool %q: %v", o.Pool, err)}
		}
		reqs, _ := pool.Requirements()
		sel = sel.Add(reqs...)
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
	// impending-termination, perform-maintenance-requested, cordoned.
	GKEState      []string `json:"gkeState"`
	Action        string   `json:"action,omitempty"`
	ActionState   string   `json:"actionState,omitempty"`
	ActionReason  string   `json:"actionReason,omitempty"`
	TPUSliceHosts int      `json:"tpuSliceHosts,omitempty"`

	// For the pool header.
	inMaintenance, cordoned, actionActive bool
}

// Interesting reports a node with anything pending or in progress.
func (s NodeStatus) Interesting() bool {
	return s.MaintenanceStart != nil || len(s.GKEState) > 0 || s.ActionState != ""
}

// StatusOf reads one node with the gke package's and the actions service's parsers.
func StatusOf(node *corev1.Node) NodeStatus {
	s := NodeStatus{Node: node.Name, Pool: node.Labels[gke.LabelNodePool], GKEState: []string{}}
	s.Accelerator = node.Labels[gke.LabelAccelerator]
	if s.Accelerator == "" {
		s.Accelerator = node.Labels[gke.LabelTPUAccelerator]
	}
	if m := nodestate.PendingMaintenance(node); m.Pending() {
		start := m.Start()
		s.MaintenanceStart, s.MaintenanceKey, s.CanReschedule = &start, m.Key(), m.CanReschedule
		if raw, ok := node.Annotations[gke.AnnotationUpcomingMaintenance]; ok {
			if u, _ := gke.ParseUpcomingMaintenance(raw); u.Announced {
				s.WindowEnd, s.LatestWindowStart = timeOrNil(u.WindowEnd), timeOrNil(u.LatestWindowStart)
			}
		}
	}
	s.inMaintenance = nodestate.InMaintenance(node)
	if st := gke.MaintenanceState(node.Labels); st != "" {
		s.GKEState = append(s.GKEState, "active-node-maintenance="+st)
	} else if s.inMaintenance {
		s.GKEState = append(s.GKEState, "in-maintenance")
	}
	for _, t := range node.Spec.Taints {
		if t.Key == gke.TaintImpendingTermination {
			s.GKEState = append(s.GKEState, "impending-termination")
			break
		}
	}
	if nodestate.PerformMaintenanceRequested(node) {
		s.GKEState = append(s.GKEState, "perform-maintenance-requested")
	}
	if node.Spec.Unschedulable {
		s.cordoned = true
		s.GKEState = append(s.GKEState, "cordoned")
	}
	// Only nodes the actions service has worked on carry its state; reading the others would parse nothing.
	if _, ok := node.Annotations[nodestate.AnnotationState]; ok {
		r := nodestate.Read(node)
		s.Action, s.ActionState, s.ActionReason = string(r.Action), string(r.Phase), r.Reason
		s.actionActive = r.Active()
	}
	if hosts, ok := gke.TPUSliceHosts(node.Labels); ok {
		s.TPUSliceHosts = hosts
	}
	return s
}

// Statuses are the rows for nodes, sorted by maintenance start (none last), then name.
func Statuses(nodes []*corev1.Node, all bool) []NodeStatus {
	return rowsOf(statusesOf(nodes), all)
}

func statusesOf(nodes []*corev1.Node) []NodeStatus {
	out := make([]NodeStatus, len(nodes))
	for i, n := range nodes {
		out[i] = StatusOf(n)
	}
	return out
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

// poolCounts is the header's line for one pool, over every node the selector matched.
type poolCounts struct {
	pool                                           string
	nodes, scheduled, inMaintenance, cordoned, own int
}

// Render writes the status of nodes in the chosen format.
func Render(w io.Writer, nodes []*corev1.Node, opts StatusOptions) error {
	statuses := statusesOf(nodes)
	rows := rowsOf(statuses, opts.All)
	if opts.Output == OutputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	now := opts.Now()
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tNODES\tSCHEDULED\tIN-MAINTENANCE\tCORDONED\tACTIONS")
	for _, p := range countPools(statuses) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", orDash(p.pool), p.nodes, p.scheduled, p.inMaintenance, p.cordoned, p.own)
	}
	fmt.Fprintln(tw)
	wide := opts.Output == OutputWide
	if len(rows) == 0 {
		fmt.Fprintln(tw, "No nodes with maintenance pending or in progress.")
		return tw.Flush()
	}
	header := "NODE\tPOOL\tACCELERATOR\tSCHEDULED (UTC)\tCAN-RESCHEDULE\tGKE-STATE\tACTION-STATE\tREASON"
	if wide {
		header += "\tWINDOW-END (UTC)\tLATEST-START (UTC)\tMAINTENANCE\tACTION\tTPU-SLICE-HOSTS"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		scheduled := "-"
		if r.MaintenanceStart != nil {
			scheduled = r.MaintenanceStart.UTC().Format("2006-01-02 15:04") + " (" + relative(r.MaintenanceStart.Sub(now)) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Node, orDash(r.Pool), orDash(r.Accelerator), scheduled,
			orDash(r.CanReschedule), orDash(strings.Join(r.GKEState, ",")), orDash(r.ActionState), orDash(r.ActionReason))
		if wide {
			hosts := "-"
			if r.TPUSliceHosts > 0 {
				hosts = strconv.Itoa(r.TPUSliceHosts)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s", utcOrDash(r.WindowEnd), utcOrDash(r.LatestWindowStart), orDash(r.MaintenanceKey),
				orDash(r.Action), hosts)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func countPools(statuses []NodeStatus) []poolCounts {
	byPool := map[string]*poolCounts{}
	for _, s := range statuses {
		p, ok := byPool[s.Pool]
		if !ok {
			p = &poolCounts{pool: s.Pool}
			byPool[s.Pool] = p
		}
		p.nodes++
		if s.MaintenanceStart != nil {
			p.scheduled++
		}
		if s.inMaintenance {
			p.inMaintenance++
		}
		if s.cordoned {
			p.cordoned++
		}
		if s.actionActive {
			p.own++
		}
	}
	out := make([]poolCounts, 0, len(byPool))
	for _, p := range byPool {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pool < out[j].pool })
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func utcOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04")
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

// Status lists the nodes once and writes their status.
func Status(ctx context.Context, client kubernetes.Interface, w io.Writer, opts StatusOptions) error {
	sel, err := opts.selector()
	if err != nil {
		return err
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return apiError("listing nodes", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return Render(w, nodes, opts)
}

// clearScreen moves the cursor home and clears a terminal before a redraw.
const clearScreen = "\x1b[H\x1b[2J"

// Watch writes the status, then again whenever a node change (or a minute passing) alters it, until ctx ends.
// Nodes come from an informer (a watch, not polling). On a terminal each redraw clears the screen first.
func Watch(ctx context.Context, client kubernetes.Interface, w io.Writer, terminal bool, opts StatusOptions) error {
	sel, err := opts.selector()
	if err != nil {
		return err
	}
	// Fail fast, with one line, when the API server cannot be read at all.
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: 1}); err != nil {
		return apiError("listing nodes", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	inf := factory.Core().V1().Nodes().Informer()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	lister := factory.Core().V1().Nodes().Lister()
	var last []byte
	redraw := func() error {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := Render(&buf, nodes, opts); err != nil {
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
	// Relative times ("in 3h12m") age without any node changing: re-render from the cache every minute; a frame
	// that comes out the same is not drawn.
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
		if err := redraw(); err != nil {
			return err
		}
	}
}
