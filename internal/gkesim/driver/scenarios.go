package driver

import (
	"embed"
	"fmt"
	"os"
	"path"
	"strings"
)

// builtin are the scenarios shipped with the simulator, by file name without .yaml.
//
//go:embed scenarios/*.yaml
var builtin embed.FS

// LoadNamed loads a shipped scenario by name (demo) or a scenario file by path.
func LoadNamed(nameOrPath string) (*Scenario, error) {
	if strings.ContainsAny(nameOrPath, "/.") {
		return Load(nameOrPath)
	}
	data, err := builtin.ReadFile(path.Join("scenarios", nameOrPath+".yaml"))
	if err != nil {
		if _, statErr := os.Stat(nameOrPath); statErr == nil {
			return Load(nameOrPath)
		}
		return nil, fmt.Errorf("no shipped scenario %q and no such file", nameOrPath)
	}
	sc, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", nameOrPath, err)
	}
	return sc, nil
}
