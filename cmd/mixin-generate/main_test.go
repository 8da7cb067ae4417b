package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/mixin"
)

func TestGenerateWritesEveryFileAndRemovesStaleOnes(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "dashboards", "renamed-long-ago.json")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s was not removed (stat: %v)", stale, err)
	}
	files, err := mixin.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s was not written: %v", f.Path, err)
		} else if string(got) != string(f.Content) {
			t.Errorf("%s differs from the rendering", f.Path)
		}
	}
}
