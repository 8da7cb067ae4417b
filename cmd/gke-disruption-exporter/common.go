package main

import (
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"k8s.io/client-go/rest"
)

// kubeconfigFlag adds --kubeconfig; empty means in-cluster, then $KUBECONFIG.
func kubeconfigFlag(cmd *kingpin.CmdClause) *string {
	return cmd.Flag("kubeconfig", "Path to a kubeconfig file (default: in-cluster, then $KUBECONFIG).").String()
}

// selfRegistry holds the process's own series: build info, Go runtime and process metrics.
func selfRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector("gke_disruption_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// userAgent names the exporter in API server audit logs.
func userAgent(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = name + "/" + version.Version
	return cfg
}
