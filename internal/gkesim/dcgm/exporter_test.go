package dcgm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the exporter as Prometheus does and parses the exposition with Prometheus' own parser.
func scrape(t *testing.T, e *Exporter) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, resp.StatusCode
	}
	if got := expfmt.ResponseFormat(resp.Header); got.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("content type %q is not the text exposition format", resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return families, resp.StatusCode
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series finds the metric of family name for GPU gpu whose labels include want.
func series(t *testing.T, families map[string]*dto.MetricFamily, name string, gpu string, want map[string]string) *dto.Metric {
	t.Helper()
	mf := families[name]
	if mf == nil {
		t.Fatalf("no %s", name)
	}
	if mf.GetType() != dto.MetricType_GAUGE {
		t.Errorf("%s is a %s, dcgm-exporter exports a gauge", name, mf.GetType())
	}
	for _, m := range mf.GetMetric() {
		l := labels(m)
		if l["gpu"] != gpu {
			continue
		}
		match := true
		for k, v := range want {
			if l[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	t.Fatalf("no %s for GPU %s with labels %v: %v", name, gpu, want, mf.GetMetric())
	return nil
}

func TestExporterExpositionAndStickyXid(t *testing.T) {
	e := New("gke-c-a4-0", "NVIDIA B200", 8, time.Minute)
	families, code := scrape(t, e)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if n := len(families["DCGM_FI_DEV_XID_ERRORS"].GetMetric()); n != 8 {
		t.Errorf("%d Xid series, want one per GPU", n)
	}
	first := series(t, families, "DCGM_FI_DEV_XID_ERRORS", "3", map[string]string{"err_code": "0", "err_msg": "No Error"})
	l := labels(first)
	for _, k := range []string{"UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"} {
		if l[k] == "" {
			t.Errorf("label %s missing: %v", k, l)
		}
	}
	if l["Hostname"] != "gke-c-a4-0" || l["device"] != "nvidia3" || l["modelName"] != "NVIDIA B200" || !strings.HasPrefix(l["UUID"], "GPU-") {
		t.Errorf("identity labels %v", l)
	}
	series(t, families, "DCGM_EXP_XID_ERRORS_COUNT", "3", map[string]string{"window_size_in_ms": "60000"})
	series(t, families, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "3", nil)

	e.LogXid(3, 79)
	e.FailRowRemap(3)
	e.LogXid(3, 154)
	e.LogXid(3, 154)
	families, _ = scrape(t, e)
	if v := series(t, families, "DCGM_FI_DEV_XID_ERRORS", "3", map[string]string{"err_code": "154", "err_msg": "GPU Recovery Action Changed"}).GetGauge().GetValue(); v != 154 {
		t.Errorf("last Xid %v, want 154", v)
	}
	for xid, want := range map[string]float64{"79": 1, "154": 2} {
		if v := series(t, families, "DCGM_EXP_XID_ERRORS_COUNT", "3", map[string]string{"xid": xid}).GetGauge().GetValue(); v != want {
			t.Errorf("count of Xid %s: %v, want %v", xid, v, want)
		}
	}
	if v := series(t, families, "DCGM_FI_DEV_XID_ERRORS", "2", map[string]string{"err_code": "0"}).GetGauge().GetValue(); v != 0 {
		t.Errorf("another GPU shows Xid %v", v)
	}
	for gpu, want := range map[string]float64{"3": 1, "2": 0} {
		if v := series(t, families, "DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu, nil).GetGauge().GetValue(); v != want {
			t.Errorf("GPU %s: row remap failure %v, want %v", gpu, v, want)
		}
	}

	// The window passes: the count goes back to its zero series, the last Xid stays.
	e.mu.Lock()
	e.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	e.mu.Unlock()
	families, _ = scrape(t, e)
	if v := series(t, families, "DCGM_FI_DEV_XID_ERRORS", "3", map[string]string{"err_code": "154"}).GetGauge().GetValue(); v != 154 {
		t.Errorf("last Xid after the window %v, want it sticky at 154", v)
	}
	for _, m := range families["DCGM_EXP_XID_ERRORS_COUNT"].GetMetric() {
		if l := labels(m); l["gpu"] == "3" && (l["xid"] != "" || m.GetGauge().GetValue() != 0) {
			t.Errorf("count after its window: %v = %v", l, m.GetGauge().GetValue())
		}
	}

	// The node goes down with its pod, then boots: the new pod has forgotten the Xid.
	e.Stop()
	if _, code := scrape(t, e); code != http.StatusServiceUnavailable {
		t.Errorf("scrape of a stopped exporter: %d, want 503", code)
	}
	e.LogXid(3, 48) // nothing runs to see it
	e.Restart()
	families, _ = scrape(t, e)
	if v := series(t, families, "DCGM_FI_DEV_XID_ERRORS", "3", map[string]string{"err_code": "0"}).GetGauge().GetValue(); v != 0 {
		t.Errorf("last Xid after a restart %v, want 0", v)
	}
	if v := series(t, families, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "3", nil).GetGauge().GetValue(); v != 0 {
		t.Errorf("row remap failure after a restart %v, want 0", v)
	}
}

func TestExporterServesOnlyMetrics(t *testing.T) {
	srv := httptest.NewServer(New("n", "NVIDIA L4", 1, 0))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / answered %d, want 404", resp.StatusCode)
	}
}
