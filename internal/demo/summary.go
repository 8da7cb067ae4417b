package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Summary is what the demo shows while the story runs.
type Summary struct {
	GKE driver.Status
	// Firing counts firing alerts by name.
	Firing map[string]int
	// Actions counts the actions service's actions by "action result".
	Actions map[string]int
	// Nodes are the Node objects by name.
	Nodes map[string]corev1.Node
	// Workloads are the workloads on GPU/TPU/Spot nodes as the exporter sees them, Findings its readiness findings.
	Workloads []Workload
	Findings  []Finding
	// At is when the summary was read.
	At time.Time
	// Problems are what could not be read.
	Problems []string
}

// Workload is one workload's gke_workload_* series.
type Workload struct {
	Namespace, Kind, Name string
	Nodes, InMaintenance  int
	// NextMaintenance is zero when none of its nodes has maintenance scheduled.
	NextMaintenance time.Time
}

// Finding is one gke_readiness_findings series; a cluster check has no workload.
type Finding struct {
	Check, Namespace, Kind, Name string
	Count                        int
}

// Prometheus is a client of the stack's Prometheus API.
func (s *Stack) PrometheusAPI() (promv1.API, error) {
	client, err := api.NewClient(api.Config{Address: "http://" + s.Prometheus})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(client), nil
}

// Summarize reads the driver's status, the firing alerts and the actions taken from Prometheus, and the nodes.
func (s *Stack) Summarize(ctx context.Context) Summary {
	sum := Summary{GKE: s.Driver.Status(), Firing: map[string]int{}, Actions: map[string]int{}, Nodes: map[string]corev1.Node{},
		At: time.Now()}
	prom, err := s.PrometheusAPI()
	if err != nil {
		sum.Problems = append(sum.Problems, err.Error())
		return sum
	}
	if alerts, err := prom.Alerts(ctx); err != nil {
		sum.Problems = append(sum.Problems, "Prometheus alerts: "+err.Error())
	} else {
		for _, a := range alerts.Alerts {
			if a.State == promv1.AlertStateFiring {
				sum.Firing[string(a.Labels[model.AlertNameLabel])]++
			}
		}
	}
	v, _, _, err := prom.Query(ctx, `sum by (action, result) (gke_disruption_actions_total)`, time.Now())
	if err != nil {
		sum.Problems = append(sum.Problems, "Prometheus query: "+err.Error())
	} else if vec, ok := v.(model.Vector); ok {
		for _, smp := range vec {
			if smp.Value > 0 {
				sum.Actions[string(smp.Metric["action"])+" "+string(smp.Metric["result"])] = int(smp.Value)
			}
		}
	}
	sum.Workloads, sum.Findings = workloads(ctx, prom, sum.At, &sum.Problems)
	nodes, err := s.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		sum.Problems = append(sum.Problems, "nodes: "+err.Error())
	} else {
		for _, n := range nodes.Items {
			sum.Nodes[n.Name] = n
		}
	}
	return sum
}

// workloads reads the workloads collector's series.
func workloads(ctx context.Context, prom promv1.API, at time.Time, problems *[]string) ([]Workload, []Finding) {
	query := func(q string) model.Vector {
		v, _, _, err := prom.Query(ctx, q, at)
		if err != nil {
			*problems = append(*problems, "Prometheus query: "+err.Error())
			return nil
		}
		vec, _ := v.(model.Vector)
		return vec
	}
	type key struct{ namespace, kind, name string }
	keyOf := func(m model.Metric) key {
		return key{string(m["namespace"]), string(m["workload_kind"]), string(m["workload"])}
	}
	byKey := map[key]*Workload{}
	for _, smp := range query(`gke_workload_nodes`) {
		k := keyOf(smp.Metric)
		byKey[k] = &Workload{Namespace: k.namespace, Kind: k.kind, Name: k.name, Nodes: int(smp.Value)}
	}
	for _, smp := range query(`gke_workload_next_maintenance_timestamp_seconds`) {
		if w := byKey[keyOf(smp.Metric)]; w != nil {
			w.NextMaintenance = time.Unix(int64(smp.Value), 0)
		}
	}
	for _, smp := range query(`gke_workload_nodes_in_maintenance`) {
		if w := byKey[keyOf(smp.Metric)]; w != nil {
			w.InMaintenance = int(smp.Value)
		}
	}
	var out []Workload
	for _, w := range byKey {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	var findings []Finding
	for _, smp := range query(`gke_readiness_findings`) {
		k := keyOf(smp.Metric)
		findings = append(findings, Finding{Check: string(smp.Metric["check"]), Namespace: k.namespace, Kind: k.kind,
			Name: k.name, Count: int(smp.Value)})
	}
	sort.Slice(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		return a.Check+a.Namespace+a.Name < b.Check+b.Namespace+b.Name
	})
	return out, findings
}

// Render writes the summary as one screen.
func (sum Summary) Render(w io.Writer, scale float64) {
	g := sum.GKE
	fmt.Fprintf(w, "Story time %s (%.0fx)   events to come: %d", clock(g.Story), scale, g.EventsLeft)
	if g.EventsLeft == 0 && g.Scheduled+g.InMaintenance+g.Preempting == 0 {
		fmt.Fprint(w, "   the story is over: Ctrl-C stops the demo")
	}
	fmt.Fprint(w, "\n\n")
	cordoned := 0
	for _, n := range sum.Nodes {
		if n.Spec.Unschedulable {
			cordoned++
		}
	}
	fmt.Fprintf(w, "Nodes: %d   maintenance scheduled: %d   in maintenance: %d   maintained: %d   preempted: %d   cordoned: %d\n",
		len(sum.GKE.Nodes), sum.GKE.Scheduled, sum.GKE.InMaintenance, sum.GKE.Maintained, sum.GKE.Preempted+sum.GKE.Preempting, cordoned)
	fmt.Fprintf(w, "Alerts firing: %s\n", counts(sum.Firing))
	fmt.Fprintf(w, "Actions taken: %s\n\n", counts(sum.Actions))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOOL\tGKE\tACTIONS SERVICE\tNODE STATE")
	for _, ns := range sum.GKE.Nodes {
		gke := ns.Phase
		if gke == "" {
			gke = "-"
		}
		if ns.Phase == "scheduled" {
			gke += " for " + ns.WindowStart.Local().Format("15:04:05")
		}
		n := sum.Nodes[ns.Name]
		action := "-"
		if a := n.Annotations[nodeview.AnnotationAction]; a != "" {
			action = a + ": " + n.Annotations[nodeview.AnnotationState]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ns.Name, ns.Pool, gke, action, nodeState(n))
	}
	tw.Flush()
	sum.renderWorkloads(w, scale)
	for _, p := range sum.Problems {
		fmt.Fprintln(w, "!", p)
	}
}

// renderWorkloads writes each workload's next maintenance, in story time, and the readiness findings.
func (sum Summary) renderWorkloads(w io.Writer, scale float64) {
	if len(sum.Workloads) > 0 {
		fmt.Fprintln(w, "\nWorkloads on GPU/TPU/Spot nodes:")
	}
	for _, wl := range sum.Workloads {
		line := fmt.Sprintf("  %s %s/%s: ", wl.Kind, wl.Namespace, wl.Name)
		switch {
		case !wl.NextMaintenance.IsZero() && wl.NextMaintenance.After(sum.At):
			in := time.Duration(float64(wl.NextMaintenance.Sub(sum.At)) * scale).Round(time.Minute)
			line += fmt.Sprintf("next maintenance in %s on its %d nodes", storyDuration(in), wl.Nodes)
		case !wl.NextMaintenance.IsZero():
			line += fmt.Sprintf("maintenance due on its %d nodes", wl.Nodes)
		default:
			line += fmt.Sprintf("no maintenance scheduled on its %d nodes", wl.Nodes)
		}
		if wl.InMaintenance > 0 {
			line += fmt.Sprintf(", %d of %d in maintenance now", wl.InMaintenance, wl.Nodes)
		}
		fmt.Fprintln(w, line)
	}
	if len(sum.Findings) > 0 {
		fmt.Fprintln(w, "Readiness findings:")
	}
	for _, f := range sum.Findings {
		if f.Name == "" {
			fmt.Fprintf(w, "  %s: the cluster\n", f.Check)
			continue
		}
		fmt.Fprintf(w, "  %s: %s %s/%s, %d pods\n", f.Check, f.Kind, f.Namespace, f.Name, f.Count)
	}
}

// storyDuration shows a duration as hours and minutes (3h 10m).
func storyDuration(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	if h == 0 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh %02dm", h, m)
}

// nodeState is what kubectl get nodes would show, plus GKE's maintenance state.
func nodeState(n corev1.Node) string {
	var parts []string
	ready := "NotReady"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = "Ready"
		}
	}
	parts = append(parts, ready)
	if n.Spec.Unschedulable {
		parts = append(parts, "SchedulingDisabled")
	}
	if s := n.Labels[driver.LabelActiveMaintenance]; s != "" {
		parts = append(parts, "maintenance="+s)
	}
	if n.Labels[driver.LabelPerformMaintenance] == "true" {
		parts = append(parts, "perform-maintenance")
	}
	if b := n.Labels[gke.LabelFaultBehavior]; b != "" {
		parts = append(parts, "fault-behavior="+b)
	}
	if s := n.Labels[gke.LabelReportAndReplaceStatus]; s != "" {
		parts = append(parts, "report="+s)
	}
	return strings.Join(parts, ",")
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// clock shows a story duration as day and time of day.
func clock(d time.Duration) string {
	days := int(d / (24 * time.Hour))
	rest := d % (24 * time.Hour)
	return fmt.Sprintf("day %d %02d:%02d", days+1, int(rest/time.Hour), int(rest%time.Hour/time.Minute))
}
