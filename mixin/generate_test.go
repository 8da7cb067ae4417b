package mixin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is where the generated files live, seen from this package's directory.
const repoRoot = ".."

// TestGeneratedFilesUpToDate fails when rules/ or dashboards/ differ from what the mixin renders: run
// `make generate` and commit the result.
func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]bool{}
	for _, f := range files {
		rendered[f.Path] = true
		got, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s: %v; run make generate", f.Path, err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s is stale (%s); run make generate", f.Path, firstDifference(got, f.Content))
		}
	}
	for _, dir := range GeneratedDirs {
		entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if name := dir + "/" + e.Name(); !e.IsDir() && !rendered[name] {
				t.Errorf("%s is not rendered by the mixin; run make generate to remove it", name)
			}
		}
	}
}

// firstDifference names the first line where the checked-in file differs from the rendered one.
func firstDifference(checkedIn, rendered []byte) string {
	a, b := strings.Split(string(checkedIn), "\n"), strings.Split(string(rendered), "\n")
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d: checked in %q, rendered %q", i+1, a[i], b[i])
		}
	}
	return fmt.Sprintf("checked in %d lines, rendered %d", len(a), len(b))
}
