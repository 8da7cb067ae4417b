//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// openPTY returns a pseudo-terminal's controlling side and the terminal a process writes to.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, tty
}

// TestStatusWatchOnTerminal runs `status --watch` as a process on a pseudo-terminal: it clears the screen and
// redraws when a node gains maintenance, and exits 0 on Ctrl-C.
func TestStatusWatchOnTerminal(t *testing.T) {
	api := testenv.StartAPIServer(t)
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	var seen testenv.SyncBuffer
	go io.Copy(&seen, ptmx) //nolint:errcheck // ends when the terminal closes

	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "status", "--watch", "--kubeconfig="+api.Kubeconfig)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // the test failed already
			<-exited
		}
	}()

	frames := func() []string { return strings.Split(seen.String(), "\x1b[H\x1b[2J")[1:] }
	testenv.Eventually(t, 30*time.Second, "the first screen", func() error {
		if f := frames(); len(f) != 1 || !strings.Contains(f[0], "No nodes with maintenance pending") {
			return fmt.Errorf("screen %q", seen.String())
		}
		return nil
	})
	at := strconv.FormatInt(time.Now().Add(26*time.Hour).Unix(), 10)
	if _, err := api.Client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gke-a3-0", Labels: map[string]string{"cloud.google.com/gke-nodepool": "a3-train",
			"cloud.google.com/scheduled-maintenance-time": at}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the screen redrawn with the node", func() error {
		if f := frames(); len(f) != 2 || !strings.Contains(f[1], "gke-a3-0") || !strings.Contains(f[1], "  in 26h00m  ") {
			return fmt.Errorf("screen %q", seen.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("status --watch ended with %v on Ctrl-C, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("status --watch did not end on Ctrl-C")
	}
}
