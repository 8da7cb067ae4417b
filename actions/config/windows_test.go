package config

import (
	"strings"
	"testing"
)

// TestParseWindowsForms: windows are a list of weekly windows or {fromCluster: true}, at the top level, per pool
// (replacing the top level's for the pool) and for repairs; the keys from the cluster need the GKE API.
func TestParseWindowsForms(t *testing.T) {
	cfg, err := Parse([]byte(`
windows: {fromCluster: true}
pools:
  - name: training
    strategy: parallel
  - name: serving
    windows:
      - {days: [Sat], start: "02:00", end: "06:00"}
  - name: batch
    windows: []
  - name: research
    windows: {fromCluster: false}
    repair: {windows: {fromCluster: true}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Windows.FromCluster || len(cfg.Windows.Weekly) != 0 {
		t.Errorf("top-level windows %+v, want from the cluster", cfg.Windows)
	}
	training, serving, batch, research := &cfg.Pools[0], &cfg.Pools[1], &cfg.Pools[2], &cfg.Pools[3]
	if training.Windows != nil || !cfg.WindowsOf(training).FromCluster {
		t.Errorf("training: own windows %+v; the top level's hold", training.Windows)
	}
	if w := cfg.WindowsOf(serving); w.FromCluster || len(w.Weekly) != 1 || w.Weekly[0].Timezone.Location == nil {
		t.Errorf("serving: windows %+v, want its one weekly window, in UTC", w)
	}
	if w := cfg.WindowsOf(batch); batch.Windows == nil || w.FromCluster || len(w.Weekly) != 0 {
		t.Errorf("batch: windows %+v, want its own: none, any time", w)
	}
	if w := cfg.WindowsOf(research); w.FromCluster || len(w.Weekly) != 0 || !research.Repair.Windows.FromCluster {
		t.Errorf("research: windows %+v, repair windows %+v", w, research.Repair.Windows)
	}
	if !cfg.WindowsFromCluster() || cfg.NeedsGKEAPI() != "windows.fromCluster" {
		t.Errorf("from the cluster %v, needs the GKE API for %q", cfg.WindowsFromCluster(), cfg.NeedsGKEAPI())
	}

	for _, tc := range []struct{ yaml, key string }{
		{"pools: [{name: a}]\n", ""},
		{"windows: {fromCluster: false}\npools: [{name: a}]\n", ""},
		{"windows: []\npools: [{name: a}, {name: b, windows: {fromCluster: true}}]\n", "pools[1].windows.fromCluster"},
		{"pools: [{name: a, repair: {windows: {fromCluster: true}}}]\n", "pools[0].repair.windows.fromCluster"},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := cfg.NeedsGKEAPI(); got != tc.key {
			t.Errorf("%s: needs the GKE API for %q, want %q", tc.yaml, got, tc.key)
		}
		if got := cfg.WindowsFromCluster(); got != strings.HasSuffix(tc.key, "windows.fromCluster") {
			t.Errorf("%s: windows from the cluster %v", tc.yaml, got)
		}
	}
}

// TestParseWindowsErrors: a mistake in either form names its key.
func TestParseWindowsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"misspelt key", "windows: {fromcluster: true}\npools: [{name: a}]\n", []string{"windows.fromcluster", "line 1", "unknown key", "fromCluster"}},
		{"not a bool", "windows: {fromCluster: yes please}\npools: [{name: a}]\n", []string{"windows.fromCluster", "true or false"}},
		{"empty mapping", "windows: {}\npools: [{name: a}]\n", []string{"windows", "fromCluster", "list"}},
		{"a scalar", "windows: cluster\npools: [{name: a}]\n", []string{"windows", "expected a list of windows or {fromCluster: true}", `"cluster"`}},
		{"one window as a mapping", "windows: {start: '02:00', end: '06:00'}\npools: [{name: a}]\n", []string{"windows", "line 1", "a list"}},
		{"extra key with fromCluster", "windows: {fromCluster: true, timeZone: UTC}\npools: [{name: a}]\n", []string{"windows.timeZone", "unknown key"}},
		{"pool: misspelt key", "pools: [{name: a, windows: {fromClusters: true}}]\n", []string{"pools[0].windows.fromClusters", "unknown key"}},
		{"pool: bad window", "pools: [{name: a, windows: [{start: '02:00'}]}]\n", []string{"pools[0].windows[0].end", "required"}},
		{"pool: a scalar", "pools: [{name: a, windows: true}]\n", []string{"pools[0].windows", "expected a list of windows"}},
		{"repair: misspelt key", "pools: [{name: a, repair: {windows: {cluster: true}}}]\n", []string{"pools[0].repair.windows.cluster", "unknown key"}},
		{"repair: bad day", "pools: [{name: a, repair: {windows: [{days: [Someday], start: '02:00', end: '03:00'}]}}]\n", []string{"pools[0].repair.windows[0].days[0]", "Someday"}},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, tc.yaml, tc.want...) })
	}
}
