package demo

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"text/template"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
)

// basicAuth is a user and password, as Alertmanager's http_config writes them.
type basicAuth struct {
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// alertmanagerConfig is the Alertmanager configuration file made to send to this stack's actions service.
type alertmanagerConfig struct {
	content []byte
	// auth is the basic auth of the actions receiver, which the actions service's web config must accept.
	auth basicAuth
}

// pointAlertmanagerAt reads an Alertmanager configuration and points its webhook receivers that post to /webhook
// at actionsURL, keeping everything else. It needs exactly one such receiver, with basic auth.
func pointAlertmanagerAt(path, actionsURL string) (*alertmanagerConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var doc struct {
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL        string `yaml:"url"`
				HTTPConfig struct {
					BasicAuth *basicAuth `yaml:"basic_auth"`
				} `yaml:"http_config"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	if err := root.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var auth *basicAuth
	found := 0
	for _, r := range doc.Receivers {
		for _, w := range r.WebhookConfigs {
			if u, err := url.Parse(w.URL); err == nil && u.Path == "/webhook" {
				found++
				auth = w.HTTPConfig.BasicAuth
			}
		}
	}
	switch {
	case found != 1:
		return nil, fmt.Errorf("%s: want one webhook receiver posting to /webhook (the actions service), found %d", path, found)
	case auth == nil || auth.Username == "" || auth.Password == "":
		return nil, fmt.Errorf("%s: the actions receiver needs http_config.basic_auth with username and password", path)
	}
	replaceWebhookURL(&root, actionsURL)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	return &alertmanagerConfig{content: out.Bytes(), auth: *auth}, nil
}

// replaceWebhookURL sets every url: value that posts to /webhook to actionsURL.
func replaceWebhookURL(n *yaml.Node, actionsURL string) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "url" && v.Kind == yaml.ScalarNode {
				if u, err := url.Parse(v.Value); err == nil && u.Path == "/webhook" {
					v.Value = actionsURL
				}
			}
		}
	}
	for _, c := range n.Content {
		replaceWebhookURL(c, actionsURL)
	}
}

// webConfig is an exporter-toolkit web configuration file that accepts auth's user and password.
func webConfig(auth basicAuth) ([]byte, error) {
	// The lowest cost bcrypt allows: each request pays it.
	hash, err := bcrypt.GenerateFromPassword([]byte(auth.Password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(map[string]any{"basic_auth_users": map[string]string{auth.Username: string(hash)}})
}

//go:embed prometheus.yml.tmpl
var prometheusTemplateText string

var prometheusTemplate = template.Must(template.New("prometheus.yml").Parse(prometheusTemplateText))

// prometheusParams fill the Prometheus configuration template.
type prometheusParams struct {
	Interval     time.Duration
	RuleFile     string
	Alertmanager string
	Cluster      string
	Actions      string
	ActionsAuth  basicAuth
	NodeAgents   []nodeTarget
	// DCGM are the GPU nodes' dcgm-exporters.
	DCGM []nodeTarget
}

type nodeTarget struct{ Address, Node string }

func prometheusConfig(p prometheusParams) ([]byte, error) {
	if p.Interval <= 0 {
		return nil, errors.New("the scrape interval must be positive")
	}
	var b bytes.Buffer
	if err := prometheusTemplate.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
