package demo

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/mixin"
)

// RuleConfig says how to render the mixin's rules for a story that runs faster than the wall clock.
type RuleConfig struct {
	// TimeScale is story seconds per wall-clock second. Every duration of the mixin's _config (lead times,
	// thresholds, windows, gap tolerances, every alert's `for`) is divided by it, to at least MinFor, so that the
	// rules judge story time as production rules judge real time; metadataStaleThreshold, which times the agents' own
	// requests, stays in wall-clock time.
	TimeScale float64
	// Config overrides settings of the mixin's _config (mixin/config.libsonnet), durations in story time.
	Config map[string]any
	// MinFor is the shortest duration a setting keeps after scaling (default 1s). A few scrape intervals keep a
	// single failed scrape from ending an alert or restarting its `for`.
	MinFor time.Duration
}

// ruleSnippet renders the recording and alerting rules of the mixin with the overrides and every duration of its
// _config scaled: the rules are the mixin's own, only the settings differ.
const ruleSnippet = `
local utils = import 'lib/utils.libsonnet';
local scale = std.extVar('scale');
local scaled(d) = if d == '0s' then d else '%ds' % std.max(std.extVar('minFor'), std.ceil(utils.seconds(d) / scale));
local scaleAll(v) =
  if utils.isDuration(v) then scaled(v)
  else if std.isArray(v) then std.map(scaleAll, v)
  else if std.isObject(v) then std.mapWithKey(function(_, x) scaleAll(x), v)
  else v;
local base = (import 'mixin.libsonnet') + { _config+:: std.extVar('config') };
// interruptionsWindow names one of interruptionsWindows: a name, not a duration. metadataStaleThreshold is kept in
// wall-clock time: it measures the node agent's own requests (a healthy hanging GET answers within its 60 s
// timeout), which run at the wall clock's pace in the story too.
local mixin = base + { _config+:: scaleAll(base._config) {
  interruptionsWindow: base._config.interruptionsWindow,
  metadataStaleThreshold: base._config.metadataStaleThreshold,
} };
{ groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }
`

// RenderRules evaluates the mixin (its sources built into the binary) with cfg and writes the rules as a
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
	out, err := mixin.Evaluate(ruleSnippet, map[string]string{
		"scale":  strconv.FormatFloat(cfg.TimeScale, 'g', -1, 64),
		"config": string(overrides),
		"minFor": strconv.Itoa(max(1, int(math.Ceil(cfg.MinFor.Seconds())))),
	})
	if err != nil {
		return fmt.Errorf("rendering the mixin's rules: %w", err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
