package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
)

// Config is what `gkesim demo` runs.
type Config struct {
	Scenario                     *driver.Scenario
	Exporter                     string
	PolicyFile, AlertmanagerFile string
	Ports                        Ports
	// Refresh is how often the summary is redrawn.
	Refresh time.Duration
	// Out receives the summary; when it is a terminal the summary is redrawn in place.
	Out io.Writer
}

// Run starts the stack, prints where everything is, and shows the live summary until ctx ends; then it stops
// everything and removes its files. A default port that is taken is replaced by a free one. When a component
// fails, its files stay and the error names its log.
func Run(ctx context.Context, cfg Config) (err error) {
	dir, err := os.MkdirTemp("", "gke-disruption-demo-")
	if err != nil {
		return err
	}
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		os.RemoveAll(dir)
		return err
	}
	logFile, err := os.Create(filepath.Join(logDir, "gke-simulator.log"))
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, nil))
	progress := slog.New(slog.NewTextHandler(cfg.Out, nil))

	progress.Info("starting the demo stack; the first run builds kube-apiserver, etcd, Prometheus and Alertmanager (several minutes)",
		"dir", dir)
	nodes := 0
	for _, p := range cfg.Scenario.NodePools {
		nodes += p.Nodes
	}
	ports, moved := cfg.Ports.Available(nodes)
	if len(moved) > 0 {
		progress.Info("ports in use; these components listen on free ports instead (printed below)", "taken", strings.Join(moved, ", "))
	}
	stack, err := Start(ctx, Options{
		Scenario:         cfg.Scenario,
		Exporter:         cfg.Exporter,
		PolicyFile:       cfg.PolicyFile,
		AlertmanagerFile: cfg.AlertmanagerFile,
		Rules:            Rules(cfg.Scenario.TimeScale),
		Interval:         time.Second,
		Ports:            ports,
		Dir:              dir,
		Logger:           logger,
	})
	if err != nil {
		return fmt.Errorf("%w\n(the demo's files stay in %s; remove them when done)", err, dir)
	}
	defer func() {
		if err != nil {
			stack.Stop()
			err = fmt.Errorf("%w\n(the demo's files stay in %s; remove them when done)", err, dir)
			return
		}
		stack.Close()
	}()

	header := endpoints(stack, cfg)
	fmt.Fprint(cfg.Out, header)
	terminal := isTerminal(cfg.Out)
	ticker := time.NewTicker(cfg.Refresh)
	defer ticker.Stop()
	for {
		if msg := stack.Exited(); msg != "" {
			return fmt.Errorf("a component stopped: %s", msg)
		}
		sum := stack.Summarize(ctx)
		if terminal {
			fmt.Fprint(cfg.Out, "\033[H\033[2J"+header)
		}
		sum.Render(cfg.Out, cfg.Scenario.TimeScale)
		fmt.Fprintln(cfg.Out)
		select {
		case <-ctx.Done():
			fmt.Fprintln(cfg.Out, "stopping the demo and removing", dir)
			return nil
		case <-ticker.C:
		}
	}
}

// Rules are the demo's settings of the mixin, in story time. The stuck threshold is raised: the demo's wall-clock
// maintenance steps, seen in story time, take longer than a real host maintenance.
func Rules(scale float64) RuleConfig {
	return RuleConfig{TimeScale: scale, Config: map[string]any{"maintenanceStuckThreshold": "12h"}}
}

func endpoints(s *Stack, cfg Config) string {
	return fmt.Sprintf(`gke-disruption-exporter demo: %d nodes of cluster %s, story played %gx faster (Ctrl-C stops and cleans up)

  Prometheus     http://%s  (alerts: /alerts, API: /api/v1/alerts)
  Alertmanager   http://%s
  cluster        http://%s/metrics
  node agents    http://%s/metrics ... (%d, one per node)
  dcgm-exporters http://%s/metrics ... (%d, one per GPU node)
  actions        http://%s/metrics (basic auth %s, password in %s)
  Cloud Monitoring simulator  %s (gRPC)
  GKE API simulator           %s (gRPC, cluster %s)
  kube-apiserver %s   KUBECONFIG=%s kubectl get nodes
  status         %s status --kubeconfig=%s --config.file=%s --actions.lease=%s --watch
  audit          %s audit --kubeconfig=%s
  logs           %s

`, len(s.NodeAgents), cfg.Scenario.Cluster.Name, cfg.Scenario.TimeScale,
		s.Prometheus, s.Alertmanager, s.Cluster, firstNodeAgent(s), len(s.NodeAgents), firstDCGM(s), len(s.DCGM), s.Actions, s.ActionsAuth.Username,
		cfg.AlertmanagerFile, s.Monitoring, s.GKE, s.GKECluster, s.APIServer, s.Kubeconfig, cfg.Exporter, s.Kubeconfig, cfg.PolicyFile, s.ActionsLease, cfg.Exporter, s.Kubeconfig, s.LogDir)
}

func firstNodeAgent(s *Stack) string {
	nodes := s.Driver.Nodes()
	if len(nodes) == 0 {
		return ""
	}
	return s.NodeAgents[nodes[0].Name]
}

func firstDCGM(s *Stack) string {
	for _, n := range s.Driver.Nodes() {
		if addr, ok := s.DCGM[n.Name]; ok {
			return addr
		}
	}
	return ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
