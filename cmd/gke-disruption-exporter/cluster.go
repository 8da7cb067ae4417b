package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
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

// ownCluster is the GKE cluster the exporter runs in, from the metadata server's instance attributes, so that by
// default only its own interruptions are listed. It retries, with backoff, for as long as a metadata server is
// there but fails or is slow; it settles for every cluster (none returned) only when the metadata server answers
// that the VM has no cluster-name attribute, or when none is found, or only a refusal, after a few attempts (not on
// GCE). ok is false
// when ctx ended first.
func ownCluster(ctx context.Context, logger *slog.Logger, backoff wait.Backoff) (clusters []cloudmonitoring.Cluster, ok bool) {
	for attempt := 1; ; attempt++ {
		attrs, err := metadata.Attributes(ctx, 3*time.Second, "cluster-name", "cluster-location")
		switch name := attrs["cluster-name"]; {
		case err == nil && name != "":
			cluster := cloudmonitoring.Cluster{Location: attrs["cluster-location"], Name: name}
			logger.Info("listing the interruptions of this cluster only (set --cloudmonitoring.cluster to choose)",
				"cluster_name", cluster.Name, "cluster_location", cluster.Location)
			return []cloudmonitoring.Cluster{cluster}, true
		case err == nil:
			logger.Warn("own cluster unknown (no --cloudmonitoring.cluster, the metadata server has no cluster-name " +
				"attribute): listing the interruptions of every cluster of the projects")
			return nil, true
		case (metadata.NoServer(err) || metadata.Refused(err)) && attempt >= noServerAttempts:
			logger.Warn("own cluster unknown (no --cloudmonitoring.cluster, no usable metadata server): listing the "+
				"interruptions of every cluster of the projects", "err", err)
			return nil, true
		}
		delay := backoff.Step()
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "own cluster not known yet; Cloud Monitoring not listed until it is",
			"attempt", attempt, "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(delay):
		}
	}
}
