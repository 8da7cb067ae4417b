package testenv

import (
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

// StartPrometheus runs the pinned Prometheus on loopback with config (prometheus.yml) until the test ends and
// returns its URL. The test fails at once if Prometheus refuses the configuration.
func StartPrometheus(t testing.TB, config string) string {
	t.Helper()
	dir, addr := configDir(t, "prometheus.yml", config)
	return startTool(t, "prometheus", addr,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
}

// configDir writes config as name into a temporary directory and picks a free loopback address.
func configDir(t testing.TB, name, config string) (dir, addr string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	return dir, addr
}

// startTool runs the pinned tool name with args until the test ends, waits until addr answers /-/ready and returns
// its URL; its log is shown when the test fails.
func startTool(t testing.TB, name, addr string, args ...string) string {
	t.Helper()
	logs := &SyncBuffer{}
	cmd := exec.Command(Binary(t, name), args...)
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
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})

	url := "http://" + addr
	Eventually(t, 30*time.Second, name+" loading its configuration and becoming ready", func() error {
		select {
		case <-exited:
			t.Fatalf("%s exited: the configuration does not load:\n%s", name, logs.String())
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
