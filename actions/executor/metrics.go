package executor

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Results of gke_disruption_actions_total.
const (
	resultSucceeded = "succeeded"
	resultFailed    = "failed"
	resultSkipped   = "skipped"
	resultDryRun    = "dry_run"
)

// actionNames are every action the metrics are pre-set for.
var actionNames = []nodeview.Action{nodeview.PerformMaintenance, nodeview.Drain, nodeview.OpportunisticMaintenance, nodeview.ReportFaultyHost}

type metrics struct {
	actions  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	leader   prometheus.Gauge
	overlaps *prometheus.CounterVec
	state    *workState
}

func newMetrics(reg prometheus.Registerer, e *Executor) (*metrics, error) {
	m := &metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "actions_total",
			Help:      "Actions by outcome: succeeded, failed, skipped (refused by the policy, withdrawn, or ended because the maintenance moved), dry_run (would have acted).",
		}, []string{"action", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: nodeview.Namespace,
			Name:      "action_duration_seconds",
			Help:      "Time from accepting an action on a node to its success or failure.",
			Buckets:   []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"action"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace,
			Name:      "actions_leader",
			Help:      "1 while this replica holds the Lease and takes work.",
		}),
		overlaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "actions_overlaps_total",
			Help:      "Work found on nodes this instance's pools select but owned by another live actions instance (its Lease, namespace/name), once per node and maintenance: the two instances' pools overlap.",
		}, []string{"owner"}),
		state: newWorkState(e),
	}
	for _, action := range actionNames {
		for _, result := range []string{resultSucceeded, resultFailed, resultSkipped, resultDryRun} {
			m.actions.WithLabelValues(string(action), result)
		}
		m.duration.WithLabelValues(string(action))
	}
	for _, result := range []string{resultSucceeded, resultFailed} {
		m.actions.WithLabelValues(string(actionUpgradeNodePool), result)
	}
	for _, c := range []prometheus.Collector{m.actions, m.duration, m.leader, m.overlaps, m.state, newRepairSeries(e)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// workState keeps, from the node watch, the nodes this service has work on (in progress, or finished but still
// holding our cordon), and exposes them on the leader: gke_disruption_action_state, gke_disruption_actions_in_progress
// and, from the live alerts, gke_disruption_actions_waiting. A deleted node leaves all three at once.
type workState struct {
	e          *Executor
	mu         sync.Mutex
	nodes      map[string]nodeWork
	stateDesc  *prometheus.Desc
	inProgress *prometheus.Desc
	waiting    *prometheus.Desc
}

type nodeWork struct {
	action nodeview.Action
	state  string
	active bool
}

func newWorkState(e *Executor) *workState {
	return &workState{
		e:     e,
		nodes: map[string]nodeWork{},
		stateDesc: prometheus.NewDesc(nodeview.Namespace+"_action_state",
			"1 for each node this service has work on (state accepted, draining, maintenance-requested; done or failed while it still keeps the node cordoned); only the leader reports.",
			[]string{"node", "action", "state"}, nil),
		inProgress: prometheus.NewDesc(nodeview.Namespace+"_actions_in_progress",
			"Nodes this service is acting on (accepted, draining, or waiting for GKE after perform-maintenance); only the leader reports non-zero.",
			[]string{"action"}, nil),
		waiting: prometheus.NewDesc(nodeview.Namespace+"_actions_waiting",
			"Nodes waiting to act, by the reason they wait: window, pool_budget, cluster_cap, paused (alerts, and idle nodes picked for opportunistic maintenance); only the leader reports.",
			[]string{"action", "pool", "reason"}, nil),
	}
}

// observe records the node's work from its annotations.
func (w *workState) observe(node *nodeview.View) {
	r := node.Record
	w.mu.Lock()
	defer w.mu.Unlock()
	if (!r.Active() && !r.HoldsCordon()) || (r.Owner != "" && r.Owner != w.e.opts.Owner) {
		delete(w.nodes, node.Name)
		return
	}
	w.nodes[node.Name] = nodeWork{action: r.Action, state: string(r.Phase), active: r.Active()}
}

// names are the nodes with work.
func (w *workState) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Keys(w.nodes))
}

func (w *workState) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.nodes, name)
}

func (w *workState) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.stateDesc
	ch <- w.inProgress
	ch <- w.waiting
}

func (w *workState) Collect(ch chan<- prometheus.Metric) {
	leading := w.e.Leading()
	counts := map[nodeview.Action]int{}
	for _, a := range actionNames {
		counts[a] = 0
	}
	w.mu.Lock()
	for node, nw := range w.nodes {
		if !leading {
			break
		}
		ch <- prometheus.MustNewConstMetric(w.stateDesc, prometheus.GaugeValue, 1, node, string(nw.action), nw.state)
		if nw.active {
			counts[nw.action]++
		}
	}
	w.mu.Unlock()
	for a, n := range counts {
		ch <- prometheus.MustNewConstMetric(w.inProgress, prometheus.GaugeValue, float64(n), string(a))
	}
	for k, n := range w.e.book.waiting() {
		ch <- prometheus.MustNewConstMetric(w.waiting, prometheus.GaugeValue, float64(n), k.action, k.pool, k.reason)
	}
}
