package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
)

// TestReportFaultyExitCodes runs report-faulty as a process: a bad behavior or an unreachable service is exit 2 and
// one line; a request the service does not take is exit 1 with its reason; one it takes is exit 0. The service's
// side is played with the webhook's own decoder and classifier.
func TestReportFaultyExitCodes(t *testing.T) {
	if code, _, stderr := runMain(t, "report-faulty", "gpu-1", "--behavior=ECC"); code != 2 {
		t.Errorf("bad behavior: exit %d, %q", code, stderr)
	} else {
		oneLine(t, stderr, "report-faulty", `--behavior "ECC"`)
	}
	if code, _, stderr := runMain(t, "report-faulty", "gpu-1", "--actions.url=http://"+freeAddress(t)); code != 2 {
		t.Errorf("unreachable: exit %d, %q", code, stderr)
	} else {
		oneLine(t, stderr, "report-faulty", "cannot reach the actions service")
	}

	var mu sync.Mutex
	var seen []webhook.Trigger
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg, err := webhook.Decode(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var results []webhook.Result
		for _, a := range msg.Alerts {
			trigger, _, res := webhook.Classify(a)
			mu.Lock()
			seen = append(seen, trigger)
			mu.Unlock()
			if trigger.Node == "refused" {
				res.Decision, res.Reason = webhook.Skipped, "not here"
			}
			results = append(results, res)
		}
		_ = json.NewEncoder(w).Encode(results)
	}))
	defer service.Close()
	if code, _, stderr := runMain(t, "report-faulty", "refused", "--actions.url="+service.URL); code != 1 {
		t.Errorf("not taken: exit %d, %q", code, stderr)
	} else {
		oneLine(t, stderr, "report-faulty", "request not taken: not here")
	}
	code, stdout, stderr := runMain(t, "report-faulty", "gpu-1", "--behavior=xid", "--actions.url="+service.URL)
	if code != 0 || !strings.Contains(stdout, "report-faulty-host gpu-1 (XID) requested") {
		t.Errorf("taken: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1].Node != "gpu-1" || seen[1].Action != "report-faulty-host" || seen[1].FaultBehavior != "XID" || !seen[1].Firing || seen[1].StartsAt.IsZero() {
		t.Errorf("the service got %+v", seen)
	}
}
