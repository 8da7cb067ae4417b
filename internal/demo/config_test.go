package demo

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	promconfig "github.com/prometheus/prometheus/config"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	actionsconfig "github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

func examplePath(name string) string { return filepath.Join(localenv.RepoRoot(), "examples", name) }

// TestDemoFilesFitTogether: the demo uses the example policy and Alertmanager configuration as they are, with the
// shipped demo scenario.
func TestDemoFilesFitTogether(t *testing.T) {
	policy, err := actionsconfig.Load(examplePath("demo-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policy.Windows.Weekly) != 0 || policy.WindowsFromCluster() {
		t.Error("the demo's story runs around the clock in minutes: the policy must not restrict actions to windows")
	}
	sc, err := driver.LoadNamed("demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policy.Pools {
		pool := p.NodeSelector[driver.LabelNodePool]
		if sc.Pool(pool) == nil {
			t.Errorf("policy pool %s selects node pool %q, which the demo scenario does not have", p.Name, pool)
		}
	}
	am, err := pointAlertmanagerAt(examplePath("alertmanager.yml"), "http://127.0.0.1:1234/webhook")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(am.content), "url: http://127.0.0.1:1234/webhook") || strings.Contains(string(am.content), ":9844") {
		t.Errorf("webhook not pointed at the actions service:\n%s", am.content)
	}
	if !strings.Contains(string(am.content), "repeat_interval: 5s") {
		t.Errorf("other settings lost:\n%s", am.content)
	}
	if am.auth.Username == "" || am.auth.Password == "" {
		t.Errorf("basic auth %+v", am.auth)
	}
	if want := "http://127.0.0.1:9844/webhook"; !strings.Contains(readFile(t, examplePath("alertmanager.yml")), want) {
		t.Errorf("the example must post to %s, where the demo runs the actions service", want)
	}
}

// TestDemoOpportunisticMaintenance: the reschedulable maintenance of the demo's opportunistic pool is far enough out
// that the perform-maintenance alert does not fire during the story's day, and a Job leaves some of the pool's nodes
// idle and finishes on the others: what happens there is the actions service's own opportunistic maintenance.
func TestDemoOpportunisticMaintenance(t *testing.T) {
	policy, err := actionsconfig.Load(examplePath("demo-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := driver.LoadNamed("demo")
	if err != nil {
		t.Fatal(err)
	}
	expr := renderRules(t, Rules(sc.TimeScale))["GKENodeMaintenanceWindowApproaching"].Expr
	m := regexp.MustCompile(`time\(\) \+ (\d+)\)`).FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("no lead time in the perform-maintenance alert:\n%s", expr)
	}
	leadSeconds, _ := strconv.Atoi(m[1])
	lead := time.Duration(leadSeconds) * time.Second
	wall := func(story driver.Duration) time.Duration { return time.Duration(float64(story) / sc.TimeScale) }
	day := wall(driver.Duration(24 * time.Hour))
	pools := 0
	for _, p := range policy.Pools {
		o := p.Opportunistic
		if o == nil {
			continue
		}
		pools++
		name := p.NodeSelector[driver.LabelNodePool]
		pool := sc.Pool(name)
		if pool == nil {
			t.Fatalf("policy pool %s selects node pool %q, which the demo scenario does not have", p.Name, name)
		}
		if o.MinNodes >= pool.Nodes {
			t.Errorf("pool %s: minNodes %d of %d nodes leaves none to maintain", p.Name, o.MinNodes, pool.Nodes)
		}
		events := 0
		for _, e := range sc.Events {
			if e.Maintenance == nil || e.Maintenance.NodePool != name {
				continue
			}
			events++
			window := wall(e.At) + wall(e.Maintenance.WindowStartsIn)
			switch {
			case !e.Maintenance.CanReschedule:
				t.Errorf("pool %s: maintenance at %s cannot be rescheduled: nothing to start early", name, time.Duration(e.At))
			case window-lead < day:
				t.Errorf("pool %s: the perform-maintenance alert fires %s into the story, within its day (%s)", name, window-lead, day)
			case wall(e.Maintenance.WindowStartsIn) > time.Duration(o.Window):
				t.Errorf("pool %s: maintenance %s out, beyond the opportunistic window %s", name, wall(e.Maintenance.WindowStartsIn), time.Duration(o.Window))
			}
		}
		if events == 0 {
			t.Errorf("pool %s: no maintenance in the story", name)
		}
		finishing := false
		for _, w := range sc.Workloads {
			if w.RunFor > 0 && len(w.Nodes) > 0 && len(w.Nodes) < pool.Nodes && slices.Contains(w.NodePools, name) {
				finishing = true
			}
		}
		if !finishing {
			t.Errorf("pool %s: no Job that leaves a node idle and finishes on the others", name)
		}
	}
	if pools == 0 {
		t.Error("the demo policy has no pool with opportunistic maintenance")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPointAlertmanagerAtBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ config, want string }{
		"not yaml":  {"route: [", "yaml"},
		"no hook":   {"receivers: [{name: a}]\n", "want one webhook receiver posting to /webhook"},
		"two hooks": {"receivers: [{name: a, webhook_configs: [{url: 'http://a/webhook'}, {url: 'http://b/webhook'}]}]\n", "found 2"},
		"no auth":   {"receivers: [{name: a, webhook_configs: [{url: 'http://a/webhook'}]}]\n", "needs http_config.basic_auth"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "am.yml")
			if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := pointAlertmanagerAt(path, "http://x/webhook"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := pointAlertmanagerAt(filepath.Join(t.TempDir(), "missing.yml"), "http://x/webhook"); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWebConfigAcceptsThePassword(t *testing.T) {
	b, err := webConfig(basicAuth{Username: "alertmanager", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(cfg.Users["alertmanager"]), []byte("secret")) != nil {
		t.Errorf("web config %s does not accept the password", b)
	}
}

func TestPrometheusConfigLoads(t *testing.T) {
	b, err := prometheusConfig(prometheusParams{
		Interval: time.Second, RuleFile: "/tmp/rules.yaml", Alertmanager: "127.0.0.1:9093",
		Cluster: "127.0.0.1:9842", Actions: "127.0.0.1:9844", ActionsAuth: basicAuth{Username: "u", Password: "p"},
		NodeAgents: []nodeTarget{{Address: "127.0.0.1:9850", Node: "gke-a-0"}, {Address: "127.0.0.1:9851", Node: "gke-a-1"}},
		DCGM:       []nodeTarget{{Address: "127.0.0.1:9400", Node: "gke-a-0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := promconfig.Load(string(b), promslog.NewNopLogger())
	if err != nil {
		t.Fatalf("Prometheus refuses the configuration: %v\n%s", err, b)
	}
	jobs := map[string]int{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = len(sc.ServiceDiscoveryConfigs)
	}
	for _, job := range []string{"gke-disruption-exporter-cluster", "gke-disruption-exporter-node", "gke-disruption-exporter-actions", "dcgm-exporter"} {
		if _, ok := jobs[job]; !ok {
			t.Errorf("no job %s, which the mixin's rules select", job)
		}
	}
	// A story without GPU nodes has no dcgm-exporter to scrape: the job stays, empty, and Prometheus takes it.
	b, err = prometheusConfig(prometheusParams{Interval: time.Second, RuleFile: "/tmp/rules.yaml", Alertmanager: "127.0.0.1:9093",
		Cluster: "127.0.0.1:9842", Actions: "127.0.0.1:9844", ActionsAuth: basicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := promconfig.Load(string(b), promslog.NewNopLogger()); err != nil {
		t.Errorf("Prometheus refuses the configuration without GPU nodes: %v\n%s", err, b)
	}
	if _, err := prometheusConfig(prometheusParams{}); err == nil {
		t.Error("a zero interval must be refused")
	}
}

// TestDemoUpgradeCollidesWithMaintenance: the demo has a pool whose auto-upgrade is announced to start after host
// maintenance already booked for it, within the mixin's collision window (7 days), and whose upgrade then plays:
// GKENodePoolUpgradeCollidesWithMaintenance has something to fire on, and the surge upgrade something to show.
func TestDemoUpgradeCollidesWithMaintenance(t *testing.T) {
	sc, err := driver.LoadNamed("demo")
	if err != nil {
		t.Fatal(err)
	}
	const collisionWindow = 7 * 24 * time.Hour
	maintenance := map[string]time.Duration{} // the first window start of each pool, story time
	for _, e := range sc.Events {
		if m := e.Maintenance; m != nil {
			if w, ok := maintenance[m.NodePool]; !ok || time.Duration(e.At+m.WindowStartsIn) < w {
				maintenance[m.NodePool] = time.Duration(e.At + m.WindowStartsIn)
			}
		}
	}
	collides := false
	for _, e := range sc.Events {
		a := e.AutoUpgrade
		if a == nil {
			continue
		}
		window, ok := maintenance[a.NodePool]
		start := time.Duration(e.At + a.StartsIn)
		if !ok || time.Duration(e.At) >= window || start < window || a.StartsIn > driver.Duration(collisionWindow) {
			continue
		}
		for _, u := range sc.Events {
			if u.Upgrade != nil && u.Upgrade.NodePool == a.NodePool && u.Upgrade.Version == a.Version && time.Duration(u.At) >= start {
				collides = true
			}
		}
	}
	if !collides {
		t.Error("no pool of the demo has an auto-upgrade announced after booked host maintenance and then played")
	}
}
