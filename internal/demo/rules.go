package demo

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-jsonnet"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// RuleConfig says how to render the mixin's rules for a story that runs faster than the wall clock.
type RuleConfig struct {
	// TimeScale is story seconds per wall-clock second. The lead times, the stuck threshold and every alert's `for`
	// are divided by it (to at least one second), so that the rules judge story time as production rules judge
	// real time.
	TimeScale float64
	// Config overrides settings of the mixin's _config (mixin/config.libsonnet), durations in story time.
	Config map[string]any
	// MinFor is the shortest `for` an alert keeps after scaling (default 1s). A few scrape intervals keep a
	// single failed scrape from ending an alert and starting it again as a new episode.
	MinFor time.Duration
}

// ruleSnippet renders the recording and alerting rules of the mixin with the overrides and the time scale.
const ruleSnippet = `
local utils = import 'lib/utils.libsonnet';
local scale = std.extVar('scale');
local wall(d) = '%ds' % std.max(1, std.ceil(utils.seconds(d) / scale));
local forWall(d) = '%ds' % std.max(std.extVar('minFor'), std.ceil(utils.seconds(d) / scale));
local base = (import 'mixin.libsonnet') + { _config+:: std.extVar('config') };
local c = base._config;
// The stuck threshold is the alert's 'for', scaled with all the others below.
local mixin = base + { _config+:: {
  performMaintenanceLeadTime: wall(c.performMaintenanceLeadTime),
  drainLeadTime: wall(c.drainLeadTime),
} };
local scaleFor(groups) = [
  g { rules: [if std.objectHas(r, 'for') then r { 'for': forWall(r['for']) } else r for r in g.rules] }
  for g in groups
];
{ groups: mixin.prometheusRules.groups + scaleFor(mixin.prometheusAlerts.groups) }
`

// RenderRules evaluates the mixin in the repository's mixin/ directory with cfg and writes the rules as a
// Prometheus rule file (JSON, which Prometheus reads as YAML) to path.
func RenderRules(path string, cfg RuleConfig) error {
	if cfg.TimeScale <= 0 {
		return fmt.Errorf("time scale %v: must be positive", cfg.TimeScale)
	}
	config := cfg.Config
	if config == nil {
		config = map[string]any{}
	}
	overrides, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("mixin config overrides: %w", err)
	}
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(localenv.RepoRoot(), "mixin")}})
	vm.ExtCode("scale", strconv.FormatFloat(cfg.TimeScale, 'g', -1, 64))
	vm.ExtCode("config", string(overrides))
	vm.ExtCode("minFor", strconv.Itoa(max(1, int(math.Ceil(cfg.MinFor.Seconds())))))
	out, err := vm.EvaluateAnonymousSnippet("demo-rules.jsonnet", ruleSnippet)
	if err != nil {
		return fmt.Errorf("rendering the mixin's rules: %w", err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
