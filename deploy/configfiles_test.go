package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
)

// TestInstallsConfigFiles checks what the actions service reads at start-up in every install: the policy parses
// under the same strict rules, the web config is valid, and Prometheus's scrape password is one the web config
// accepts.
func TestInstallsConfigFiles(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			m := build(t, dir)
			tmpl := m.podTemplate(t, actionsWorkload)
			c := tmpl.Spec.Containers[0]

			policy := mountedData(t, m, tmpl.Spec, c, flagValue(c.Args, "--config.file"), "ConfigMap")
			if _, err := config.Parse([]byte(policy)); err != nil {
				t.Errorf("policy: %v", err)
			}

			webConfig := mountedData(t, m, tmpl.Spec, c, flagValue(c.Args, "--web.config.file"), "Secret")
			users := checkWebConfig(t, webConfig)
			var scrape corev1.Secret
			decode(t, m.must(t, "Secret", namespace, "gke-disruption-exporter-actions-scrape"), &scrape)
			user, password := string(scrape.Data["username"]), string(scrape.Data["password"])
			if err := bcrypt.CompareHashAndPassword([]byte(users[user]), []byte(password)); err != nil {
				t.Errorf("the web config does not accept the scrape credentials of user %q: %v", user, err)
			}
		})
	}
}

// checkWebConfig validates an exporter-toolkit web config as the service would at start-up and returns its users'
// password hashes.
func checkWebConfig(t *testing.T, content string) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := web.Validate(path); err != nil {
		t.Fatalf("web config: %v", err)
	}
	var parsed struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal([]byte(content), &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Users) == 0 {
		t.Fatal("web config has no basic_auth_users: the webhook would take requests from anyone")
	}
	return parsed.Users
}
