package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// StartAlertmanager runs the pinned Alertmanager on loopback with config until the test ends and returns its URL.
// The test fails at once if Alertmanager refuses the configuration.
func StartAlertmanager(t testing.TB, config string) string {
	t.Helper()
	bin := Binary(t, "alertmanager")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	logs := &SyncBuffer{}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--cluster.listen-address=", // no gossip: a single instance
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("alertmanager log:\n%s", logs.String())
		}
	})

	url := "http://" + addr
	Eventually(t, 30*time.Second, "Alertmanager loading its configuration and becoming ready", func() error {
		select {
		case <-exited:
			t.Fatalf("alertmanager exited: the configuration does not load:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
	return url
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
