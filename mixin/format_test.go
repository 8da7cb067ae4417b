package mixin

import (
	"io/fs"
	"testing"

	"github.com/google/go-jsonnet/formatter"
)

// TestJsonnetFormatted requires the jsonnet sources in the canonical layout of jsonnetfmt.
func TestJsonnetFormatted(t *testing.T) {
	err := fs.WalkDir(sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(sources, path)
		if err != nil {
			return err
		}
		formatted, err := formatter.Format(path, string(content), formatter.DefaultOptions())
		if err != nil {
			t.Errorf("%s: %v", path, err)
		} else if formatted != string(content) {
			t.Errorf("%s is not formatted: run go run github.com/google/go-jsonnet/cmd/jsonnetfmt@v0.22.0 -i mixin/%s", path, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
