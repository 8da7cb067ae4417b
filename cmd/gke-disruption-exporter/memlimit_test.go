package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name  string
		files []string
		want  int64
		ok    bool
	}{
		{"v2 limit", []string{write("v2", "268435456\n")}, 268435456, true},
		{"v2 unlimited", []string{write("v2max", "max\n")}, 0, false},
		{"v1 after missing v2", []string{missing, write("v1", "536870912\n")}, 536870912, true},
		{"v1 unlimited", []string{write("v1max", "9223372036854771712\n")}, 0, false},
		{"garbage", []string{write("bad", "lots")}, 0, false},
		{"none", []string{missing}, 0, false},
	} {
		got, ok := cgroupMemoryLimit(tc.files)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
