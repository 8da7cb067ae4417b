package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// releaseVersion is the version the release test cuts: no real release has it.
const releaseVersion = "v9.9.9"

// releaseImage is the image every install runs at releaseVersion.
const releaseImage = "ghcr.io/gke-disruption-exporter/gke-disruption-exporter:" + releaseVersion

// TestRelease runs `make release VERSION=v9.9.9` as a maintainer does, in a copy of the repository so that the
// checkout is left as it is, for one platform, and checks what it writes: the version in the kustomize images and
// the chart, one install.yaml per overlay that parses, runs that image and applies to a real API server (install.md's
// `kubectl apply -f …/install-….yaml`), the packaged chart, and a krew manifest whose archives match. The plugin is
// built with the flags of `make build`, which `make all` runs first: with a cold build cache this test compiles the
// whole binary once more.
func TestRelease(t *testing.T) {
	root := testenv.RepoRoot()
	touched := []string{"deploy/base/kustomization.yaml", "deploy/examples/overlay/kustomization.yaml",
		"deploy/helm/gke-disruption-exporter/Chart.yaml"}
	before := map[string][]byte{}
	for _, f := range touched {
		before[f] = readFile(t, filepath.Join(root, f))
	}
	_, distErr := os.Stat(filepath.Join(root, "dist"))

	dir := copyRepository(t, root)
	run(t, dir, []string{"RELEASE_PLATFORMS=linux/amd64"}, "make", "release", "VERSION="+releaseVersion)

	for _, f := range touched {
		if !bytes.Equal(readFile(t, filepath.Join(root, f)), before[f]) {
			t.Errorf("the release in a copy changed the checkout's %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "dist")); (err == nil) != (distErr == nil) {
		t.Error("the release in a copy wrote the checkout's dist/")
	}

	// The image tag everywhere an install names it.
	for _, f := range touched[:2] {
		var k struct {
			Images []struct {
				Name    string `json:"name"`
				NewName string `json:"newName"`
				NewTag  string `json:"newTag"`
			} `json:"images"`
		}
		if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, f)), &k); err != nil || len(k.Images) == 0 {
			t.Fatalf("%s: %v, images %v", f, err, k.Images)
		}
		for _, img := range k.Images {
			if img.NewTag != releaseVersion {
				t.Errorf("%s: image %s has tag %q, want %s", f, img.Name, img.NewTag, releaseVersion)
			}
		}
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, touched[2])), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != strings.TrimPrefix(releaseVersion, "v") || chart.AppVersion != releaseVersion {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want %s and %s", chart.Version, chart.AppVersion, strings.TrimPrefix(releaseVersion, "v"), releaseVersion)
	}

	// One static install per overlay: it parses, runs the release's image, and applies to a real API server.
	overlays, err := os.ReadDir(filepath.Join(root, "deploy", "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	for _, o := range overlays {
		path := filepath.Join(dir, "dist", "install-"+o.Name()+".yaml")
		objects := readYAML(t, path)
		if len(objects) == 0 {
			t.Fatalf("%s is empty", path)
		}
		images := 0
		for _, u := range objects {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				if image := ctr.(map[string]any)["image"]; image != releaseImage {
					t.Errorf("%s: %s %s runs %v, want %s", path, u.GetKind(), u.GetName(), image, releaseImage)
				}
				images++
			}
		}
		if images != 3 {
			t.Errorf("%s: %d containers, want the three components'", path, images)
		}
		for _, u := range objects {
			c.apply(t, u, false)
		}
	}

	if _, err := os.Stat(filepath.Join(dir, "dist", "gke-disruption-exporter-"+strings.TrimPrefix(releaseVersion, "v")+".tgz")); err != nil {
		t.Errorf("packaged chart: %v", err)
	}

	// The krew manifest: the release's version, and each archive at its download address with its checksum.
	var plugin struct {
		Kind string
		Spec struct {
			Version   string
			Platforms []struct {
				URI    string
				Sha256 string
				Bin    string
			}
		}
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "dist", "gke-disruption.yaml")), &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.Kind != "Plugin" || plugin.Spec.Version != releaseVersion || len(plugin.Spec.Platforms) != 1 {
		t.Fatalf("krew manifest: %+v", plugin)
	}
	p := plugin.Spec.Platforms[0]
	archive := "kubectl-gke_disruption_" + releaseVersion + "_linux_amd64.tar.gz"
	sum := sha256.Sum256(readFile(t, filepath.Join(dir, "dist", archive)))
	if !strings.HasSuffix(p.URI, "/releases/download/"+releaseVersion+"/"+archive) || p.Sha256 != hex.EncodeToString(sum[:]) ||
		p.Bin != "kubectl-gke_disruption" {
		t.Errorf("krew platform %+v; want %s with sha256 %x", p, archive, sum)
	}
	if out := run(t, dir, nil, "tar", "-tzf", filepath.Join("dist", archive)); out != "kubectl-gke_disruption\n" {
		t.Errorf("%s holds %q", archive, out)
	}
}

// copyRepository copies the repository's files (tracked, and new ones not ignored) into a new git repository, with
// bin/ pointing at the shared tool cache.
func copyRepository(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(run(t, root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00"), "\x00") {
		if f == "bin" || strings.HasPrefix(f, "bin/") {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), readFile(t, filepath.Join(root, f)), info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := filepath.EvalSymlinks(filepath.Join(root, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "git", "init", "-q")
	run(t, dir, nil, "git", "add", "-A")
	run(t, dir, nil, "git", "-c", "user.name=release", "-c", "user.email=release@example.com", "commit", "-qm", "release copy")
	return dir
}

// run runs a command in dir with extra environment and returns its stdout; a failure ends the test.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
