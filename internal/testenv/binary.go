// Package testenv gives tests the real components they run against: pinned tool binaries built from the
// tools/ modules, and a kube-apiserver with etcd on loopback.
package testenv

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Binary returns the path of a pinned tool (kube-apiserver, etcd, prometheus, promtool, alertmanager), building it
// into bin/ the first time. `make tools` builds them all ahead of the tests.
func Binary(t testing.TB, name string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "tools", "build.sh"), name)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}
