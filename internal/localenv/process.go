package localenv

import (
	"os/exec"
	"syscall"
	"time"
)

// Process is a started component program. It dies with the process that started it, even when that one is killed.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts cmd and watches for its exit.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Exited tells whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended, once Exited.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Stop ends the process with SIGTERM, then SIGKILL after grace. A nil or ended process is left alone.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}
