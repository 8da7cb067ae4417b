// Command mixin-generate renders the monitoring mixin (mixin/) into the checked-in rules/ and dashboards/.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/mixin"
)

func main() {
	app := kingpin.New("mixin-generate", "Render the monitoring mixin into Prometheus rule files, rule resources and Grafana dashboards.")
	outputDir := app.Flag("output-dir", "Directory to write rules/ and dashboards/ into.").Default(".").String()
	kingpin.MustParse(app.Parse(os.Args[1:]))

	if err := generate(*outputDir); err != nil {
		fmt.Fprintln(os.Stderr, "mixin-generate:", err)
		os.Exit(1)
	}
}

// generate writes every rendered file under dir and removes files of the generated directories that the mixin no
// longer renders, so that a renamed dashboard does not leave its old file behind.
func generate(dir string) error {
	files, err := mixin.Render()
	if err != nil {
		return err
	}
	written := map[string]bool{}
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.Content, 0o644); err != nil {
			return err
		}
		written[path] = true
	}
	for _, sub := range mixin.GeneratedDirs {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return err
		}
		for _, e := range entries {
			path := filepath.Join(dir, sub, e.Name())
			if e.Type().IsRegular() && !written[path] {
				if err := os.Remove(path); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
