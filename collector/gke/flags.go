package gke

import (
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// Flags are the --gke.* settings of a command.
type Flags struct {
	Cluster  *string
	Interval *time.Duration
	Endpoint *string
	Insecure *bool
}

// AddFlags adds the --gke.* flags to cmd.
func AddFlags(cmd *kingpin.CmdClause) *Flags {
	return &Flags{
		Cluster: cmd.Flag("gke.cluster",
			"The cluster whose versions, upgrades and maintenance policy are read from the GKE API (default: the "+
				"exporter's own, from the metadata server's project and cluster-location and cluster-name attributes).").
			PlaceHolder("projects/P/locations/L/clusters/C").String(),
		Interval: cmd.Flag("gke.interval",
			"How often the GKE API is read: one GetCluster, one ListOperations and one FetchNodePoolUpgradeInfo per node pool.").
			Default("5m").Duration(),
		Endpoint: cmd.Flag("gke.endpoint", "GKE API endpoint, host:port (default: Google's).").String(),
		Insecure: cmd.Flag("gke.insecure",
			"Talk plaintext gRPC without credentials to --gke.endpoint (the simulator, tests).").Bool(),
	}
}

// Config is the collector configuration the flags describe. Its Cluster is zero when --gke.cluster is not given:
// the caller finds it on the metadata server.
func (f *Flags) Config() (Config, error) {
	cfg := Config{Interval: *f.Interval}
	if *f.Cluster != "" {
		cluster, err := ParseCluster(*f.Cluster)
		if err != nil {
			return Config{}, fmt.Errorf("--gke.cluster: %w", err)
		}
		cfg.Cluster = cluster
	}
	switch {
	case cfg.Interval <= 0:
		return Config{}, fmt.Errorf("--gke.interval %v: must be positive", cfg.Interval)
	case *f.Insecure && *f.Endpoint == "":
		return Config{}, errors.New("--gke.insecure needs --gke.endpoint")
	}
	return cfg, nil
}
