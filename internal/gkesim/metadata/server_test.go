package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gcemetadata "cloud.google.com/go/compute/metadata"
)

var testInstance = Instance{
	Name:             "gke-a3-pool-1a2b",
	ID:               "4520031799277581759",
	Zone:             "us-central1-a",
	ProjectID:        "demo-project",
	NumericProjectID: "123456789012",
}

// start serves a simulator for inst on loopback and points the metadata library at it.
func start(t *testing.T, inst Instance) (*Server, *httptest.Server) {
	t.Helper()
	sim := New(inst)
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		ts.Close()
	})
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(ts.URL, "http://"))
	return sim, ts
}

func libraryClient() *gcemetadata.Client {
	return gcemetadata.NewWithOptions(&gcemetadata.Options{Client: &http.Client{Timeout: 30 * time.Second}})
}

type response struct {
	status int
	header http.Header
	body   string
	err    error
}

func fetch(ts *httptest.Server, path string, header map[string]string) response {
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		return response{err: err}
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		return response{err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(body), err: err}
}

func get(t *testing.T, ts *httptest.Server, path string, header map[string]string) response {
	t.Helper()
	res := fetch(ts, path, header)
	if res.err != nil {
		t.Fatalf("GET %s: %v", path, res.err)
	}
	return res
}

// getAsync issues a GET from another goroutine; the caller reads the answer with await.
func getAsync(ts *httptest.Server, path string) <-chan response {
	done := make(chan response, 1)
	go func() { done <- fetch(ts, path, flavor) }()
	return done
}

func await(t *testing.T, done <-chan response) response {
	t.Helper()
	res := <-done
	if res.err != nil {
		t.Fatalf("hanging GET: %v", res.err)
	}
	return res
}

var flavor = map[string]string{"Metadata-Flavor": "Google"}

// waitParked polls until n hanging GETs for key are parked on the server.
func waitParked(t *testing.T, sim *Server, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for sim.Waiting(key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("expected %d parked hanging GETs on %s, have %d", n, key, sim.Waiting(key))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFlavorHeaderRequiredAndEchoed(t *testing.T) {
	_, ts := start(t, testInstance)
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"missing", nil, http.StatusForbidden},
		{"wrong value", map[string]string{"Metadata-Flavor": "Amazon"}, http.StatusForbidden},
		{"forwarded", map[string]string{"Metadata-Flavor": "Google", "X-Forwarded-For": "10.0.0.1"}, http.StatusForbidden},
		{"present", flavor, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := get(t, ts, "/computeMetadata/v1/instance/id", tc.header)
			if res.status != tc.status {
				t.Errorf("status = %d, want %d (body %q)", res.status, tc.status, res.body)
			}
			if got := res.header.Get("Metadata-Flavor"); got != "Google" {
				t.Errorf("response Metadata-Flavor = %q, want Google", got)
			}
		})
	}
}

func TestLibraryHelpers(t *testing.T) {
	start(t, testInstance)
	ctx := context.Background()
	c := libraryClient()
	for _, tc := range []struct {
		name string
		get  func(context.Context) (string, error)
		want string
	}{
		{"hostname", c.HostnameWithContext, "gke-a3-pool-1a2b.us-central1-a.c.demo-project.internal"},
		{"instance id", c.InstanceIDWithContext, testInstance.ID},
		{"instance name", c.InstanceNameWithContext, testInstance.Name},
		{"zone", c.ZoneWithContext, "us-central1-a"},
		{"project id", c.ProjectIDWithContext, "demo-project"},
		{"numeric project id", c.NumericProjectIDWithContext, "123456789012"},
	} {
		got, err := tc.get(ctx)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	if !c.OnGCEWithContext(ctx) {
		t.Error("OnGCEWithContext = false with GCE_METADATA_HOST set")
	}
}

func TestUndefinedKeyIsNotDefinedError(t *testing.T) {
	sim, _ := start(t, testInstance)
	_, err := libraryClient().GetWithContext(context.Background(), "instance/attributes/nope")
	var nde gcemetadata.NotDefinedError
	if !errors.As(err, &nde) {
		t.Fatalf("undefined key: err = %v, want NotDefinedError", err)
	}
	sim.Delete(KeyPreempted)
	if _, err := libraryClient().GetWithContext(context.Background(), KeyPreempted); !errors.As(err, &nde) {
		t.Fatalf("deleted key: err = %v, want NotDefinedError", err)
	}
}

func TestScriptedMaintenanceThroughLibrary(t *testing.T) {
	sim, _ := start(t, testInstance)
	ctx := context.Background()
	c := libraryClient()
	read := func(key string) string {
		t.Helper()
		v, err := c.GetWithContext(ctx, key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return v
	}

	if got := read(KeyMaintenanceEvent); got != EventNone {
		t.Errorf("initial maintenance-event = %q, want NONE", got)
	}
	if got := read(KeyPreempted); got != "FALSE" {
		t.Errorf("initial preempted = %q, want FALSE", got)
	}
	if got := read(KeyUpcomingMaintenance); got != "{}" {
		t.Errorf("initial upcoming-maintenance = %q, want {}", got)
	}

	start := time.Date(2025, 3, 4, 1, 0, 0, 0, time.UTC)
	sim.ScheduleMaintenance(Maintenance{
		CanReschedule:     true,
		WindowStart:       start,
		WindowEnd:         start.Add(2 * time.Hour),
		LatestWindowStart: start.Add(24 * time.Hour),
		Reasons:           []string{"PLANNED_UPDATE"},
	})
	var doc map[string]any
	if err := json.Unmarshal([]byte(read(KeyUpcomingMaintenance)), &doc); err != nil {
		t.Fatalf("scheduled upcoming-maintenance is not JSON: %v", err)
	}
	want := map[string]any{
		"type":                     "SCHEDULED",
		"maintenance_status":       "PENDING",
		"can_reschedule":           "true",
		"window_start_time":        "2025-03-04T01:00:00Z",
		"window_end_time":          "2025-03-04T03:00:00Z",
		"latest_window_start_time": "2025-03-05T01:00:00Z",
		"maintenance_reasons":      []any{"PLANNED_UPDATE"},
	}
	assertJSON(t, "scheduled", doc, want)

	sim.StartMaintenance()
	if got := read(KeyMaintenanceEvent); got != EventTerminate {
		t.Errorf("started maintenance-event = %q, want %s", got, EventTerminate)
	}
	doc = nil
	if err := json.Unmarshal([]byte(read(KeyUpcomingMaintenance)), &doc); err != nil {
		t.Fatal(err)
	}
	want["maintenance_status"] = "ONGOING"
	assertJSON(t, "started", doc, want)

	sim.FinishMaintenance()
	if got := read(KeyMaintenanceEvent); got != EventNone {
		t.Errorf("finished maintenance-event = %q, want NONE", got)
	}
	if got := read(KeyUpcomingMaintenance); got != "{}" {
		t.Errorf("finished upcoming-maintenance = %q, want {}", got)
	}

	sim.Preempt()
	if got := read(KeyPreempted); got != "TRUE" {
		t.Errorf("preempted after Preempt = %q, want TRUE", got)
	}
	sim.Reset()
	if got := read(KeyPreempted); got != "FALSE" {
		t.Errorf("preempted after Reset = %q, want FALSE", got)
	}
}

func assertJSON(t *testing.T, step string, got, want map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: upcoming-maintenance = %s, want %s", step, g, w)
	}
}

func TestNothingScheduledStyles(t *testing.T) {
	for _, tc := range []struct {
		style  NothingScheduled
		status int
		body   string
	}{
		{NothingScheduledEmptyObject, http.StatusOK, "{}"},
		{NothingScheduledNone, http.StatusOK, "NONE"},
		{NothingScheduledUnavailable, http.StatusServiceUnavailable, NoNotificationsBody + "\n"},
		{NothingScheduledUnsupported, http.StatusNotFound, "404 page not found\n"},
	} {
		inst := testInstance
		inst.NothingScheduled = tc.style
		sim, ts := start(t, inst)
		res := get(t, ts, "/computeMetadata/v1/"+KeyUpcomingMaintenance, flavor)
		if res.status != tc.status || res.body != tc.body {
			t.Errorf("style %d: got %d %q, want %d %q", tc.style, res.status, res.body, tc.status, tc.body)
		}
		sim.ScheduleMaintenance(Maintenance{})
		if res := get(t, ts, "/computeMetadata/v1/"+KeyUpcomingMaintenance, flavor); res.status != http.StatusOK {
			t.Errorf("style %d: scheduled status = %d, want 200", tc.style, res.status)
		}
	}
}

func TestETagFollowsValue(t *testing.T) {
	sim, ts := start(t, testInstance)
	etag := func() string {
		res := get(t, ts, "/computeMetadata/v1/"+KeyMaintenanceEvent, flavor)
		if res.header.Get("ETag") == "" {
			t.Fatal("200 answer without ETag")
		}
		return res.header.Get("ETag")
	}
	none := etag()
	if again := etag(); again != none {
		t.Errorf("ETag changed without a change: %q then %q", none, again)
	}
	sim.StartMaintenance()
	terminate := etag()
	if terminate == none {
		t.Errorf("ETag %q unchanged after the value changed", terminate)
	}
	sim.FinishMaintenance()
	if back := etag(); back != none {
		t.Errorf("ETag of NONE again = %q, want %q", back, none)
	}
}

func TestHangingGet(t *testing.T) {
	sim, ts := start(t, testInstance)
	path := "/computeMetadata/v1/" + KeyMaintenanceEvent
	first := get(t, ts, path, flavor)
	etag := first.header.Get("ETag")

	t.Run("stale last_etag answers at once", func(t *testing.T) {
		res := get(t, ts, path+"?wait_for_change=true&last_etag=stale", flavor)
		if res.status != http.StatusOK || res.body != EventNone {
			t.Errorf("got %d %q, want 200 NONE", res.status, res.body)
		}
	})

	t.Run("current last_etag waits for the change", func(t *testing.T) {
		done := getAsync(ts, path+"?wait_for_change=true&last_etag="+etag)
		waitParked(t, sim, KeyMaintenanceEvent, 1)
		sim.StartMaintenance()
		res := await(t, done)
		if res.body != EventTerminate || res.header.Get("ETag") == etag {
			t.Errorf("got %q (ETag %q), want %s with a new ETag", res.body, res.header.Get("ETag"), EventTerminate)
		}
		sim.FinishMaintenance()
	})

	t.Run("without last_etag waits for the next change", func(t *testing.T) {
		done := getAsync(ts, path+"?wait_for_change=true")
		waitParked(t, sim, KeyMaintenanceEvent, 1)
		sim.Set(KeyMaintenanceEvent, EventMigrate)
		if res := await(t, done); res.body != EventMigrate {
			t.Errorf("got %q, want %s", res.body, EventMigrate)
		}
		sim.Set(KeyMaintenanceEvent, EventNone)
	})

	t.Run("timeout_sec answers the current value", func(t *testing.T) {
		res := get(t, ts, path+"?wait_for_change=true&timeout_sec=1&last_etag="+etag, flavor)
		if res.status != http.StatusOK || res.body != EventNone || res.header.Get("ETag") != etag {
			t.Errorf("got %d %q ETag %q, want 200 NONE ETag %q", res.status, res.body, res.header.Get("ETag"), etag)
		}
	})

	t.Run("503 answers at once, without waiting", func(t *testing.T) {
		sim.SetUnavailable(KeyUpcomingMaintenance, NoNotificationsBody)
		res := get(t, ts, "/computeMetadata/v1/"+KeyUpcomingMaintenance+"?wait_for_change=true", flavor)
		if res.status != http.StatusServiceUnavailable || res.header.Get("ETag") != "" {
			t.Errorf("got %d %q (ETag %q), want an immediate 503 without an ETag", res.status, res.body, res.header.Get("ETag"))
		}
		if n := sim.Waiting(KeyUpcomingMaintenance); n != 0 {
			t.Errorf("%d requests parked on a 503 value", n)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, q := range []string{"?wait_for_change=maybe", "?wait_for_change=true&timeout_sec=-1", "?timeout_sec=x"} {
			if res := get(t, ts, path+q, flavor); res.status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", q, res.status)
			}
		}
	})
}

func TestLibrarySubscribeSeesChanges(t *testing.T) {
	sim, _ := start(t, testInstance)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan string)
	errc := make(chan error, 1)
	go func() {
		errc <- libraryClient().SubscribeWithContext(ctx, KeyMaintenanceEvent, func(ctx context.Context, v string, ok bool) error {
			select {
			case seen <- v:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	if v := <-seen; v != EventNone {
		t.Fatalf("first value = %q, want NONE", v)
	}
	waitParked(t, sim, KeyMaintenanceEvent, 1)
	sim.StartMaintenance()
	if v := <-seen; v != EventTerminate {
		t.Fatalf("after StartMaintenance = %q, want %s", v, EventTerminate)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe returned %v, want context.Canceled", err)
	}
}

func TestAltJSON(t *testing.T) {
	sim, ts := start(t, testInstance)
	if res := get(t, ts, "/computeMetadata/v1/"+KeyMaintenanceEvent+"?alt=json", flavor); res.body != `"NONE"` {
		t.Errorf("string value as JSON = %q, want %q", res.body, `"NONE"`)
	}
	sim.ScheduleMaintenance(Maintenance{})
	res := get(t, ts, "/computeMetadata/v1/"+KeyUpcomingMaintenance+"?alt=json", flavor)
	if !strings.HasPrefix(res.body, "{") || res.header.Get("Content-Type") != "application/json" {
		t.Errorf("JSON value as JSON = %q (%s), want the object itself", res.body, res.header.Get("Content-Type"))
	}
}

func TestInjectedFailuresAndDelays(t *testing.T) {
	sim, ts := start(t, testInstance)
	ctx := context.Background()

	sim.Fail(KeyMaintenanceEvent, http.StatusServiceUnavailable, 2)
	v, err := libraryClient().GetWithContext(ctx, KeyMaintenanceEvent)
	if err != nil || v != EventNone {
		t.Fatalf("library after two 503s: %q, %v; want NONE (it retries 5xx)", v, err)
	}
	if n := sim.Requests(KeyMaintenanceEvent); n != 3 {
		t.Errorf("requests = %d, want 3 (two failures, one answer)", n)
	}

	sim.Fail(KeyPreempted, http.StatusInternalServerError, 1)
	if res := get(t, ts, "/computeMetadata/v1/"+KeyPreempted, flavor); res.status != http.StatusInternalServerError {
		t.Errorf("injected 500: status %d", res.status)
	}

	sim.Delay(KeyPreempted, time.Hour)
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	_, err = gcemetadata.NewWithOptions(&gcemetadata.Options{Client: hc}).GetWithContext(ctx, KeyPreempted)
	if err == nil {
		t.Fatal("a server that hangs for an hour answered within the client timeout")
	}
	sim.Delay(KeyPreempted, 0)
	if v, err := libraryClient().GetWithContext(ctx, KeyPreempted); err != nil || v != "FALSE" {
		t.Errorf("after the delay ended: %q, %v", v, err)
	}
}

func TestServersAreIndependent(t *testing.T) {
	a := New(Instance{Name: "node-a", ID: "1", Zone: "us-central1-a", ProjectID: "p", NumericProjectID: "9"})
	b := New(Instance{Name: "node-b", ID: "2", Zone: "us-central1-b", ProjectID: "p", NumericProjectID: "9"})
	ta, tb := httptest.NewServer(a), httptest.NewServer(b)
	defer ta.Close()
	defer tb.Close()
	a.Preempt()
	if res := get(t, ta, "/computeMetadata/v1/"+KeyPreempted, flavor); res.body != "TRUE" {
		t.Errorf("node-a preempted = %q, want TRUE", res.body)
	}
	if res := get(t, tb, "/computeMetadata/v1/"+KeyPreempted, flavor); res.body != "FALSE" {
		t.Errorf("node-b preempted = %q, want FALSE", res.body)
	}
	if res := get(t, tb, "/computeMetadata/v1/"+KeyName, flavor); res.body != "node-b" {
		t.Errorf("node-b name = %q", res.body)
	}
}

func TestCloseReleasesParkedRequests(t *testing.T) {
	sim, ts := start(t, testInstance)
	done := getAsync(ts, "/computeMetadata/v1/"+KeyPreempted+"?wait_for_change=true")
	waitParked(t, sim, KeyPreempted, 1)
	sim.Close()
	if res := await(t, done); res.status != http.StatusServiceUnavailable {
		t.Errorf("parked request after Close: %d %q, want 503", res.status, res.body)
	}
}

func TestClusterAttributes(t *testing.T) {
	inst := testInstance
	inst.ClusterName, inst.ClusterLocation = "train", "us-central1"
	_, ts := start(t, inst)
	for key, want := range map[string]string{KeyClusterName: "train", KeyClusterLocation: "us-central1"} {
		if res := get(t, ts, "/computeMetadata/v1/"+key, flavor); res.status != http.StatusOK || res.body != want {
			t.Errorf("%s: %d %q, want 200 %q", key, res.status, res.body, want)
		}
	}
	_, ts = start(t, testInstance)
	if res := get(t, ts, "/computeMetadata/v1/"+KeyClusterName, flavor); res.status != http.StatusNotFound {
		t.Errorf("cluster-name of a VM outside GKE: %d %q, want 404", res.status, res.body)
	}
}
