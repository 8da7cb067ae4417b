package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// process is a component running as its own program, logging to a file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
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
	cmd.SysProcAttr = localenv.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited tells whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM, then SIGKILL after 5 s.
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
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
		if p.exited() {
			return fmt.Errorf("%s exited while starting (%v); log %s:\n%s", p.name, p.err, p.logPath, p.logTail())
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
