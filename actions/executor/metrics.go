package executor

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/nodestate"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
)

// Results of gke_disruption_actions_total.
const (
	resultSucceeded = "succeeded"
	resultFailed    = "failed"
	resultSkipped   = "skipped"
	resultDryRun    = "dry_run"
)

type metrics struct {
	actions    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inProgress *inProgress
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: collector.Namespace,
			Name:      "actions_total",
			Help:      "Actions by outcome: succeeded, failed, skipped (refused by the policy or withdrawn), dry_run (would have acted).",
		}, []string{"action", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: collector.Namespace,
			Name:      "action_duration_seconds",
			Help:      "Time from accepting an action on a node to its success or failure.",
			Buckets:   []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"action"}),
		inProgress: &inProgress{nodes: map[string]nodestate.Action{}, desc: prometheus.NewDesc(
			collector.Namespace+"_actions_in_progress",
			"Nodes this replica is acting on (accepted, draining, or waiting for GKE after perform-maintenance); only the leader reports non-zero.",
			[]string{"action"}, nil)},
	}
	for _, action := range []nodestate.Action{nodestate.PerformMaintenance, nodestate.Drain} {
		for _, result := range []string{resultSucceeded, resultFailed, resultSkipped, resultDryRun} {
			m.actions.WithLabelValues(string(action), result)
		}
		m.duration.WithLabelValues(string(action))
	}
	for _, c := range []prometheus.Collector{m.actions, m.duration, m.inProgress} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// inProgress counts the nodes with active work at scrape time.
type inProgress struct {
	mu    sync.Mutex
	nodes map[string]nodestate.Action
	desc  *prometheus.Desc
}

func (p *inProgress) set(node string, action nodestate.Action, active bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if active {
		p.nodes[node] = action
	} else {
		delete(p.nodes, node)
	}
}

func (p *inProgress) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.nodes)
}

func (p *inProgress) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *inProgress) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	counts := map[nodestate.Action]int{nodestate.PerformMaintenance: 0, nodestate.Drain: 0}
	for _, a := range p.nodes {
		counts[a]++
	}
	p.mu.Unlock()
	for a, n := range counts {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(n), string(a))
	}
}
