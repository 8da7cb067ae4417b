package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	gcemetadata "cloud.google.com/go/compute/metadata"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	k8smetadata "k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/cloudmonitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/nodes"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
)

// clusterCommand is the per-cluster exporter: Node objects, Cloud Monitoring interruptions and the GKE API.
func clusterCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("cluster", "Export node maintenance signals of the whole cluster (one per cluster).")
	web := serve.AddFlags(cmd, ":9842")
	kubeconfig := kubeconfigFlag(cmd)
	enableNodes := collector.EnableFlag(cmd, "nodes", true)
	enableWorkloads := collector.EnableFlag(cmd, "workloads", true)
	readinessFlags := workloads.AddFlags(cmd)
	enableCloudMonitoring := collector.EnableFlag(cmd, "cloudmonitoring", true)
	cloudMonitoring := cloudmonitoring.AddFlags(cmd)
	enableGKE := collector.EnableFlag(cmd, "gke", true)
	gkeFlags := gke.AddFlags(cmd)

	return func(ctx context.Context, logger *slog.Logger) error {
		setMemoryLimit(logger)
		reg := selfRegistry()
		collectors := map[string]collector.Collector{}
		var synced []cache.InformerSynced
		if *enableNodes || *enableWorkloads {
			cfg, err := kube.Config(*kubeconfig)
			if err != nil {
				return err
			}
			cfg = userAgent(cfg)
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("creating Kubernetes client: %w", err)
			}
			var nc *nodes.Collector
			var workloadsOpts []workloads.Option
			if *enableNodes {
				if nc, err = nodes.New(logger.With("collector", "nodes"), client, reg); err != nil {
					return err
				}
				collectors["nodes"] = nc
				synced = append(synced, nc.HasSynced)
				// One watch of the Nodes for both collectors: a Node is decoded and read once, not twice.
				workloadsOpts = append(workloadsOpts, workloads.WithNodeWatch(nc))
			}
			if *enableWorkloads {
				meta, err := k8smetadata.NewForConfig(cfg)
				if err != nil {
					return fmt.Errorf("creating Kubernetes metadata client: %w", err)
				}
				wc, err := workloads.New(logger.With("collector", "workloads"), client, meta, readinessFlags.Config(), reg,
					workloadsOpts...)
				if err != nil {
					return err
				}
				go wc.Run(ctx)
				collectors["workloads"] = wc
				synced = append(synced, wc.HasSynced)
			}
			if nc != nil {
				go nc.Run(ctx) // after the workloads collector has joined its watch
			}
		}
		if *enableCloudMonitoring && cloudMonitoring.Active() {
			cfg, err := cloudMonitoring.Config()
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("cloudmonitoring collector: %w", err)
			}
			client, err := cloudmonitoring.NewClient(ctx, *cloudMonitoring.Endpoint, *cloudMonitoring.Insecure)
			if err != nil {
				return err
			}
			defer client.Close()
			// Until its own cluster is known the collector does not list (listing every cluster instead would mix
			// other clusters into this one's pools) and fails every scrape, saying why.
			pending := &pendingCollector{reason: errors.New("own cluster not known yet (metadata server)")}
			collectors["cloudmonitoring"] = pending
			go func() {
				cfg := cfg
				if len(cfg.Clusters) == 0 {
					var ok bool
					if cfg.Clusters, ok = ownCluster(ctx, logger, clusterBackoff); !ok {
						return
					}
					cfg.ClusterSource = cloudmonitoring.SourceMetadata
					if len(cfg.Clusters) == 0 {
						cfg.ClusterSource = cloudmonitoring.SourceAll
					}
				}
				mc, err := cloudmonitoring.New(logger.With("collector", "cloudmonitoring"), client, cfg, reg)
				if err != nil {
					logger.Error("cloudmonitoring collector", "err", err)
					pending.set(nil, err)
					return
				}
				pending.set(mc, nil)
				mc.Run(ctx)
			}()
		} else if *enableCloudMonitoring {
			logger.Info("cloudmonitoring collector inactive: no --cloudmonitoring.project given")
		}
		if *enableGKE {
			cfg, err := gkeFlags.Config()
			if err != nil {
				return err
			}
			pending := &pendingCollector{reason: errors.New("own cluster not known yet (metadata server)")}
			collectors["gke"] = pending
			go func() {
				cfg := cfg
				if cfg.Cluster == (gke.Cluster{}) {
					var ok bool
					if cfg.Cluster, ok = ownGKECluster(ctx, logger, clusterBackoff); !ok {
						return
					}
					if cfg.Cluster == (gke.Cluster{}) {
						pending.set(nil, nil) // not on GKE: nothing to read, nothing failing
						return
					}
				}
				// Made only for a known cluster: where there is none, the exporter needs no Google credentials.
				client, err := gke.NewClient(ctx, *gkeFlags.Endpoint, *gkeFlags.Insecure)
				if err != nil {
					logger.Error("gke collector", "err", err)
					pending.set(nil, err)
					return
				}
				defer client.Close()
				gc, err := gke.New(logger.With("collector", "gke"), client, cfg, reg)
				if err != nil {
					logger.Error("gke collector", "err", err)
					pending.set(nil, err)
					return
				}
				pending.set(gc, nil)
				gc.Run(ctx)
			}()
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

// pendingCollector stands in for a collector still being set up: a scrape fails with its reason until it is set.
// Set to no collector and no reason, it serves nothing and fails nothing (a collector with nothing to read).
type pendingCollector struct {
	mu     sync.Mutex
	c      collector.Collector
	reason error
}

func (p *pendingCollector) set(c collector.Collector, reason error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.c, p.reason = c, reason
}

func (p *pendingCollector) Update(ch chan<- prometheus.Metric) error {
	p.mu.Lock()
	c, reason := p.c, p.reason
	p.mu.Unlock()
	if c == nil {
		return reason
	}
	return c.Update(ch)
}

// clusterBackoff paces the own-cluster look-ups: a GKE node's metadata server can refuse or fail requests for a
// while as a pod starts.
var clusterBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 30 * time.Second, Steps: math.MaxInt32}

// noServerAttempts is how many look-ups finding no metadata server at all (nothing listening, no such host), or
// something at its address that refuses (metadata.Refused), mean the exporter does not run on GCE.
const noServerAttempts = 5

// ownClusterAttributes is the GKE cluster the exporter runs in, as the metadata server's instance attributes
// cluster-name and cluster-location say. It retries, with backoff, for as long as a metadata server is there but
// fails or is slow; until then waiting says what is held back. The name is empty when the metadata server answers
// that the VM has no cluster-name attribute, or when none is found, or only a refusal, after a few attempts (not on
// GCE): noServer then says why. ok is false when ctx ended first.
func ownClusterAttributes(ctx context.Context, logger *slog.Logger, backoff wait.Backoff, waiting string) (name, location string,
	noServer error, ok bool) {
	for attempt := 1; ; attempt++ {
		attrs, err := metadata.Attributes(ctx, 3*time.Second, "cluster-name", "cluster-location")
		switch {
		case err == nil:
			return attrs["cluster-name"], attrs["cluster-location"], nil, true
		case (metadata.NoServer(err) || metadata.Refused(err)) && attempt >= noServerAttempts:
			return "", "", err, true
		}
		delay := backoff.Step()
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "own cluster not known yet; "+waiting, "attempt", attempt, "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return "", "", nil, false
		case <-time.After(delay):
		}
	}
}

// ownCluster is the cluster whose interruptions are listed by default: the exporter's own, else (not on GKE)
// every cluster of the projects (none returned). ok is false when ctx ended first.
func ownCluster(ctx context.Context, logger *slog.Logger, backoff wait.Backoff) (clusters []cloudmonitoring.Cluster, ok bool) {
	name, location, noServer, ok := ownClusterAttributes(ctx, logger, backoff, "Cloud Monitoring not listed until it is")
	switch {
	case !ok:
		return nil, false
	case name != "":
		cluster := cloudmonitoring.Cluster{Location: location, Name: name}
		logger.Info("listing the interruptions of this cluster only (set --cloudmonitoring.cluster to choose)",
			"cluster_name", cluster.Name, "cluster_location", cluster.Location)
		return []cloudmonitoring.Cluster{cluster}, true
	case noServer == nil:
		logger.Warn("own cluster unknown (no --cloudmonitoring.cluster, the metadata server has no cluster-name " +
			"attribute): listing the interruptions of every cluster of the projects")
	default:
		logger.Warn("own cluster unknown (no --cloudmonitoring.cluster, no usable metadata server): listing the "+
			"interruptions of every cluster of the projects", "err", noServer)
	}
	return nil, true
}

// ownGKECluster is the cluster the GKE API collector reads by default: the exporter's own, with its project from
// the metadata server. It is zero when the exporter does not run on GKE; ok is false when ctx ended first.
func ownGKECluster(ctx context.Context, logger *slog.Logger, backoff wait.Backoff) (cluster gke.Cluster, ok bool) {
	name, location, noServer, ok := ownClusterAttributes(ctx, logger, backoff, "the GKE API not read until it is")
	switch {
	case !ok:
		return gke.Cluster{}, false
	case name == "" && noServer == nil:
		logger.Info("gke collector inactive: the metadata server has no cluster-name attribute (not a GKE node); " +
			"set --gke.cluster to read a cluster")
		return gke.Cluster{}, true
	case name == "":
		logger.Info("gke collector inactive: no --gke.cluster and no usable metadata server", "err", noServer)
		return gke.Cluster{}, true
	}
	// A metadata server that named the cluster also knows the project: wait for it as long as it takes.
	client := gcemetadata.NewClient(&http.Client{Timeout: 3 * time.Second})
	for {
		project, err := client.ProjectIDWithContext(ctx)
		if err == nil && project != "" {
			cluster = gke.Cluster{Project: project, Location: location, Name: name}
			logger.Info("reading this cluster from the GKE API (set --gke.cluster to choose)", "cluster", cluster.String())
			return cluster, true
		}
		delay := backoff.Step()
		logger.Warn("project ID not known yet; the GKE API not read until it is", "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return gke.Cluster{}, false
		case <-time.After(delay):
		}
	}
}
