package actions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// DefaultReloadInterval is how often the policy file is checked for changes.
const DefaultReloadInterval = 5 * time.Second

// ConfigWatcher reloads the policy file when its content changes and on a signal (SIGHUP). A file that does not
// load keeps the running policy; gke_disruption_actions_config_last_reload_successful says which happened last.
type ConfigWatcher struct {
	logger   *slog.Logger
	path     string
	interval time.Duration
	apply    func(*config.Config) error
	success  prometheus.Gauge
	loaded   [sha256.Size]byte
}

// NewConfigWatcher watches path, which was loaded as initial; apply receives each new policy.
func NewConfigWatcher(logger *slog.Logger, path string, interval time.Duration, apply func(*config.Config) error, reg prometheus.Registerer) (*ConfigWatcher, error) {
	w := &ConfigWatcher{
		logger: logger, path: path, interval: interval, apply: apply,
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace,
			Name:      "actions_config_last_reload_successful",
			Help:      "1 when the last load of the policy file succeeded; 0 when it failed and the previous policy stays in force.",
		}),
	}
	if err := reg.Register(w.success); err != nil {
		return nil, err
	}
	w.success.Set(1)
	if data, err := os.ReadFile(path); err == nil {
		w.loaded = sha256.Sum256(data)
	}
	return w, nil
}

// Run checks the file every interval and on every value from signals, until ctx ends.
func (w *ConfigWatcher) Run(ctx context.Context, signals <-chan os.Signal) {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			w.reload(false)
		case <-signals:
			w.reload(true)
		}
	}
}

// reload loads the file if it changed (or always, when forced by a signal).
func (w *ConfigWatcher) reload(force bool) {
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.failed(err)
		return
	}
	sum := sha256.Sum256(data)
	if !force && bytes.Equal(sum[:], w.loaded[:]) {
		return
	}
	cfg, err := config.Parse(data)
	if err != nil {
		w.loaded = sum // do not log the same bad content every interval
		w.failed(err)
		return
	}
	w.loaded = sum
	if err := w.apply(cfg); err != nil {
		w.failed(err)
		return
	}
	w.success.Set(1)
	w.logger.Info("policy reloaded", "file", w.path, "pools", len(cfg.Pools), "paused", cfg.Paused, "dry_run", cfg.DryRun)
}

func (w *ConfigWatcher) failed(err error) {
	w.success.Set(0)
	w.logger.Error("policy not reloaded; the running policy stays in force", "file", w.path, "err", err)
}
