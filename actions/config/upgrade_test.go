package config

import (
	"testing"
	"time"
)

// TestParseUpgrade: upgrade.withMaintenance on a parallel pool, its deadline defaulted or given, and the keys that
// need the GKE API (and the role container.clusters.update) named.
func TestParseUpgrade(t *testing.T) {
	cfg, err := Parse([]byte(`
pools:
  - {name: serve, nodeSelector: {pool: serve}}
  - {name: train, nodeSelector: {pool: train}, strategy: parallel, upgrade: {withMaintenance: true}}
  - {name: slow, nodeSelector: {pool: slow}, strategy: parallel, upgrade: {withMaintenance: true, deadline: 12h}}
  - {name: off, nodeSelector: {pool: off}, strategy: parallel, upgrade: {withMaintenance: false}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(cfg.Pools[1].Upgrade.Deadline); got != DefaultUpgradeDeadline {
		t.Errorf("default deadline %s, want %s", got, DefaultUpgradeDeadline)
	}
	if got := time.Duration(cfg.Pools[2].Upgrade.Deadline); got != 12*time.Hour {
		t.Errorf("deadline %s, want 12h", got)
	}
	for i, want := range []bool{false, true, true, false} {
		if got := cfg.Pools[i].UpgradesWithMaintenance(); got != want {
			t.Errorf("pools[%d] upgrades with maintenance: %v, want %v", i, got, want)
		}
	}
	if got := cfg.NeedsGKEAPI(); got != "pools[1].upgrade.withMaintenance" {
		t.Errorf("NeedsGKEAPI = %q", got)
	}
	if got := cfg.UpgradeKey(); got != "pools[1].upgrade.withMaintenance" {
		t.Errorf("UpgradeKey = %q", got)
	}
	none, err := Parse([]byte("pools: [{name: a, nodeSelector: {pool: a}, strategy: parallel, upgrade: {withMaintenance: false}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if none.NeedsGKEAPI() != "" || none.UpgradeKey() != "" {
		t.Errorf("withMaintenance false needs the GKE API: %q %q", none.NeedsGKEAPI(), none.UpgradeKey())
	}
}

func TestParseUpgradeErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"rolling pool", "pools: [{name: a, nodeSelector: {pool: a}, upgrade: {withMaintenance: true}}]",
			"pools[0].upgrade.withMaintenance: only for strategy parallel"},
		{"zero deadline", "pools: [{name: a, nodeSelector: {pool: a}, strategy: parallel, upgrade: {withMaintenance: true, deadline: 0s}}]",
			"pools[0].upgrade.deadline: must be greater than 0"},
		{"bad deadline", "pools: [{name: a, nodeSelector: {pool: a}, strategy: parallel, upgrade: {deadline: soon}}]",
			"pools[0].upgrade.deadline"},
		{"unknown key", "pools: [{name: a, nodeSelector: {pool: a}, strategy: parallel, upgrade: {withMaintenance: true, version: '1.33'}}]",
			"pools[0].upgrade"},
		{"not a mapping", "pools: [{name: a, nodeSelector: {pool: a}, strategy: parallel, upgrade: true}]",
			"pools[0].upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, tc.yaml, tc.want) })
	}
}
