package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// designExample is the schema example from the design document, verbatim.
const designExample = `
dryRun: false
paused: false
maxDisruptedNodes: "10%"        # cluster-wide cap, count or percent of nodes
windows:                        # when new actions may start; none listed = any time
  - days: [Sat, Sun]
    start: "02:00"
    end: "06:00"
    timezone: America/Los_Angeles
pools:                          # first match wins; a node matching none is refused
  - name: training
    nodeSelector: {cloud.google.com/gke-nodepool: a3-train}
    strategy: parallel          # the whole pool together (coupled training)
  - name: serving
    nodeSelector: {cloud.google.com/gke-nodepool: l4-serve}
    strategy: rolling
    maxUnavailable: 1           # count or percent of the pool
    minAvailable: 2
    opportunistic:              # optional: start reschedulable maintenance on idle nodes
      nodeIdleTime: 10m         # no pod using an accelerator for this long
      minNodes: 2               # never fewer available nodes in the pool
      window: 336h              # only this long before the scheduled maintenance
drain:
  maxGracePeriod: 10m           # caps each pod's terminationGracePeriodSeconds
  timeout: 30m
  evictionRetryDelay: 5s
  deleteEmptyDirData: true
performMaintenance:
  drainFirst: true              # drain before setting the label
`

func TestParseDesignExample(t *testing.T) {
	cfg, err := Parse([]byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DryRun || cfg.MaxDisruptedNodes == nil || *cfg.MaxDisruptedNodes != (IntOrPercent{Value: 10, Percent: true}) {
		t.Errorf("top level: dryRun %v, maxDisruptedNodes %v", cfg.DryRun, cfg.MaxDisruptedNodes)
	}
	if len(cfg.Windows.Weekly) != 1 {
		t.Fatalf("windows: %d, want 1", len(cfg.Windows.Weekly))
	}
	w := cfg.Windows.Weekly[0]
	if len(w.Days) != 2 || w.Days[0] != Weekday(time.Saturday) || w.Days[1] != Weekday(time.Sunday) ||
		w.Start != 120 || w.End != 360 || w.Timezone.String() != "America/Los_Angeles" {
		t.Errorf("window: %+v", w)
	}
	if len(cfg.Pools) != 2 {
		t.Fatalf("pools: %d, want 2", len(cfg.Pools))
	}
	training, serving := cfg.Pools[0], cfg.Pools[1]
	if training.Name != "training" || training.Strategy != Parallel || training.NodeSelector["cloud.google.com/gke-nodepool"] != "a3-train" {
		t.Errorf("training pool: %+v", training)
	}
	if serving.Strategy != Rolling || serving.MaxUnavailable != (IntOrPercent{Value: 1}) || serving.MinAvailable == nil || *serving.MinAvailable != (IntOrPercent{Value: 2}) {
		t.Errorf("serving pool: %+v", serving)
	}
	if o := serving.Opportunistic; o == nil || *o != (Opportunistic{NodeIdleTime: Duration(10 * time.Minute), MinNodes: 2, Window: Duration(336 * time.Hour)}) {
		t.Errorf("serving opportunistic: %+v", o)
	}
	if training.Opportunistic != nil || cfg.Paused || strings.Join(cfg.AcceleratorResources, ",") != "nvidia.com/gpu,google.com/tpu" {
		t.Errorf("training opportunistic %+v, paused %v, accelerator resources %v", training.Opportunistic, cfg.Paused, cfg.AcceleratorResources)
	}
	want := Drain{MaxGracePeriod: Duration(10 * time.Minute), Timeout: Duration(30 * time.Minute), EvictionRetryDelay: Duration(5 * time.Second), DeleteEmptyDirData: true,
		Horizon: Duration(DefaultDrainHorizon)}
	if cfg.Drain != want {
		t.Errorf("drain: %+v, want %+v", cfg.Drain, want)
	}
	if !cfg.PerformMaintenance.DrainFirst {
		t.Error("performMaintenance.drainFirst not read")
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte("pools:\n- name: all\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pools[0]
	if p.Strategy != Rolling || p.MaxUnavailable != (IntOrPercent{Value: 1}) || p.MinAvailable != nil || len(p.NodeSelector) != 0 {
		t.Errorf("pool defaults: %+v", p)
	}
	if cfg.MaxDisruptedNodes != nil || len(cfg.Windows.Weekly) != 0 || cfg.DryRun || cfg.Paused {
		t.Errorf("top-level defaults: %+v", cfg)
	}
	if cfg.Drain.Timeout != Duration(DefaultDrainTimeout) || cfg.Drain.EvictionRetryDelay != Duration(DefaultEvictionRetryDelay) ||
		cfg.Drain.MaxGracePeriod != 0 || !cfg.Drain.DeleteEmptyDirData {
		t.Errorf("drain defaults: %+v", cfg.Drain)
	}
	if cfg.PerformMaintenance.DrainFirst {
		t.Error("drainFirst defaults to true")
	}
	if cfg.PerformMaintenance.StartDeadline != Duration(DefaultStartDeadline) || cfg.ReportFaultyHost.StartDeadline != Duration(DefaultReportStartDeadline) {
		t.Errorf("start deadlines: %+v, %+v", cfg.PerformMaintenance, cfg.ReportFaultyHost)
	}
	if s := cfg.Silences; s.Duration != Duration(DefaultSilenceDuration) || !slices.Equal(s.NodeLabels, []string{"node"}) || len(s.AlertNames) != 0 {
		t.Errorf("silences defaults: %+v", s)
	}
}

func TestParseAcceptedForms(t *testing.T) {
	cfg, err := Parse([]byte(`
maxDisruptedNodes: 3
windows:
  - {days: [monday, TUE, Wednesday], start: "22:00", end: "04:00", timezone: Europe/Berlin}
  - {start: "00:00", end: "24:00"}
pools:
  - {name: a, maxUnavailable: "25%", minAvailable: "50%"}
  - {name: b, maxUnavailable: "2", nodeSelector: {team: "true", tier: 3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.MaxDisruptedNodes != (IntOrPercent{Value: 3}) {
		t.Errorf("maxDisruptedNodes %v", cfg.MaxDisruptedNodes)
	}
	if got := cfg.Windows.Weekly[0].Days; len(got) != 3 || got[0] != Weekday(time.Monday) || got[1] != Weekday(time.Tuesday) || got[2] != Weekday(time.Wednesday) {
		t.Errorf("days %v", got)
	}
	if cfg.Windows.Weekly[1].Timezone.Location != time.UTC || cfg.Windows.Weekly[1].End != 24*60 {
		t.Errorf("second window %+v", cfg.Windows.Weekly[1])
	}
	if cfg.Pools[0].MaxUnavailable != (IntOrPercent{Value: 25, Percent: true}) || *cfg.Pools[0].MinAvailable != (IntOrPercent{Value: 50, Percent: true}) {
		t.Errorf("pool a %+v", cfg.Pools[0])
	}
	if cfg.Pools[1].MaxUnavailable != (IntOrPercent{Value: 2}) || cfg.Pools[1].NodeSelector["team"] != "true" || cfg.Pools[1].NodeSelector["tier"] != "3" {
		t.Errorf("pool b %+v", cfg.Pools[1])
	}
}

// TestParseErrors checks that each mistake is refused with a message naming the key and the problem.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "pool:\n- name: a\n", []string{"pool", "unknown key", "line 1"}},
		{"short silence lease", "pools: [{name: a}]\nsilences: {duration: 5s}\n", []string{"silences.duration", "10s"}},
		{"no silence node labels", "pools: [{name: a}]\nsilences: {nodeLabels: []}\n", []string{"silences.nodeLabels", "empty"}},
		{"bad silence node label", "pools: [{name: a}]\nsilences: {nodeLabels: [node, 'exported node']}\n", []string{"silences.nodeLabels[1]", "exported node"}},
		{"protected alert silenced", "pools: [{name: a}]\nsilences: {alertNames: [KubeNodeNotReady, GKEDisruptionActionFailed]}\n",
			[]string{"silences.alertNames[1]", "GKEDisruptionActionFailed", "never silenced"}},
		{"unknown pool key", "pools:\n- name: a\n  maxUnavalable: 1\n", []string{"pools[0].maxUnavalable", "unknown key", "maxUnavailable"}},
		{"unknown drain key", "pools: [{name: a}]\ndrain: {timeOut: 5m}\n", []string{"drain.timeOut", "unknown key"}},
		{"duplicate key", "pools: [{name: a}]\ndryRun: true\ndryRun: false\n", []string{"dryRun", "twice"}},
		{"no pools", "dryRun: true\n", []string{"pools", "at least one pool"}},
		{"empty file", "", []string{"pools", "at least one pool"}},
		{"pools not a list", "pools: {name: a}\n", []string{"pools", "expected a list"}},
		{"pool without name", "pools: [{strategy: rolling}]\n", []string{"pools[0].name", "required"}},
		{"duplicate pool name", "pools: [{name: a}, {name: a}]\n", []string{"pools[1].name", "pools[0]"}},
		{"bad strategy", "pools: [{name: a, strategy: canary}]\n", []string{"pools[0].strategy", `"canary"`, "rolling or parallel"}},
		{"percent over 100", "pools: [{name: a, maxUnavailable: 150%}]\n", []string{"pools[0].maxUnavailable", `"150%"`}},
		{"negative count", "pools: [{name: a, minAvailable: -1}]\n", []string{"pools[0].minAvailable", `"-1"`}},
		{"fractional count", "maxDisruptedNodes: 1.5\npools: [{name: a}]\n", []string{"maxDisruptedNodes", `"1.5"`}},
		{"headroom without a cap", "opportunisticHeadroom: 1\npools: [{name: a}]\n", []string{"opportunisticHeadroom", "maxDisruptedNodes"}},
		{"bad headroom", "maxDisruptedNodes: 3\nopportunisticHeadroom: lots\npools: [{name: a}]\n", []string{"opportunisticHeadroom", `"lots"`}},
		{"zero maxUnavailable", "pools: [{name: a, maxUnavailable: 0}]\n", []string{"pools[0].maxUnavailable", "never"}},
		{"maxUnavailable with parallel", "pools: [{name: a, strategy: parallel, maxUnavailable: 2}]\n", []string{"pools[0].maxUnavailable", "parallel"}},
		{"minAvailable with parallel", "pools: [{name: a, strategy: parallel, minAvailable: 2}]\n", []string{"pools[0].minAvailable", "parallel"}},
		{"zero repair budget", "pools: [{name: a, repair: {maxConcurrent: 0}}]\n", []string{"pools[0].repair.maxConcurrent", "never repair"}},
		{"unknown repair key", "pools: [{name: a, repair: {maxUnavailable: 1}}]\n", []string{"pools[0].repair.maxUnavailable", "unknown key", "maxConcurrent"}},
		{"repair window without end", "pools: [{name: a, repair: {windows: [{start: \"02:00\"}]}}]\n", []string{"pools[0].repair.windows[0].end", "required"}},
		{"zero repairs per hour", "pools: [{name: a, repair: {maxPerHour: 0}}]\n", []string{"pools[0].repair.maxPerHour", "hold every"}},
		{"bad repairs per hour", "pools: [{name: a, repair: {maxPerHour: lots}}]\n", []string{"pools[0].repair.maxPerHour", `"lots"`}},
		{"zero cluster repairs per hour", "pools: [{name: a}]\nrepair: {maxPerHour: 0%}\n", []string{"repair.maxPerHour", "hold every"}},
		{"unknown cluster repair key", "pools: [{name: a}]\nrepair: {maxConcurrent: 1}\n", []string{"repair.maxConcurrent", "unknown key"}},
		{"zero repairs per node", "pools: [{name: a, repair: {maxPerNode: 0}}]\n", []string{"pools[0].repair.maxPerNode", "person"}},
		{"one-node correlation", "pools: [{name: a, repair: {correlation: {nodes: 1}}}]\n", []string{"pools[0].repair.correlation.nodes", "at least 2"}},
		{"zero correlation window", "pools: [{name: a, repair: {correlation: {window: 0s}}}]\n", []string{"pools[0].repair.correlation.window", "greater than 0"}},
		{"unknown correlation key", "pools: [{name: a, repair: {correlation: {block: x}}}]\n", []string{"pools[0].repair.correlation.block", "unknown key"}},
		{"bad selector key", "pools: [{name: a, nodeSelector: {'bad key': x}}]\n", []string{"pools[0].nodeSelector", "bad key"}},
		{"bad selector value", "pools: [{name: a, nodeSelector: {k: 'a b'}}]\n", []string{`pools[0].nodeSelector["k"]`, "a b"}},
		{"selector not a mapping", "pools: [{name: a, nodeSelector: [x]}]\n", []string{"pools[0].nodeSelector", "expected a mapping"}},
		{"zero report deadline", "pools: [{name: a}]\nreportFaultyHost: {startDeadline: 0s}\n", []string{"reportFaultyHost.startDeadline", "greater than 0"}},
		{"bad duration", "pools: [{name: a}]\ndrain: {timeout: 30 minutes}\n", []string{"drain.timeout", `"30 minutes"`, "not a duration"}},
		{"negative duration", "pools: [{name: a}]\ndrain: {timeout: -5m}\n", []string{"drain.timeout", "negative"}},
		{"zero timeout", "pools: [{name: a}]\ndrain: {timeout: 0s}\n", []string{"drain.timeout", "greater than 0"}},
		{"zero retry delay", "pools: [{name: a}]\ndrain: {evictionRetryDelay: 0s}\n", []string{"drain.evictionRetryDelay", "greater than 0"}},
		{"zero grace cap", "pools: [{name: a}]\ndrain: {maxGracePeriod: 0s}\n", []string{"drain.maxGracePeriod", "at least 1s"}},
		{"grace cap not below timeout", "pools: [{name: a}]\ndrain: {maxGracePeriod: 30m, timeout: 30m}\n", []string{"drain.maxGracePeriod", "drain.timeout", "30m0s"}},
		{"grace cap over default timeout", "pools: [{name: a}]\ndrain: {maxGracePeriod: 1h}\n", []string{"drain.maxGracePeriod", "drain.timeout"}},
		{"opportunistic without nodeIdleTime", "pools: [{name: a, opportunistic: {minNodes: 1, window: 24h}}]\n", []string{"pools[0].opportunistic.nodeIdleTime", "required"}},
		{"opportunistic zero window", "pools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 0s}}]\n", []string{"pools[0].opportunistic.window", "greater than 0"}},
		{"opportunistic negative minNodes", "pools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 1h, minNodes: -1}}]\n", []string{"pools[0].opportunistic.minNodes", "negative"}},
		{"opportunistic fractional minNodes", "pools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 1h, minNodes: 1.5}}]\n", []string{"pools[0].opportunistic.minNodes", "whole number"}},
		{"opportunistic unknown key", "pools: [{name: a, opportunistic: {nodeIdleTime: 10m, window: 1h, idle: 1}}]\n", []string{"pools[0].opportunistic.idle", "unknown key"}},
		{"bad accelerator resource", "acceleratorResources: ['bad name!']\npools: [{name: a}]\n", []string{"acceleratorResources[0]", "bad name!"}},
		{"bad paused", "paused: maybe\npools: [{name: a}]\n", []string{"paused", "true or false"}},
		{"bad bool", "dryRun: yes please\npools: [{name: a}]\n", []string{"dryRun", "true or false"}},
		{"bad weekday", "pools: [{name: a}]\nwindows: [{days: [Sat, Caturday], start: '02:00', end: '03:00'}]\n", []string{"windows[0].days[1]", "Caturday"}},
		{"bad clock", "pools: [{name: a}]\nwindows: [{start: '2am', end: '03:00'}]\n", []string{"windows[0].start", "HH:MM"}},
		{"clock out of range", "pools: [{name: a}]\nwindows: [{start: '02:00', end: '25:00'}]\n", []string{"windows[0].end", "25:00"}},
		{"start at 24:00", "pools: [{name: a}]\nwindows: [{start: '24:00', end: '03:00'}]\n", []string{"windows[0].start", "only allowed as an end"}},
		{"missing end", "pools: [{name: a}]\nwindows: [{start: '02:00'}]\n", []string{"windows[0].end", "required"}},
		{"empty window", "pools: [{name: a}]\nwindows: [{start: '02:00', end: '02:00'}]\n", []string{"windows[0]", "24:00"}},
		{"bad timezone", "pools: [{name: a}]\nwindows: [{start: '02:00', end: '03:00', timezone: Mars/Olympus}]\n", []string{"windows[0].timezone", "Mars/Olympus", "IANA"}},
		{"local timezone", "pools: [{name: a}]\nwindows: [{start: '02:00', end: '03:00', timezone: Local}]\n", []string{"windows[0].timezone", "Local"}},
		{"not YAML", "pools: [\n", []string{"not valid YAML"}},
		{"two documents", "pools: [{name: a}]\n---\npools: [{name: b}]\n", []string{"more than one YAML document"}},
		{"top level not a mapping", "- a\n", []string{"top level", "expected a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, tc.yaml, tc.want...) })
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("pools: [{name: a, strategy: canary}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "pools[0].strategy") {
		t.Errorf("error %v should name the file and the key", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading policy file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestIntOrPercentOf(t *testing.T) {
	for _, tc := range []struct {
		v       string
		total   int
		roundUp bool
		want    int
	}{
		{"3", 10, false, 3},
		{"3", 0, false, 3},
		{"10%", 100, false, 10},
		{"10%", 15, false, 1},
		{"10%", 5, false, 1}, // non-zero percent of a non-empty total lets one node go
		{"0%", 5, false, 0},
		{"10%", 0, false, 0},
		{"50%", 5, true, 3},
		{"50%", 5, false, 2},
		{"100%", 7, true, 7},
	} {
		v, err := ParseIntOrPercent(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Of(tc.total, tc.roundUp); got != tc.want {
			t.Errorf("%s of %d (roundUp %v) = %d, want %d", tc.v, tc.total, tc.roundUp, got, tc.want)
		}
	}
}

func TestMatchPoolFirstWins(t *testing.T) {
	cfg, err := Parse([]byte(`
pools:
  - {name: gpu, nodeSelector: {accel: gpu, pool: a}}
  - {name: pool-a, nodeSelector: {pool: a}}
  - {name: rest}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"accel": "gpu", "pool": "a"}, "gpu"},
		{map[string]string{"accel": "tpu", "pool": "a"}, "pool-a"},
		{map[string]string{"pool": "b"}, "rest"},
		{nil, "rest"},
	} {
		if got := cfg.MatchPool(tc.labels); got == nil || got.Name != tc.want {
			t.Errorf("labels %v matched %v, want %s", tc.labels, got, tc.want)
		}
	}
	strict, _ := Parse([]byte("pools: [{name: only, nodeSelector: {pool: a}}]\n"))
	if got := strict.MatchPool(map[string]string{"pool": "b"}); got != nil {
		t.Errorf("unmatched node matched %s", got.Name)
	}
}

func TestParseRepairDefaults(t *testing.T) {
	cfg, err := Parse([]byte("pools:\n- name: a\n  repair: {}\n- name: b\n  repair: {maxConcurrent: 3, windows: [{start: \"22:00\", end: \"06:00\"}]}\n- name: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := cfg.Pools[0].Repair, cfg.Pools[1].Repair, cfg.Pools[2].Repair
	if a == nil || a.MaxConcurrent != DefaultRepairMaxConcurrent || len(a.Windows.Weekly) != 0 {
		t.Errorf("pool a repair %+v, want maxConcurrent %d and no windows", a, DefaultRepairMaxConcurrent)
	}
	if b == nil || b.MaxConcurrent != 3 || len(b.Windows.Weekly) != 1 || b.Windows.Weekly[0].Timezone.Location == nil {
		t.Errorf("pool b repair %+v, want maxConcurrent 3 and one window in UTC", b)
	}
	if c != nil {
		t.Errorf("pool c without repair: got %+v", c)
	}
	want := Repair{MaxConcurrent: 1, MaxPerHour: IntOrPercent{Value: 10, Percent: true}, MaxPerNode: 2,
		Correlation: Correlation{Nodes: 3, Window: Duration(10 * time.Minute)}}
	for name, got := range map[string]*Repair{"a": a, "c (none)": cfg.Pools[2].RepairSettings()} {
		if got.MaxConcurrent != want.MaxConcurrent || got.MaxPerHour != want.MaxPerHour || got.MaxPerNode != want.MaxPerNode ||
			got.Correlation != want.Correlation {
			t.Errorf("pool %s repair guard rails %+v, want %+v", name, got, want)
		}
	}
	if cfg.Repair.MaxPerHour != want.MaxPerHour {
		t.Errorf("cluster-wide repair.maxPerHour %s, want 10%%", cfg.Repair.MaxPerHour)
	}
	set, err := Parse([]byte("repair: {maxPerHour: 4}\npools: [{name: a, repair: {maxPerHour: 2, maxPerNode: 1, correlation: {nodes: 5, window: 30m}}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := set.Pools[0].Repair; r.MaxPerHour != (IntOrPercent{Value: 2}) || r.MaxPerNode != 1 || r.Correlation.Nodes != 5 ||
		r.Correlation.Window != Duration(30*time.Minute) || set.Repair.MaxPerHour != (IntOrPercent{Value: 4}) {
		t.Errorf("repair guard rails as written: pool %+v, cluster %+v", r, set.Repair)
	}
}

// refused checks that Parse refuses the policy with an error that mentions every one of want.
func refused(t *testing.T, yaml string, want ...string) {
	t.Helper()
	_, err := Parse([]byte(yaml))
	if err == nil {
		t.Fatalf("no error for:\n%s", yaml)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
