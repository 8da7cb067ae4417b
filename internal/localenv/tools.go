// Package localenv runs the real components the project is tested and demonstrated against, on loopback: pinned
// tool binaries built from the tools/ modules, and etcd with kube-apiserver. Package testenv wraps it for tests.
package localenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Tool returns the path of a pinned tool (kube-apiserver, etcd, prometheus, promtool, alertmanager, helm), building it
// into bin/ the first time (minutes; cached afterwards).
func Tool(name string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "tools", "build.sh"), name)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}
