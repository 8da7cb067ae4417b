// Package metadata simulates the GCE metadata server of one VM: the Metadata-Flavor handshake, ETags, hanging GETs
// (wait_for_change, last_etag, timeout_sec), ?alt=json, 404 for undefined keys, and the maintenance and preemption
// keys a host event changes. Tests and the demo script those changes through the Go API, and inject 503s and delays.
//
// One Server is one VM, as on GCE, where every VM reaches its own metadata server at the same address: run one
// Server per simulated node and point each node agent's GCE_METADATA_HOST at its own listener.
package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Keys the simulator serves, relative to /computeMetadata/v1/.
const (
	KeyMaintenanceEvent    = "instance/maintenance-event"
	KeyUpcomingMaintenance = "instance/upcoming-maintenance"
	KeyPreempted           = "instance/preempted"
	KeyHostname            = "instance/hostname"
	KeyID                  = "instance/id"
	KeyName                = "instance/name"
	KeyZone                = "instance/zone"
	KeyProjectID           = "project/project-id"
	KeyNumericProjectID    = "project/numeric-project-id"
	KeyClusterName         = "instance/attributes/cluster-name"
	KeyClusterLocation     = "instance/attributes/cluster-location"
)

// Values of instance/maintenance-event.
const (
	EventNone      = "NONE"
	EventMigrate   = "MIGRATE_ON_HOST_MAINTENANCE"
	EventTerminate = "TERMINATE_ON_HOST_MAINTENANCE"
)

// NoNotificationsBody is the error text of a 503 that says no maintenance notice has been received.
const NoNotificationsBody = "no notifications have been received yet, try again later"

const pathPrefix = "/computeMetadata/v1/"

// NothingScheduled is how instance/upcoming-maintenance reads while no maintenance is scheduled; real servers have
// been seen answering in each of these ways.
type NothingScheduled int

const (
	// NothingScheduledEmptyObject answers 200 with "{}".
	NothingScheduledEmptyObject NothingScheduled = iota
	// NothingScheduledNone answers 200 with "NONE".
	NothingScheduledNone
	// NothingScheduledUnavailable answers 503 with NoNotificationsBody.
	NothingScheduledUnavailable
	// NothingScheduledUnsupported answers 404: the key does not exist on this VM.
	NothingScheduledUnsupported
)

// Instance describes the simulated VM.
type Instance struct {
	Name             string // instance/name; also the first label of instance/hostname
	ID               string // instance/id, numeric
	Zone             string // e.g. us-central1-a; served as projects/<number>/zones/<zone>
	ProjectID        string
	NumericProjectID string
	NothingScheduled NothingScheduled
	// ClusterName and ClusterLocation are the GKE cluster of the node (instance/attributes/cluster-name and
	// cluster-location); empty leaves the attribute undefined, as on a VM outside GKE.
	ClusterName     string
	ClusterLocation string
}

// Maintenance is an upcoming maintenance as instance/upcoming-maintenance describes it.
type Maintenance struct {
	Type              string // SCHEDULED (default), UNSCHEDULED, UNKNOWN_TYPE
	Status            string // PENDING (default), ONGOING, UNKNOWN
	CanReschedule     bool
	WindowStart       time.Time
	WindowEnd         time.Time
	LatestWindowStart time.Time
	Reasons           []string // e.g. PLANNED_UPDATE, FAILURE_GPU
}

// JSON renders m the way the metadata server does (can_reschedule as a string, times in RFC 3339, zero times
// left out).
func (m Maintenance) JSON() string {
	doc := map[string]any{
		"type":               orDefault(m.Type, "SCHEDULED"),
		"maintenance_status": orDefault(m.Status, "PENDING"),
		"can_reschedule":     strconv.FormatBool(m.CanReschedule),
	}
	for field, t := range map[string]time.Time{
		"window_start_time":        m.WindowStart,
		"window_end_time":          m.WindowEnd,
		"latest_window_start_time": m.LatestWindowStart,
	} {
		if !t.IsZero() {
			doc[field] = t.UTC().Format(time.RFC3339)
		}
	}
	if len(m.Reasons) > 0 {
		doc["maintenance_reasons"] = m.Reasons
	}
	b, _ := json.Marshal(doc) // a map of strings and a string slice always marshals
	return string(b)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// entry is what a key answers: a value (status 200) or an error status with its body. A missing entry is a 404.
type entry struct {
	status int
	body   string
}

func (e entry) etag() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", e.status, e.body)
	return strconv.FormatUint(h.Sum64(), 16)
}

// fault is an injected misbehaviour of one key.
type fault struct {
	failures int // answer this many requests with failCode
	failCode int
	delay    time.Duration // hold every request this long before answering
}

// Server is the metadata server of one simulated VM. It is an http.Handler; the zero value is not usable.
type Server struct {
	inst Instance

	mu        sync.Mutex
	values    map[string]entry
	scheduled *Maintenance
	changed   chan struct{} // closed and replaced on every change
	faults    map[string]*fault
	waiting   map[string]int
	requests  map[string]int
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns the metadata server of inst with no maintenance and no preemption.
func New(inst Instance) *Server {
	s := &Server{
		values:   map[string]entry{},
		changed:  make(chan struct{}),
		faults:   map[string]*fault{},
		waiting:  map[string]int{},
		requests: map[string]int{},
		closed:   make(chan struct{}),
	}
	s.Replace(inst)
	return s
}

// Replace makes the server describe a new VM, inst, created in place of the one before (a node pool upgrade's
// new node on the same endpoint): its identity, no maintenance and no preemption.
func (s *Server) Replace(inst Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inst = inst
	hostname := inst.Name + "." + inst.Zone + ".c." + inst.ProjectID + ".internal"
	for key, value := range map[string]string{
		KeyHostname:         hostname,
		KeyID:               inst.ID,
		KeyName:             inst.Name,
		KeyZone:             "projects/" + inst.NumericProjectID + "/zones/" + inst.Zone,
		KeyProjectID:        inst.ProjectID,
		KeyNumericProjectID: inst.NumericProjectID,
	} {
		s.values[key] = entry{status: http.StatusOK, body: value}
	}
	for key, value := range map[string]string{KeyClusterName: inst.ClusterName, KeyClusterLocation: inst.ClusterLocation} {
		if value != "" {
			s.values[key] = entry{status: http.StatusOK, body: value}
		}
	}
	s.resetLocked()
}

// Instance returns the VM the server describes.
func (s *Server) Instance() Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst
}

// Reset returns the maintenance and preemption keys to a healthy VM's values, as after the VM is recreated.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Server) resetLocked() {
	s.scheduled = nil
	s.setLocked(KeyMaintenanceEvent, entry{status: http.StatusOK, body: EventNone})
	s.setLocked(KeyPreempted, entry{status: http.StatusOK, body: "FALSE"})
	s.clearUpcomingLocked()
}

// ScheduleMaintenance announces m on instance/upcoming-maintenance.
func (s *Server) ScheduleMaintenance(m Maintenance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled = &m
	s.setLocked(KeyUpcomingMaintenance, entry{status: http.StatusOK, body: m.JSON()})
}

// StartMaintenance is the host event beginning: maintenance-event turns TERMINATE_ON_HOST_MAINTENANCE (GPU and TPU
// VMs cannot migrate) and a scheduled maintenance turns ONGOING.
func (s *Server) StartMaintenance() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(KeyMaintenanceEvent, entry{status: http.StatusOK, body: EventTerminate})
	if s.scheduled != nil {
		s.scheduled.Status = "ONGOING"
		s.setLocked(KeyUpcomingMaintenance, entry{status: http.StatusOK, body: s.scheduled.JSON()})
	}
}

// FinishMaintenance ends the host event: maintenance-event back to NONE, nothing scheduled.
func (s *Server) FinishMaintenance() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled = nil
	s.setLocked(KeyMaintenanceEvent, entry{status: http.StatusOK, body: EventNone})
	s.clearUpcomingLocked()
}

// Preempt is a Spot VM's preemption notice: instance/preempted turns TRUE.
func (s *Server) Preempt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(KeyPreempted, entry{status: http.StatusOK, body: "TRUE"})
}

// Set makes key answer value (any text, also malformed values).
func (s *Server) Set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(key, entry{status: http.StatusOK, body: value})
}

// SetUnavailable makes key answer 503 with body until the next change.
func (s *Server) SetUnavailable(key, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(key, entry{status: http.StatusServiceUnavailable, body: body})
}

// Delete makes key undefined (404).
func (s *Server) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[key]; ok {
		delete(s.values, key)
		s.notifyLocked()
	}
}

// Fail makes the next n requests for key answer code with an error body, before any other handling.
func (s *Server) Fail(key string, code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultLocked(key)
	f.failures, f.failCode = n, code
}

// Delay holds every request for key for d before answering (0 ends it); a d longer than the client's timeout is a
// server that hangs.
func (s *Server) Delay(key string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultLocked(key).delay = d
}

// Waiting is the number of hanging GETs for key currently parked until a change.
func (s *Server) Waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[key]
}

// Requests is the number of requests for key the server has received, including rejected ones.
func (s *Server) Requests(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

// Close releases every parked and delayed request; the server answers nothing afterwards (503).
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// Serve serves on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		s.Close()
		srv.Close()
	})
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) faultLocked(key string) *fault {
	f, ok := s.faults[key]
	if !ok {
		f = &fault{}
		s.faults[key] = f
	}
	return f
}

func (s *Server) clearUpcomingLocked() {
	switch s.inst.NothingScheduled {
	case NothingScheduledNone:
		s.setLocked(KeyUpcomingMaintenance, entry{status: http.StatusOK, body: "NONE"})
	case NothingScheduledUnavailable:
		s.setLocked(KeyUpcomingMaintenance, entry{status: http.StatusServiceUnavailable, body: NoNotificationsBody})
	case NothingScheduledUnsupported:
		if _, ok := s.values[KeyUpcomingMaintenance]; ok {
			delete(s.values, KeyUpcomingMaintenance)
			s.notifyLocked()
		}
	default:
		s.setLocked(KeyUpcomingMaintenance, entry{status: http.StatusOK, body: "{}"})
	}
}

func (s *Server) setLocked(key string, e entry) {
	if old, ok := s.values[key]; ok && old == e {
		return
	}
	s.values[key] = e
	s.notifyLocked()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ServeHTTP answers /computeMetadata/v1/<key> requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	w.Header().Set("Server", "Metadata Server for VM")
	select {
	case <-s.closed:
		http.Error(w, "metadata server shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	if r.Header.Get("Metadata-Flavor") != "Google" || r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Missing required header: Metadata-Flavor: Google", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, pathPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	wait, err := boolParam(q.Get("wait_for_change"))
	if err != nil {
		http.Error(w, "wait_for_change: "+err.Error(), http.StatusBadRequest)
		return
	}
	var timeout time.Duration
	if v := q.Get("timeout_sec"); v != "" {
		sec, err := strconv.Atoi(v)
		if err != nil || sec <= 0 {
			http.Error(w, "timeout_sec must be a positive integer", http.StatusBadRequest)
			return
		}
		timeout = time.Duration(sec) * time.Second
	}

	delay, fail := s.admit(key)
	if delay > 0 && !s.sleep(r.Context(), delay) {
		return
	}
	if fail != 0 {
		http.Error(w, "injected failure", fail)
		return
	}

	e, found := s.answer(r.Context(), key, wait, q.Get("last_etag"), timeout)
	switch {
	case !found:
		http.NotFound(w, r)
	case e.status != http.StatusOK:
		http.Error(w, e.body, e.status)
	default:
		body := e.body
		w.Header().Set("ETag", e.etag())
		w.Header().Set("Content-Type", "application/text")
		if q.Get("alt") == "json" {
			w.Header().Set("Content-Type", "application/json")
			if !json.Valid([]byte(body)) || !strings.HasPrefix(strings.TrimSpace(body), "{") {
				b, _ := json.Marshal(body) // a string always marshals
				body = string(b)
			}
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(body))
		}
	}
}

// admit counts the request and returns its injected delay and failure status (0: none).
func (s *Server) admit(key string) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[key]++
	f, ok := s.faults[key]
	if !ok {
		return 0, 0
	}
	fail := 0
	if f.failures > 0 {
		f.failures--
		fail = f.failCode
	}
	return f.delay, fail
}

// sleep waits d; false when the client went away or the server closed first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closed:
	}
	return false
}

// answer returns key's entry, first waiting for a change when asked to: immediately when last_etag is given and
// differs from the current ETag, else when the value changes or timeout (0: none) expires, answering the current
// value then. Undefined keys and error answers (a 503 has no ETag to wait on) come at once, as on GCE.
func (s *Server) answer(ctx context.Context, key string, wait bool, lastETag string, timeout time.Duration) (entry, bool) {
	s.mu.Lock()
	e, found := s.values[key]
	if !wait || !found || e.status != http.StatusOK || (lastETag != "" && lastETag != e.etag()) {
		s.mu.Unlock()
		return e, found
	}
	s.waiting[key]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting[key]--
		s.mu.Unlock()
	}()

	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		s.mu.Lock()
		current, ok := s.values[key]
		changed := s.changed
		s.mu.Unlock()
		if !ok || current != e {
			return current, ok
		}
		select {
		case <-changed:
		case <-expired:
			return current, true
		case <-ctx.Done():
			return current, true
		case <-s.closed:
			return entry{status: http.StatusServiceUnavailable, body: "metadata server shutting down"}, true
		}
	}
}

func boolParam(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}
