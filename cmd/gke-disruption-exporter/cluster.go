package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"k8s.io/client-go/kubernetes"
	k8smetadata "k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/cloudmonitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/nodes"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
)

// clusterCommand is the per-cluster exporter: Node objects and Cloud Monitoring interruptions.
func clusterCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("cluster", "Export node maintenance signals of the whole cluster (one per cluster).")
	web := serve.AddFlags(cmd, ":9842")
	kubeconfig := kubeconfigFlag(cmd)
	enableNodes := collector.EnableFlag(cmd, "nodes", true)
	enableWorkloads := collector.EnableFlag(cmd, "workloads", true)
	readinessFlags := workloads.AddFlags(cmd)
	enableCloudMonitoring := collector.EnableFlag(cmd, "cloudmonitoring", true)
	cloudMonitoring := cloudmonitoring.AddFlags(cmd)

	return func(ctx context.Context, logger *slog.Logger) error {
		setMemoryLimit(logger)
		reg := selfRegistry()
		collectors := map[string]collector.Collector{}
		var synced []cache.InformerSynced
		if *enableNodes {
			cfg, err := kube.Config(*kubeconfig)
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(userAgent(cfg))
			if err != nil {
				return fmt.Errorf("creating Kubernetes client: %w", err)
			}
			nc, err := nodes.New(logger.With("collector", "nodes"), client, reg)
			if err != nil {
				return err
			}
			go nc.Run(ctx)
			collectors["nodes"] = nc
			synced = append(synced, nc.HasSynced)
		}
		if *enableWorkloads {
			cfg, err := kube.Config(*kubeconfig)
			if err != nil {
				return err
			}
			cfg = userAgent(cfg)
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("creating Kubernetes client: %w", err)
			}
			meta, err := k8smetadata.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("creating Kubernetes metadata client: %w", err)
			}
			wc, err := workloads.New(logger.With("collector", "workloads"), client, meta, readinessFlags.Config())
			if err != nil {
				return err
			}
			go wc.Run(ctx)
			collectors["workloads"] = wc
			synced = append(synced, wc.HasSynced)
		}
		if *enableCloudMonitoring && cloudMonitoring.Active() {
			client, err := cloudmonitoring.NewClient(ctx, *cloudMonitoring.Endpoint, *cloudMonitoring.Insecure)
			if err != nil {
				return err
			}
			defer client.Close()
			cfg := cloudMonitoring.Config()
			if len(cfg.Clusters) == 0 {
				cfg.Clusters, cfg.Location = ownCluster(ctx, logger)
			}
			mc, err := cloudmonitoring.New(logger.With("collector", "cloudmonitoring"), client, cfg, reg)
			if err != nil {
				return fmt.Errorf("cloudmonitoring collector: %w", err)
			}
			go mc.Run(ctx)
			collectors["cloudmonitoring"] = mc
		} else if *enableCloudMonitoring {
			logger.Info("cloudmonitoring collector inactive: no --cloudmonitoring.project given")
		}

		server, err := serve.New(logger, web, name, "GKE node maintenance, preemption and interruption signals.",
			collector.NewSet(logger, reg, collectors))
		if err != nil {
			return err
		}
		go func() {
			// The collectors' own HasSynced: true once every node of the initial list is stored, so ready means
			// a scrape holds the whole cluster.
			if cache.WaitForCacheSync(ctx.Done(), synced...) {
				logger.Info("initial node list synced")
				// The initial list's decoding garbage is the largest the process ever holds: give it back now
				// rather than keep it resident until the scavenger gets to it.
				debug.FreeOSMemory()
				server.SetReady(true)
			}
		}()
		return server.ListenAndServe(ctx)
	}
}

// ownCluster is the GKE cluster the exporter runs in, from the metadata server's instance attributes, so that by
// default only its own interruptions are listed; none when they cannot be read (then every cluster is listed).
func ownCluster(ctx context.Context, logger *slog.Logger) (clusters []string, location string) {
	attrs, err := metadata.Attributes(ctx, 3*time.Second, "cluster-name", "cluster-location")
	if name := attrs["cluster-name"]; err == nil && name != "" {
		logger.Info("listing the interruptions of this cluster only (set --cloudmonitoring.cluster to choose)",
			"cluster_name", name, "cluster_location", attrs["cluster-location"])
		return []string{name}, attrs["cluster-location"]
	}
	logger.Warn("own cluster unknown (no --cloudmonitoring.cluster, no cluster-name attribute on the metadata server): "+
		"listing the interruptions of every cluster of the projects", "err", err)
	return nil, ""
}
