package nodes

import (
	"io"
	"sync"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	v1 "k8s.io/api/core/v1"
)

// The families the node collector renders, in exposition order.
const (
	familyInfo = iota
	familyScheduledMaintenance
	familyMaintenanceState
	familyImpendingTermination
	familyPerformMaintenanceRequested
	familyUnschedulable
	familyOpportunisticTriggered
	familyOpportunisticDisabled
	numFamilies
)

var families = [numFamilies]collector.TextFamily{
	familyInfo: {Name: "gke_node_info", Type: "gauge",
		Help: "GKE node metadata: node pool, zone, machine type, accelerators and provisioning model."},
	familyScheduledMaintenance: {Name: "gke_node_scheduled_maintenance_timestamp_seconds", Type: "gauge",
		Help: "When host maintenance is scheduled to start, from the node label cloud.google.com/scheduled-maintenance-time."},
	familyMaintenanceState: {Name: "gke_node_maintenance_state", Type: "gauge",
		Help: "The node is in host maintenance, from the label cloud.google.com/active-node-maintenance."},
	familyImpendingTermination: {Name: "gke_node_impending_termination", Type: "gauge",
		Help: "The node has the cloud.google.com/impending-node-termination taint."},
	familyPerformMaintenanceRequested: {Name: "gke_node_perform_maintenance_requested", Type: "gauge",
		Help: "Maintenance was requested early with the label cloud.google.com/perform-maintenance=true."},
	familyUnschedulable: {Name: "gke_node_unschedulable", Type: "gauge",
		Help: "The node is cordoned (spec.unschedulable)."},
	familyOpportunisticTriggered: {Name: "gke_node_opportunistic_maintenance_triggered", Type: "gauge",
		Help: "GKE triggered opportunistic maintenance, from the annotation node.gke.io/maintenance-state."},
	familyOpportunisticDisabled: {Name: "gke_node_opportunistic_maintenance_disabled", Type: "gauge",
		Help: "Opportunistic maintenance is disabled with the label cloud.google.com/opportunistic-disable=true."},
}

// rendered is one node's samples, one byte slice per family (nil where the node has no series in it).
type rendered [numFamilies][]byte

// parseError names a label whose value could not be read.
type parseError struct {
	label string
	value string
}

// render turns a stripped node into its samples. Series are sparse: a signal's series exists only while the
// signal does.
func render(node *v1.Node) (rendered, []parseError) {
	var r rendered
	var errs []parseError
	name := node.Name
	labels := node.Labels
	// Label names in sorted order, as client_golang writes them.
	r[familyInfo] = collector.AppendSample(nil, families[familyInfo].Name, 1,
		"accelerator", labelValue(labels, gke.LabelAccelerator),
		"machine_type", labelValue(labels, gke.LabelInstanceType, gke.LabelInstanceTypeDeprecated),
		"node", name,
		"node_pool", labelValue(labels, gke.LabelNodePool),
		"provisioning", provisioning(labels),
		"tpu_accelerator", labelValue(labels, gke.LabelTPUAccelerator),
		"tpu_topology", labelValue(labels, gke.LabelTPUTopology),
		"zone", labelValue(labels, gke.LabelZone, gke.LabelZoneDeprecated),
	)
	if v, ok := labels[gke.LabelScheduledMaintenanceTime]; ok {
		if secs, ok := gke.ParseMaintenanceTime(v); ok {
			r[familyScheduledMaintenance] = collector.AppendSample(nil, families[familyScheduledMaintenance].Name, float64(secs), "node", name)
		} else {
			errs = append(errs, parseError{label: gke.LabelScheduledMaintenanceTime, value: v})
		}
	}
	if state := maintenanceState(labels); state != "" {
		r[familyMaintenanceState] = collector.AppendSample(nil, families[familyMaintenanceState].Name, 1, "node", name, "state", state)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == gke.TaintImpendingTermination {
			r[familyImpendingTermination] = collector.AppendSample(r[familyImpendingTermination],
				families[familyImpendingTermination].Name, 1, "effect", string(taint.Effect), "node", name)
		}
	}
	if labels[gke.LabelPerformMaintenance] == "true" {
		r[familyPerformMaintenanceRequested] = collector.AppendSample(nil, families[familyPerformMaintenanceRequested].Name, 1, "node", name)
	}
	if node.Spec.Unschedulable {
		r[familyUnschedulable] = collector.AppendSample(nil, families[familyUnschedulable].Name, 1, "node", name)
	}
	if gke.OpportunisticTriggered(node.Annotations) {
		r[familyOpportunisticTriggered] = collector.AppendSample(nil, families[familyOpportunisticTriggered].Name, 1, "node", name)
	}
	if labels[gke.LabelOpportunisticDisable] == "true" {
		r[familyOpportunisticDisabled] = collector.AppendSample(nil, families[familyOpportunisticDisabled].Name, 1, "node", name)
	}
	return r, errs
}

// store holds every node's rendered samples in a dense slice (a scrape walks it once per family), an index by
// name for updates, and counts per family so a scrape skips families no node has.
type store struct {
	mu     sync.RWMutex
	nodes  []*rendered
	names  []string
	index  map[string]int
	counts [numFamilies]int
}

func newStore() *store {
	return &store{index: make(map[string]int)}
}

func (s *store) set(name string, r *rendered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[name]
	if ok {
		s.count(s.nodes[i], -1)
		s.nodes[i] = r
	} else {
		s.index[name] = len(s.nodes)
		s.nodes = append(s.nodes, r)
		s.names = append(s.names, name)
	}
	s.count(r, 1)
}

func (s *store) delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[name]
	if !ok {
		return
	}
	s.count(s.nodes[i], -1)
	// Move the last node into the gap.
	last := len(s.nodes) - 1
	s.nodes[i], s.names[i] = s.nodes[last], s.names[last]
	s.index[s.names[i]] = i
	s.nodes[last], s.names[last] = nil, ""
	s.nodes, s.names = s.nodes[:last], s.names[:last]
	delete(s.index, name)
}

func (s *store) count(r *rendered, delta int) {
	for f, b := range r {
		if b != nil {
			s.counts[f] += delta
		}
	}
}

// WriteText writes every family that has samples: a header, then each node's bytes.
func (s *store) WriteText(w io.Writer) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for f := range families {
		if s.counts[f] == 0 {
			continue
		}
		if err := families[f].WriteHeader(w); err != nil {
			return err
		}
		for _, r := range s.nodes {
			if b := r[f]; b != nil {
				if _, err := w.Write(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
