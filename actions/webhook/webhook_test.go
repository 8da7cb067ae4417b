package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

type recordingSink struct {
	mu       sync.Mutex
	triggers []Trigger
	err      error
}

func (s *recordingSink) Submit(_ context.Context, triggers []Trigger) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.triggers = append(s.triggers, triggers...)
	return nil
}

func newTestHandler(t *testing.T, sink Sink, maxBytes int64) (*Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := NewHandler(promslog.NewNopLogger(), sink, maxBytes, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return h, reg
}

func post(h http.Handler, contentType string, body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, Path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandlerAcceptsAlertmanagerPayload(t *testing.T) {
	sink := &recordingSink{}
	h, reg := newTestHandler(t, sink, DefaultMaxRequestBytes)
	rec := post(h, "application/json; charset=utf-8", bytes.NewReader(testdata(t, "alertmanager.json")))
	if rec.Code != http.StatusOK {
		t.Fatalf("code %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("reply Content-Type %q", ct)
	}
	var results []Result
	if err := json.Unmarshal(rec.Body.Bytes(), &results); err != nil {
		t.Fatalf("reply is not a JSON list of decisions: %v\n%s", err, rec.Body)
	}
	want := []Result{
		{Fingerprint: "a1", Alertname: "GKENodeMaintenanceWindowApproaching", Node: "gpu-node-1", Action: "perform-maintenance", Decision: Accepted},
		{Fingerprint: "a2", Alertname: "GKENodeMaintenanceNotReschedulable", Node: "gpu-node-2", Action: "drain", Decision: Accepted},
		{Fingerprint: "a3", Alertname: "GKENodeMaintenanceScheduled", Node: "gpu-node-3", Decision: Skipped, Reason: "no gke_disruption_action label"},
		{Fingerprint: "a4", Alertname: "GKENodeMaintenanceNotReschedulable", Node: "gpu-node-4", Action: "drain", Decision: Skipped, Reason: "alert is resolved; work not yet started for it is withdrawn"},
	}
	if len(results) != len(want) {
		t.Fatalf("results %+v, want %+v", results, want)
	}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("result %d: %+v, want %+v", i, results[i], want[i])
		}
	}
	startsAt := time.Date(2025, 6, 7, 10, 0, 0, 0, time.UTC)
	wantTriggers := []Trigger{
		{Node: "gpu-node-1", Action: nodeview.PerformMaintenance, Firing: true, CanReschedule: true, StartsAt: startsAt, Fingerprint: "a1"},
		{Node: "gpu-node-2", Action: nodeview.Drain, Firing: true, StartsAt: startsAt, Fingerprint: "a2"},
		{Node: "gpu-node-4", Action: nodeview.Drain, Firing: false, StartsAt: startsAt, Fingerprint: "a4"},
	}
	if len(sink.triggers) != len(wantTriggers) {
		t.Fatalf("triggers %+v, want %+v", sink.triggers, wantTriggers)
	}
	for i := range wantTriggers {
		if got := sink.triggers[i]; got.Node != wantTriggers[i].Node || got.Action != wantTriggers[i].Action || got.Firing != wantTriggers[i].Firing ||
			got.CanReschedule != wantTriggers[i].CanReschedule || !got.StartsAt.Equal(wantTriggers[i].StartsAt) || got.Fingerprint != wantTriggers[i].Fingerprint {
			t.Errorf("trigger %d: %+v, want %+v", i, got, wantTriggers[i])
		}
	}
	if got := testutil.ToFloat64(h.requests.WithLabelValues("200")); got != 1 {
		t.Errorf("webhook_requests_total{code=200} = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "gke_disruption_webhook_requests_total"); err != nil || n < 6 {
		t.Errorf("status codes should be pre-initialised: %d series, %v", n, err)
	}
}

func TestHandlerRefusals(t *testing.T) {
	valid := testdata(t, "alertmanager.json")
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        io.Reader
		maxBytes    int64
		sinkErr     error
		user        string
		want        int
		wantText    string
	}{
		{name: "another web-config user", contentType: "application/json", body: bytes.NewReader(valid), user: "prometheus", want: 403, wantText: `"prometheus"`},
		{name: "not JSON", contentType: "application/json", body: strings.NewReader("{"), want: 400, wantText: "not an Alertmanager webhook payload"},
		{name: "JSON but not an object", contentType: "application/json", body: strings.NewReader(`["x"]`), want: 400},
		{name: "trailing data", contentType: "application/json", body: strings.NewReader(`{"version":"4","alerts":[]} {}`), want: 400},
		{name: "wrong version", contentType: "application/json", body: strings.NewReader(`{"version":"3","alerts":[]}`), want: 400, wantText: `version "3"`},
		{name: "no version", contentType: "application/json", body: strings.NewReader(`{"alerts":[]}`), want: 400, wantText: "version"},
		{name: "labels of the wrong type", contentType: "application/json", body: strings.NewReader(`{"version":"4","alerts":[{"labels":{"node":1}}]}`), want: 400},
		{name: "empty body", contentType: "application/json", body: strings.NewReader(""), want: 400},
		{name: "text/plain", contentType: "text/plain", body: bytes.NewReader(valid), want: 415},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: bytes.NewReader(valid), want: 415},
		{name: "no content type", body: bytes.NewReader(valid), want: 415},
		{name: "bad content type", contentType: "application/json; =", body: bytes.NewReader(valid), want: 415},
		{name: "too large by Content-Length", contentType: "application/json", body: bytes.NewReader(valid), maxBytes: 100, want: 413},
		{name: "too large without Content-Length", contentType: "application/json", body: io.MultiReader(bytes.NewReader(valid)), maxBytes: 100, want: 413},
		{name: "GET", method: http.MethodGet, contentType: "application/json", want: 405},
		{name: "follower", contentType: "application/json", body: bytes.NewReader(valid), sinkErr: ErrNotLeader, want: 503},
		{name: "sink failure", contentType: "application/json", body: bytes.NewReader(valid), sinkErr: errors.New("boom"), want: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{err: tc.sinkErr}
			maxBytes := tc.maxBytes
			if maxBytes == 0 {
				maxBytes = DefaultMaxRequestBytes
			}
			h, _ := newTestHandler(t, sink, maxBytes)
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, Path, tc.body)
			if _, chunked := tc.body.(*bytes.Reader); !chunked && tc.body != nil {
				req.ContentLength = -1
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.user != "" {
				req.SetBasicAuth(tc.user, "secret")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if close := rec.Header().Get("Connection") == "close"; close != (tc.want == http.StatusServiceUnavailable) {
				t.Errorf("Connection: close is %v on a %d; the follower's 503 alone must close the connection", close, tc.want)
			}
			if rec.Code != tc.want {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tc.wantText) {
				t.Errorf("body %q does not mention %q", rec.Body, tc.wantText)
			}
			if len(sink.triggers) != 0 {
				t.Errorf("refused request passed on triggers %+v", sink.triggers)
			}
			if got := testutil.ToFloat64(h.requests.WithLabelValues(rec.Result().Status[:3])); got != 1 {
				t.Errorf("webhook_requests_total{code=%d} = %v", tc.want, got)
			}
		})
	}
}

func TestHandlerAllowsNamedUsers(t *testing.T) {
	sink := &recordingSink{}
	reg := prometheus.NewRegistry()
	h, err := NewHandler(promslog.NewNopLogger(), sink, DefaultMaxRequestBytes, []string{"alertmanager", "am-2"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alertmanager", "am-2", ""} {
		req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(testdata(t, "alertmanager.json")))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, "secret")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("user %q: code %d: %s", user, rec.Code, rec.Body)
		}
	}
}

func TestHandlerNothingToDoOnFollowerIsOK(t *testing.T) {
	h, _ := newTestHandler(t, &recordingSink{err: ErrNotLeader}, DefaultMaxRequestBytes)
	rec := post(h, "application/json", strings.NewReader(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"GKENodeMaintenanceScheduled","node":"n1"}}]}`))
	if rec.Code != http.StatusOK {
		t.Errorf("an alert asking for nothing needs no leader: code %d", rec.Code)
	}
}

func TestClassify(t *testing.T) {
	startsAt := time.Date(2025, 6, 7, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		status   string
		labels   template.KV
		pass     bool
		decision string
		reason   string
	}{
		{"firing drain", "firing", template.KV{"gke_disruption_action": "drain", "node": "n1"}, true, Accepted, ""},
		{"firing perform-maintenance", "firing", template.KV{"gke_disruption_action": "perform-maintenance", "node": "n1", "can_reschedule": "true"}, true, Accepted, ""},
		{"resolved", "resolved", template.KV{"gke_disruption_action": "drain", "node": "n1"}, true, Skipped, "resolved"},
		{"no action", "firing", template.KV{"node": "n1"}, false, Skipped, "no gke_disruption_action label"},
		{"empty action", "firing", template.KV{"gke_disruption_action": "", "node": "n1"}, false, Skipped, "is not an action"},
		{"unknown action", "firing", template.KV{"gke_disruption_action": "reboot", "node": "n1"}, false, Skipped, `"reboot" is not an action`},
		{"no node", "firing", template.KV{"gke_disruption_action": "drain"}, false, Skipped, "no node label"},
		{"node not a name", "firing", template.KV{"gke_disruption_action": "drain", "node": "../etc/passwd"}, false, Skipped, "not a node name"},
		{"report-faulty-host", "firing", template.KV{"gke_disruption_action": "report-faulty-host", "node": "n1", "fault_behavior": "XID"}, true, Accepted, ""},
		{"report-faulty-host unspecified", "firing", template.KV{"gke_disruption_action": "report-faulty-host", "node": "n1"}, true, Accepted, ""},
		{"report-faulty-host unknown behavior", "firing", template.KV{"gke_disruption_action": "report-faulty-host", "node": "n1", "fault_behavior": "ECC"}, false, Skipped, `fault_behavior "ECC" is not a fault behavior`},
		{"GPU fault with its Xid", "firing", template.KV{"gke_disruption_action": "report-faulty-host", "node": "n1", "fault_behavior": "XID", "xid": "079"}, true, Accepted, ""},
		{"Xid not a number", "firing", template.KV{"gke_disruption_action": "drain", "node": "n1", "xid": "79a"}, false, Skipped, `xid "79a" is not an Xid`},
		{"unknown status", "pending", template.KV{"gke_disruption_action": "drain", "node": "n1"}, false, Skipped, `"pending"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trigger, pass, res := Classify(template.Alert{Status: tc.status, Labels: tc.labels, StartsAt: startsAt, Fingerprint: "f"})
			if pass != tc.pass || res.Decision != tc.decision || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("pass %v, result %+v; want pass %v, %s with reason containing %q", pass, res, tc.pass, tc.decision, tc.reason)
			}
			if pass && (trigger.Node != "n1" || !trigger.StartsAt.Equal(startsAt) || trigger.Firing != (tc.status == "firing")) {
				t.Errorf("trigger %+v", trigger)
			}
			if want := map[string]gke.FaultBehavior{"XID": gke.FaultXID, "": gke.FaultUnspecified}[tc.labels["fault_behavior"]]; pass &&
				trigger.Action == nodeview.ReportFaultyHost && trigger.FaultBehavior != want {
				t.Errorf("fault_behavior read as %q, want %q", trigger.FaultBehavior, want)
			}
			if want := map[string]string{"079": "79"}[tc.labels["xid"]]; pass && trigger.Xid != want {
				t.Errorf("xid read as %q, want %q", trigger.Xid, want)
			}
			if pass && trigger.CanReschedule != (tc.labels["can_reschedule"] == "true") {
				t.Errorf("can_reschedule read as %v", trigger.CanReschedule)
			}
		})
	}
}

func TestHandlerRefusesAnotherClustersAlerts(t *testing.T) {
	const body = `{"version":"4","status":"firing","alerts":[
		{"status":"firing","labels":{"alertname":"GKENodeMaintenanceNotReschedulable","gke_disruption_action":"drain","node":"n1","cluster":"%s"}}]}`
	for _, tc := range []struct {
		name, own, alert string
		want             int
	}{
		{"another cluster", "prod-a", "prod-b", http.StatusBadRequest},
		{"own cluster", "prod-a", "prod-a", http.StatusOK},
		{"own cluster unknown", "", "prod-b", http.StatusOK},
		{"alert without cluster", "prod-a", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{}
			h, _ := newTestHandler(t, sink, DefaultMaxRequestBytes)
			h.SetCluster(tc.own)
			rec := post(h, "application/json", strings.NewReader(fmt.Sprintf(body, tc.alert)))
			if rec.Code != tc.want {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if got := testutil.ToFloat64(h.requests.WithLabelValues(strconv.Itoa(tc.want))); got != 1 {
				t.Errorf("webhook_requests_total{code=%d} = %v", tc.want, got)
			}
			if tc.want != http.StatusBadRequest {
				return
			}
			if !strings.Contains(rec.Body.String(), `cluster "prod-b"`) || !strings.Contains(rec.Body.String(), `"prod-a"`) {
				t.Errorf("reply %q does not give the reason", rec.Body)
			}
			if len(sink.triggers) != 0 {
				t.Errorf("another cluster's alert became work: %+v", sink.triggers)
			}
		})
	}
}
