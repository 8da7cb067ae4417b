package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/metadata"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/serve"
)

// nodeCommand is the per-node agent: this VM's maintenance and preemption notices from the GCE metadata server
// (at $GCE_METADATA_HOST when set).
func nodeCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("node", "Export this node's GCE metadata maintenance and preemption notices (one per node).")
	web := serve.AddFlags(cmd, ":9843")
	nodeName := cmd.Flag("node.name", "Kubernetes name of this node, the value of label node.").
		Envar("NODE_NAME").Required().String()
	shutdownDelay := cmd.Flag("web.shutdown-delay",
		"After SIGTERM, keep watching and serving metrics this long, so that the final scrapes of a preempted Spot "+
			"node see gce_instance_preempted 1. Keep it inside the pod's termination grace period (critical pods get "+
			"15s of a Spot node's 30s notice).").Default("10s").Duration()

	return func(ctx context.Context, logger *slog.Logger) error {
		ctx = outlive(ctx, *shutdownDelay, logger)
		reg := selfRegistry()
		mc, err := metadata.New(logger.With("collector", "metadata"), *nodeName, reg, metadata.Config{})
		if err != nil {
			return err
		}
		go mc.Run(ctx)

		server, err := serve.New(logger, web, name, "GCE maintenance and preemption notices of this node.",
			collector.NewSet(logger, reg, map[string]collector.Collector{"metadata": mc}))
		if err != nil {
			return err
		}
		go func() {
			select {
			case <-mc.Ready():
				logger.Info("every metadata path answered")
				server.SetReady(true)
			case <-ctx.Done():
			}
		}()
		return server.ListenAndServe(ctx)
	}
}

// outlive returns a context that ends delay after parent does: the time the agent goes on serving after SIGTERM.
func outlive(parent context.Context, delay time.Duration, logger *slog.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	go func() {
		<-parent.Done()
		if delay > 0 {
			logger.Info("stopping; serving metrics until the shutdown delay ends", "delay", delay.String())
			time.Sleep(delay)
		}
		cancel()
	}()
	return ctx
}
