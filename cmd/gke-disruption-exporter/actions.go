package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/executor"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/gkeapi"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/silence"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/metadata"
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
	users := cmd.Flag("webhook.users", "Web-config (basic auth) users allowed to post alerts; other authenticated users get 403 (repeatable).").
		Default(webhook.DefaultUsers...).Strings()
	qps := cmd.Flag("kube.api-qps", "Requests per second to the Kubernetes API (sustained); sized so hundreds of alerts are decided in seconds.").
		Default("100").Float32()
	burst := cmd.Flag("kube.api-burst", "Requests to the Kubernetes API allowed in a burst above --kube.api-qps.").
		Default("200").Int()
	cluster := cmd.Flag("cluster", "The cluster this service acts on, as the alerts' cluster label names it: alerts for another cluster "+
		"are refused with 400. Default: the metadata server's instance/attributes/cluster-name; when unknown, every alert is accepted.").String()
	reloadInterval := cmd.Flag("config.reload-interval", "How often the policy file is checked for changes (it is also reloaded on SIGHUP).").
		Default(actions.DefaultReloadInterval.String()).Duration()
	alertmanagerURLs := cmd.Flag("alertmanager.url", "Alertmanager to keep silences in while work runs on a node, e.g. http://alertmanager:9093 (repeatable: the peers of one HA cluster; the first that answers is used).").
		URLList()
	gkeCluster := cmd.Flag("gke.cluster", "The cluster in the GKE API, for the policy keys that need it (windows fromCluster). "+
		"Default: this service's own, from the metadata server's project and cluster-location and cluster-name attributes.").
		PlaceHolder("projects/P/locations/L/clusters/C").String()
	gkeEndpoint := cmd.Flag("gke.endpoint", "GKE API endpoint, host:port (default: Google's).").String()
	gkeInsecure := cmd.Flag("gke.insecure", "Talk plaintext gRPC without credentials to --gke.endpoint (the simulator, tests).").Bool()
	alertmanagerHTTPConfig := cmd.Flag("alertmanager.http-config.file", "HTTP client configuration for Alertmanager (TLS, basic auth, bearer token, OAuth 2.0; Prometheus' http_config format).").
		ExistingFile()

	return func(ctx context.Context, logger *slog.Logger) error {
		cfg, err := config.Load(*configFile)
		if err != nil {
			return err
		}
		restConfig, err := kube.Config(*kubeconfig)
		if err != nil {
			return err
		}
		if *qps <= 0 || *burst < 1 {
			return fmt.Errorf("--kube.api-qps and --kube.api-burst must be positive")
		}
		restConfig.QPS, restConfig.Burst = *qps, *burst
		client, err := kubernetes.NewForConfig(userAgent(restConfig))
		if err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
		// The same limits, a rate limiter of its own: node writes never delay a Lease renewal.
		leaseClient, err := kubernetes.NewForConfig(userAgent(restConfig))
		if err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
		identity, err := replicaIdentity()
		if err != nil {
			return err
		}
		if *cluster == "" {
			*cluster = clusterFromMetadata(ctx, logger)
		}
		namespace := os.Getenv("POD_NAMESPACE")
		reg := selfRegistry()
		var silencer *silence.Silencer
		if len(*alertmanagerURLs) > 0 {
			httpClient, err := silence.LoadHTTPClient(*alertmanagerHTTPConfig)
			if err != nil {
				return err
			}
			silencer, err = silence.New(logger, silence.Options{URLs: *alertmanagerURLs, HTTPClient: httpClient, Registerer: reg})
			if err != nil {
				return err
			}
		} else if *alertmanagerHTTPConfig != "" {
			return fmt.Errorf("--alertmanager.http-config.file needs --alertmanager.url")
		}
		gkeClient, err := actionsGKE(ctx, logger, *gkeCluster, *gkeEndpoint, *gkeInsecure, cfg.NeedsGKEAPI())
		if err != nil {
			return err
		}
		svc, err := actions.New(logger, actions.Options{
			Config:          cfg,
			DryRun:          *dryRun,
			Client:          client,
			LeaseClient:     leaseClient,
			Identity:        identity,
			Self:            types.NamespacedName{Namespace: namespace, Name: os.Getenv("POD_NAME")},
			LeaseNamespace:  namespace,
			MaxRequestBytes: int64(*maxRequest),
			WebhookUsers:    *users,
			Silencer:        silencer,
			Cluster:         *cluster,
			Registerer:      reg,
			GKE:             gkeClient,
		})
		if err != nil {
			return err
		}
		watcher, err := actions.NewConfigWatcher(logger, *configFile, *reloadInterval, svc.SetConfig, reg)
		if err != nil {
			return err
		}
		server, err := serve.New(logger, web, name, "Acts on GKE maintenance alerts from Alertmanager under a policy.",
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, EnableOpenMetricsTextCreatedSamples: true}))
		if err != nil {
			return err
		}
		server.Mux.Handle(webhook.Path, svc.Webhook())
		logger.Info("policy loaded", "file", *configFile, "pools", len(cfg.Pools), "dry_run", *dryRun || cfg.DryRun)

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hangups := make(chan os.Signal, 1)
		signal.Notify(hangups, syscall.SIGHUP)
		defer signal.Stop(hangups)
		go watcher.Run(ctx, hangups)
		server.SetReadyFunc(svc.Ready)

		// The listener first: a replica that cannot serve webhooks must not campaign for the Lease.
		if err := server.Bind(); err != nil {
			return fmt.Errorf("serving webhooks: %w", err)
		}
		serveErr := make(chan error, 1)
		go func() { serveErr <- server.ListenAndServe(ctx); cancel() }()
		runErr := make(chan error, 1)
		go func() { runErr <- svc.Run(ctx); cancel() }()
		errServe, errRun := <-serveErr, <-runErr
		if errServe != nil {
			return fmt.Errorf("serving webhooks: %w", errServe)
		}
		return errRun
	}
}

// clusterFromMetadata is the name of the GKE cluster this replica runs in, from the metadata server
// (GCE_METADATA_HOST); a metadata server that cannot be reached yet, as right after a node starts, is retried a few
// times. "" when it cannot be read, logged: every cluster's alerts are then accepted.
func clusterFromMetadata(ctx context.Context, logger *slog.Logger) string {
	var err error
	for attempt, delay := 1, time.Second; ; attempt, delay = attempt+1, 2*delay {
		var attrs map[string]string
		attrs, err = metadata.Attributes(ctx, 3*time.Second, "cluster-name")
		if name := attrs["cluster-name"]; err == nil && name != "" {
			logger.Info("acting on this cluster's alerts only (set --cluster to choose)", "cluster", name)
			return name
		}
		if urlErr := (*url.Error)(nil); attempt == 4 || !errors.As(err, &urlErr) {
			break
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(delay):
		}
	}
	logger.Warn("own cluster unknown (no --cluster, no cluster-name attribute on the metadata server): accepting alerts of every cluster", "err", err)
	return ""
}

// actionsGKE is the actions service's client of its cluster in the GKE API: the cluster --gke.cluster names, else
// the metadata server's, looked up only when the policy needs the API (needs names the key) so that a service
// off GKE without it starts at once. Nil when the cluster is unknown; a policy that needs it is then refused.
func actionsGKE(ctx context.Context, logger *slog.Logger, name, endpoint string, insecure bool, needs string) (executor.GKE, error) {
	if insecure && endpoint == "" {
		return nil, errors.New("--gke.insecure needs --gke.endpoint")
	}
	var cluster gke.Cluster
	switch {
	case name != "":
		c, err := gke.ParseCluster(name)
		if err != nil {
			return nil, fmt.Errorf("--gke.cluster: %w", err)
		}
		cluster = c
	case needs != "":
		c, ok := ownGKECluster(ctx, logger, wait.Backoff{Duration: time.Second, Factor: 2, Steps: 4, Cap: 30 * time.Second})
		if !ok {
			return nil, ctx.Err()
		}
		cluster = c
	}
	if cluster == (gke.Cluster{}) {
		return nil, nil
	}
	cm, err := gke.NewClient(ctx, endpoint, insecure)
	if err != nil {
		return nil, err
	}
	logger.Info("GKE API client ready", "cluster", cluster.String())
	return gkeapi.New(cm, cluster), nil
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
