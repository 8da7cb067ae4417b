// Package testenv gives tests the real components they run against: pinned tool binaries built from the
// tools/ modules, and a kube-apiserver with etcd on loopback (package localenv, wrapped for tests).
package testenv

import (
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string { return localenv.RepoRoot() }

// Binary returns the path of a pinned tool (kube-apiserver, etcd, prometheus, promtool, alertmanager, helm), building it
// into bin/ the first time. `make tools` builds them all ahead of the tests.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := localenv.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
