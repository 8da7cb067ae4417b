package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
)

// actionsCommand is the Alertmanager webhook receiver that performs maintenance or drains nodes under a policy.
func actionsCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("actions", "Act on Alertmanager alerts: request GKE maintenance or drain nodes, under a policy.")
	web := serve.AddFlags(cmd, ":9844")
	kubeconfig := kubeconfigFlag(cmd)
	configFile := cmd.Flag("config.file", "Policy file (YAML).").Required().String()
	dryRun := cmd.Flag("dry-run", "Decide, log, emit events and metrics, but change nothing.").Bool()
	maxRequest := cmd.Flag("webhook.max-request-size", "Largest webhook body accepted; larger ones get 413.").
		Default("4MiB").Bytes()

	return func(ctx context.Context, logger *slog.Logger) error {
		cfg, err := config.Load(*configFile)
		if err != nil {
			return err
		}
		restConfig, err := kube.Config(*kubeconfig)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(userAgent(restConfig))
		if err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
		identity, err := replicaIdentity()
		if err != nil {
			return err
		}
		namespace := os.Getenv("POD_NAMESPACE")
		reg := selfRegistry()
		svc, err := actions.New(logger, actions.Options{
			Config:          cfg,
			DryRun:          *dryRun,
			Client:          client,
			Identity:        identity,
			Self:            types.NamespacedName{Namespace: namespace, Name: os.Getenv("POD_NAME")},
			LeaseNamespace:  namespace,
			MaxRequestBytes: int64(*maxRequest),
			Registerer:      reg,
		})
		if err != nil {
			return err
		}
		server, err := serve.New(logger, web, name, "Acts on GKE maintenance alerts from Alertmanager under a policy.",
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err != nil {
			return err
		}
		server.Mux.Handle(webhook.Path, svc.Webhook())
		logger.Info("policy loaded", "file", *configFile, "pools", len(cfg.Pools), "dry_run", *dryRun || cfg.DryRun)

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(ctx); cancel() }()
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), svc.HasSynced) {
				server.SetReady(true)
			}
		}()
		serveErr := server.ListenAndServe(ctx)
		if err := <-errc; err != nil {
			return err
		}
		return serveErr
	}
}

// replicaIdentity is the pod name (downward API POD_NAME), else the host name with a random suffix.
func replicaIdentity() (string, error) {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("naming this replica: %w", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return host + "_" + hex.EncodeToString(b), nil
}
