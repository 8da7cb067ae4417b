package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestEdgeStatusWatchPipedJSON (passes): `status --watch -o json` into a pipe (jq, a log) writes no escape codes,
// and every redraw is one whole JSON document a stream decoder reads; Ctrl-C ends it with exit 0 and nothing on
// stderr.
func TestEdgeStatusWatchPipedJSON(t *testing.T) {
	api := testenv.StartAPIServer(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "status", "--watch", "-o", "json", "--kubeconfig="+api.Kubeconfig)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // the test failed already
			<-exited
		}
	}()
	docs := func() ([]cli.Report, error) {
		dec := json.NewDecoder(strings.NewReader(stdout.String()))
		var out []cli.Report
		for {
			var r cli.Report
			if err := dec.Decode(&r); errors.Is(err, io.EOF) {
				return out, nil
			} else if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the first document", func() error {
		if d, err := docs(); err != nil || len(d) != 1 {
			return fmt.Errorf("%d documents (%v) in %q", len(d), err, stdout.String())
		}
		return nil
	})
	at := strconv.FormatInt(time.Now().Add(26*time.Hour).Unix(), 10)
	if _, err := api.Client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gke-a3-0", Labels: map[string]string{"cloud.google.com/gke-nodepool": "a3-train",
			"cloud.google.com/scheduled-maintenance-time": at}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a document with the node", func() error {
		d, err := docs()
		if err != nil || len(d) < 2 {
			return fmt.Errorf("%d documents (%v) in %q", len(d), err, stdout.String())
		}
		if last := d[len(d)-1]; len(last.Nodes) != 1 || last.Nodes[0].Node != "gke-a3-0" {
			return fmt.Errorf("last document %+v", last)
		}
		return nil
	})
	if strings.Contains(stdout.String(), "\x1b") {
		t.Errorf("escape codes written to a pipe: %q", stdout.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil || stderr.String() != "" {
			t.Errorf("status --watch on Ctrl-C: %v, stderr %q; want exit 0 and nothing", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("status --watch did not end on Ctrl-C")
	}
}

// TestEdgeUnresponsiveServer (passes): a kubeconfig pointing at an address that accepts connections and never
// answers (a dead load balancer, a firewalled endpoint) fails status, status --watch and audit with one line and
// exit 2 within the client's bounds, not a hang.
func TestEdgeUnresponsiveServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	kubeconfig := filepath.Join(t.TempDir(), "silent")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: silent, cluster: {server: "https://`+l.Addr().String()+`", insecure-skip-tls-verify: true}}]
users: [{name: someone, user: {token: abc}}]
contexts: [{name: silent, context: {cluster: silent, user: someone}}]
current-context: silent
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"status", "--watch"}, {"audit"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, append(args, "--kubeconfig="+kubeconfig)...)...)
			cmd.Env = append(os.Environ(), mainEnv+"=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			_ = cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after 2 minutes; stderr %q", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 2 || stdout.String() != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout.String())
			}
			oneLine(t, stderr.String(), args[0], "cannot reach the API server https://"+l.Addr().String())
		})
	}
}

// TestEdgeBadSelectorAndPoolExit2 (passes): a selector or pool that does not parse is one line and exit 2 before
// the API server is asked anything (the kubeconfig points at nothing).
func TestEdgeBadSelectorAndPoolExit2(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "nowhere")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://`+freeAddress(t)+`"}}]
users: [{name: someone, user: {token: abc}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: someone}}]
current-context: nowhere
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, want string }{
		{"--selector=a in (", `bad --selector "a in ("`},
		{"--selector=pool=a=b", `bad --selector "pool=a=b"`},
		{"--pool=a b", `bad --pool "a b"`},
	} {
		for _, watch := range []bool{false, true} {
			args := []string{"status", "--kubeconfig=" + kubeconfig, tc.flag}
			if watch {
				args = append(args, "--watch")
			}
			code, stdout, stderr := runMain(t, args...)
			if code != 2 || stdout != "" {
				t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, stdout)
			}
			oneLine(t, stderr, "status", tc.want)
		}
	}
}
