package demo

import (
	"os"
	"path/filepath"
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
	if len(policy.Windows) != 0 {
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
	for _, job := range []string{"gke-disruption-exporter-cluster", "gke-disruption-exporter-node", "gke-disruption-exporter-actions"} {
		if _, ok := jobs[job]; !ok {
			t.Errorf("no job %s, which the mixin's rules select", job)
		}
	}
	if _, err := prometheusConfig(prometheusParams{}); err == nil {
		t.Error("a zero interval must be refused")
	}
}
