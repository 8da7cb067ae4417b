package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// process is a component running as its own program, logging to a file.
type process struct {
	*localenv.Process
	name    string
	logPath string
}

// startProcess starts bin with args and env (added to the environment), its output going to logDir/name.log.
func startProcess(name, logDir, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	started, err := localenv.StartProcess(cmd)
	// The child holds its own descriptor of the log.
	logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &process{Process: started, name: name, logPath: logPath}, nil
}

// logTail is the end of the process's log, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	return string(b[len(b)-min(len(b), 2000):])
}

// waitReady polls url until it answers 200, failing early when the process exits. auth, when set, is the basic auth
// user and password the endpoint requires.
func (p *process) waitReady(ctx context.Context, url string, auth *basicAuth, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if auth != nil {
			req.SetBasicAuth(auth.Username, auth.Password)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited while starting (%v); log %s:\n%s", p.name, p.Err(), p.logPath, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v; log %s:\n%s", p.name, url, timeout, p.logPath, p.logTail())
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), fmt.Errorf("waiting for %s", p.name))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
