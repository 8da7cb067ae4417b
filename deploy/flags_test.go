package deploy

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestInstallsFlagsParse runs the binary with each container's arguments of every install, plus --help: the
// binary rejects an unknown command, flag or value before it prints help, so this proves the manifests and the
// binary agree without starting anything.
func TestInstallsFlagsParse(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gke-disruption-exporter")
	gobuild := exec.Command("go", "build", "-o", bin, "./cmd/gke-disruption-exporter")
	gobuild.Dir = testenv.RepoRoot()
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	for _, dir := range installs {
		m := build(t, dir)
		for _, w := range workloads {
			c := m.podTemplate(t, w).Spec.Containers[0]
			// The kubelet expands $(VAR) from the container's environment; the downward API fills these.
			args := make([]string, 0, len(c.Args)+1)
			for _, a := range c.Args {
				for _, e := range c.Env {
					a = strings.ReplaceAll(a, "$("+e.Name+")", "example-"+strings.ToLower(e.Name))
				}
				if strings.Contains(a, "$(") {
					t.Errorf("%s %s: argument %q refers to a variable the container does not have", dir, w.command, a)
				}
				args = append(args, a)
			}
			out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: the binary rejects %v: %v\n%s", dir, w.command, args, err, out)
			}
		}
	}
}
