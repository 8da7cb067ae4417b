package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// StartAlertmanager runs the pinned Alertmanager on loopback with config until the test ends and returns its URL.
// The test fails at once if Alertmanager refuses the configuration.
func StartAlertmanager(t testing.TB, config string) string {
	t.Helper()
	dir, addr := configDir(t, "alertmanager.yml", config)
	return startTool(t, "alertmanager", addr,
		"--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--cluster.listen-address=", // no gossip: a single instance
	)
}

// PostAlerts fires alerts through Alertmanager's API as Prometheus would; endsAt zero leaves them firing, a time in
// the past resolves them.
func PostAlerts(t testing.TB, amURL string, endsAt time.Time, alerts ...map[string]string) {
	t.Helper()
	type alert struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt,omitzero"`
	}
	var body []alert
	for _, l := range alerts {
		start := time.Now()
		if !endsAt.IsZero() && endsAt.Before(start) {
			start = endsAt.Add(-time.Minute)
		}
		body = append(body, alert{Labels: l, StartsAt: start, EndsAt: endsAt})
	}
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, amURL+"/api/v2/alerts", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting alerts: %s", resp.Status)
	}
}
