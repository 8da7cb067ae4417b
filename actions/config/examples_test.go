package config

import (
	"path/filepath"
	"testing"
)

// TestExamplePolicies keeps the shipped example policies valid.
func TestExamplePolicies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "policy-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example policies found in examples/")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}
