package nodes

import (
	"bytes"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	v1 "k8s.io/api/core/v1"
)

// The families the node collector renders, in exposition order.
const (
	familyInfo = iota
	familyScheduledMaintenance
	familyUpcomingInfo
	familyUpcomingWindowStart
	familyUpcomingWindowEnd
	familyUpcomingLatestWindowStart
	familyMaintenanceState
	familyMaintenanceWindowStarted
	familyImpendingTermination
	familyPerformMaintenanceRequested
	familyReportAndReplaceStatus
	familyUnschedulable
	familyOpportunisticTriggered
	familyOpportunisticDisabled
	familyTPUSliceHosts
	familyGPUXidCritical
	familyGPUXidCriticalSince
	familyGPUsUnhealthy
	familyGKEOperation
	familyTermination
	numFamilies
)

var families = [numFamilies]collector.TextFamily{
	familyInfo: {Name: "gke_node_info", Type: "gauge",
		Help: "GKE node metadata: node pool, zone, machine type, accelerators, provisioning model and physical host."},
	familyScheduledMaintenance: {Name: "gke_node_scheduled_maintenance_timestamp_seconds", Type: "gauge",
		Help: "When host maintenance is scheduled to start, from the node label cloud.google.com/scheduled-maintenance-time."},
	familyUpcomingInfo: {Name: "gke_node_upcoming_maintenance_info", Type: "gauge",
		Help: "Maintenance GKE announced on the node, from the annotation node.gke.io/upcoming-maintenance; absent when none."},
	familyUpcomingWindowStart: {Name: "gke_node_upcoming_maintenance_window_start_timestamp_seconds", Type: "gauge",
		Help: "Start of the upcoming maintenance window, from the annotation node.gke.io/upcoming-maintenance."},
	familyUpcomingWindowEnd: {Name: "gke_node_upcoming_maintenance_window_end_timestamp_seconds", Type: "gauge",
		Help: "End of the upcoming maintenance window, from the annotation node.gke.io/upcoming-maintenance."},
	familyUpcomingLatestWindowStart: {Name: "gke_node_upcoming_maintenance_latest_window_start_timestamp_seconds", Type: "gauge",
		Help: "Latest time the upcoming maintenance window may start, from the annotation node.gke.io/upcoming-maintenance."},
	familyMaintenanceState: {Name: "gke_node_maintenance_state", Type: "gauge",
		Help: "The node is in host maintenance, from the label cloud.google.com/active-node-maintenance."},
	familyMaintenanceWindowStarted: {Name: "gke_node_maintenance_window_started", Type: "gauge",
		Help: "The node has the cloud.google.com/maintenance-window-started taint."},
	familyImpendingTermination: {Name: "gke_node_impending_termination", Type: "gauge",
		Help: "The node has the cloud.google.com/impending-node-termination taint."},
	familyPerformMaintenanceRequested: {Name: "gke_node_perform_maintenance_requested", Type: "gauge",
		Help: "Maintenance was requested early with the label cloud.google.com/perform-maintenance=true, or by the actions service until GKE shows it under way (GKE consumes the label seconds before it shows passthrough)."},
	familyReportAndReplaceStatus: {Name: "gke_node_report_and_replace_status", Type: "gauge",
		Help: "GKE's progress on reporting the node's host as faulty, from the label cloud.google.com/report-and-replace-status (PodsEvicted, OperationRUNNING, OperationDone, Error); absent when none."},
	familyUnschedulable: {Name: "gke_node_unschedulable", Type: "gauge",
		Help: "The node is cordoned (spec.unschedulable)."},
	familyOpportunisticTriggered: {Name: "gke_node_opportunistic_maintenance_triggered", Type: "gauge",
		Help: "GKE triggered opportunistic maintenance, from the annotation node.gke.io/maintenance-state."},
	familyOpportunisticDisabled: {Name: "gke_node_opportunistic_maintenance_disabled", Type: "gauge",
		Help: "Opportunistic maintenance is disabled with the label cloud.google.com/opportunistic-disable=true."},
	familyTPUSliceHosts: {Name: "gke_node_tpu_slice_hosts", Type: "gauge",
		Help: "VMs in the node's TPU slice: chips of cloud.google.com/gke-tpu-topology over chips per VM of the machine type; above 1 a multi-host slice."},
	familyGPUXidCritical: {Name: "gke_node_gpu_xid_critical", Type: "gauge",
		Help: "A critical GPU Xid seen since boot, from the GPU device plugin's node condition XidCriticalError; absent when the condition was set in an earlier boot."},
	familyGPUXidCriticalSince: {Name: "gke_node_gpu_xid_critical_since_timestamp_seconds", Type: "gauge",
		Help: "When the node condition XidCriticalError of the current boot became True."},
	familyGPUsUnhealthy: {Name: "gke_node_gpus_unhealthy", Type: "gauge",
		Help: "Accelerator devices the device plugin marked unhealthy: capacity minus allocatable of nvidia.com/gpu or google.com/tpu."},
	familyGKEOperation: {Name: "gke_node_gke_operation", Type: "gauge",
		Help: "GKE's own work on the node (an upgrade, a repair, its drain), from the label operation.gke.io/type and the annotation gke-current-operation; absent when none."},
	familyTermination: {Name: "gke_node_termination_timestamp_seconds", Type: "gauge",
		Help: "A planned end of the node's VM other than maintenance: reason max_run_duration from the annotation node.gke.io/machine-termination-datetime (flex-start, queued provisioning)."},
}

// maxRecordBytes bounds a node's samples so the family ends fit their uint16s; real nodes render a few hundred.
const maxRecordBytes = math.MaxUint16

// render turns a node's view into its record. Series are sparse: a signal's series exists only while the signal
// does.
func render(v *nodeview.View) *record {
	r := &record{name: v.Name, resourceVersion: v.ResourceVersion}
	for _, u := range v.Unreadable {
		r.bad = append(r.bad, parseError{key: u.Key, value: u.Value})
	}
	name := v.Name
	labels := v.Labels
	b := make([]byte, 0, 320)
	end := func(f int) { r.ends[f] = uint16(len(b)) }

	// Label names in sorted order, as client_golang writes them.
	b = collector.AppendSample(b, families[familyInfo].Name, 1,
		"accelerator", labelValue(labels, gke.LabelAccelerator),
		"block", utf8Value(v.Block),
		"host", utf8Value(v.Host),
		"machine_type", labelValue(labels, gke.LabelInstanceType, gke.LabelInstanceTypeDeprecated),
		"node", name,
		"node_pool", labelValue(labels, gke.LabelNodePool),
		"provisioning", provisioning(labels),
		"subblock", utf8Value(v.Subblock),
		"tpu_accelerator", labelValue(labels, gke.LabelTPUAccelerator),
		"tpu_topology", labelValue(labels, gke.LabelTPUTopology),
		"zone", labelValue(labels, gke.LabelZone, gke.LabelZoneDeprecated),
	)
	end(familyInfo)

	if v.HasScheduled {
		b = collector.AppendSample(b, families[familyScheduledMaintenance].Name, float64(v.Scheduled), "node", name)
	}
	end(familyScheduledMaintenance)

	upcoming := v.Upcoming
	if upcoming.Announced {
		b = collector.AppendSample(b, families[familyUpcomingInfo].Name, 1,
			"can_reschedule", upcoming.CanReschedule.LabelValue(),
			"node", name,
			"reasons", upcoming.JoinedReasons(),
			"status", upcoming.Status,
			"type", upcoming.Type,
		)
	}
	end(familyUpcomingInfo)
	for _, w := range []struct {
		family int
		t      time.Time
	}{
		{familyUpcomingWindowStart, upcoming.WindowStart},
		{familyUpcomingWindowEnd, upcoming.WindowEnd},
		{familyUpcomingLatestWindowStart, upcoming.LatestWindowStart},
	} {
		if !w.t.IsZero() {
			b = collector.AppendSample(b, families[w.family].Name, epochSeconds(w.t), "node", name)
		}
		end(w.family)
	}

	if state := maintenanceState(labels); state != "" {
		b = collector.AppendSample(b, families[familyMaintenanceState].Name, 1, "node", name, "state", state)
	}
	end(familyMaintenanceState)
	b = appendTaints(b, name, v.MaintenanceWindowStarted, familyMaintenanceWindowStarted)
	end(familyMaintenanceWindowStarted)
	b = appendTaints(b, name, v.ImpendingTermination, familyImpendingTermination)
	end(familyImpendingTermination)

	if v.MaintenanceRequested() {
		b = collector.AppendSample(b, families[familyPerformMaintenanceRequested].Name, 1, "node", name)
	}
	end(familyPerformMaintenanceRequested)
	if v.ReportStatus != "" {
		b = collector.AppendSample(b, families[familyReportAndReplaceStatus].Name, 1, "node", name, "status", utf8Value(string(v.ReportStatus)))
	}
	end(familyReportAndReplaceStatus)
	if v.Unschedulable {
		b = collector.AppendSample(b, families[familyUnschedulable].Name, 1, "node", name)
	}
	end(familyUnschedulable)
	// This project's actions service's opportunistic maintenance, started and not finished, counts too (its
	// annotations, see actions/README.md), so the series covers pools GKE's own feature does not.
	if v.OpportunisticTriggered || v.Record.Action == nodeview.OpportunisticMaintenance && v.Record.Active() {
		b = collector.AppendSample(b, families[familyOpportunisticTriggered].Name, 1, "node", name)
	}
	end(familyOpportunisticTriggered)
	if v.OpportunisticDisabled {
		b = collector.AppendSample(b, families[familyOpportunisticDisabled].Name, 1, "node", name)
	}
	end(familyOpportunisticDisabled)
	if v.TPUSliceHosts > 0 {
		b = collector.AppendSample(b, families[familyTPUSliceHosts].Name, float64(v.TPUSliceHosts), "node", name)
	}
	end(familyTPUSliceHosts)
	xid := v.XidCritical
	if xid != nil {
		for _, x := range xid.Xids {
			b = collector.AppendSample(b, families[familyGPUXidCritical].Name, 1, "node", name, "xid", strconv.FormatUint(uint64(x), 10))
		}
	}
	end(familyGPUXidCritical)
	if xid != nil && !xid.Since.IsZero() {
		b = collector.AppendSample(b, families[familyGPUXidCriticalSince].Name, epochSeconds(xid.Since), "node", name)
	}
	end(familyGPUXidCriticalSince)
	for _, u := range []struct {
		resource string
		count    int64
	}{{gke.ResourceGPU, v.UnhealthyGPUs}, {gke.ResourceTPU, v.UnhealthyTPUs}} {
		if u.count > 0 {
			b = collector.AppendSample(b, families[familyGPUsUnhealthy].Name, float64(u.count), "node", name, "resource", u.resource)
		}
	}
	end(familyGPUsUnhealthy)
	for _, op := range v.GKEOperations {
		b = collector.AppendSample(b, families[familyGKEOperation].Name, 1, "node", name, "operation_type", utf8Value(op))
	}
	end(familyGKEOperation)
	if !v.PlannedTermination.IsZero() {
		b = collector.AppendSample(b, families[familyTermination].Name, epochSeconds(v.PlannedTermination), "node", name, "reason", gke.TerminationMaxRunDuration)
	}
	end(familyTermination)

	if len(b) > maxRecordBytes {
		// Only absurd values (thousands of maintenance reasons) get here: keep the node's info series alone rather
		// than corrupt the offsets. Label values are at most 63 bytes, so the info series always fits.
		b = b[:r.ends[familyInfo]]
		for f := range r.ends {
			r.ends[f] = uint16(len(b))
		}
	}
	r.samples = append([]byte(nil), b...) // exactly sized: the record lives as long as the node
	return r
}

// appendTaints appends a sample of family f for each of a taint's effects.
func appendTaints(b []byte, node string, effects []v1.TaintEffect, f int) []byte {
	for _, effect := range effects {
		b = collector.AppendSample(b, families[f].Name, 1, "effect", string(effect), "node", node)
	}
	return b
}

func epochSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// store holds every node's record in a dense slice (a scrape walks it once per family), an index by name for
// updates, and counts per family so a scrape skips families no node has.
type store struct {
	mu     sync.RWMutex
	nodes  []*record
	index  map[string]int
	counts [numFamilies]int
	// generation changes with the text WriteText writes; most node updates (status, heartbeats) leave it alone.
	generation uint64
}

func newStore() *store {
	return &store{index: make(map[string]int)}
}

func (s *store) set(r *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[r.name]
	if ok {
		old := s.nodes[i]
		if old.ends != r.ends || !bytes.Equal(old.samples, r.samples) {
			s.generation++
		}
		s.count(old, -1)
		s.nodes[i] = r
	} else {
		s.generation++
		s.index[r.name] = len(s.nodes)
		s.nodes = append(s.nodes, r)
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
	s.generation++
	s.count(s.nodes[i], -1)
	// Move the last node into the gap.
	last := len(s.nodes) - 1
	s.nodes[i] = s.nodes[last]
	s.index[s.nodes[i].name] = i
	s.nodes[last] = nil
	s.nodes = s.nodes[:last]
	delete(s.index, name)
}

func (s *store) count(r *record, delta int) {
	for f := range numFamilies {
		if r.family(f) != nil {
			s.counts[f] += delta
		}
	}
}

// TextGeneration numbers the text WriteText writes now.
func (s *store) TextGeneration() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.generation
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
			if b := r.family(f); b != nil {
				if _, err := w.Write(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
