package cloudmonitoring

import (
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// Flags are the --cloudmonitoring.* settings of a command.
type Flags struct {
	Projects    *[]string
	Clusters    *[]string
	Interval    *time.Duration
	Lookback    *time.Duration
	IdleTimeout *time.Duration
	Endpoint    *string
	Insecure    *bool
}

// AddFlags adds the --cloudmonitoring.* flags to cmd.
func AddFlags(cmd *kingpin.CmdClause) *Flags {
	return &Flags{
		Projects: cmd.Flag("cloudmonitoring.project",
			"Project whose GKE interruption metrics are read (repeatable). The collector is active only with at least one.").Strings(),
		Clusters: cmd.Flag("cloudmonitoring.cluster",
			"Only read interruptions of this cluster, location/name (a plain name matches that name in every location; "+
				"repeatable; default: the exporter's own, from the metadata server's instance/attributes/cluster-name and "+
				"cluster-location, else every cluster of the projects).").PlaceHolder("LOCATION/NAME").Strings(),
		Interval: cmd.Flag("cloudmonitoring.interval",
			"How often each interruption metric is listed per project.").Default("60s").Duration(),
		Lookback: cmd.Flag("cloudmonitoring.lookback",
			"How late a point may turn up and still be counted; GKE's points arrive up to about 150s late. Counters "+
				"count the current UTC day and move to the next this long after midnight.").Default("5m").Duration(),
		IdleTimeout: cmd.Flag("cloudmonitoring.series-idle-timeout",
			"Keep a node or node pool series with no interruption in the current day (at zero) until this long after its "+
				"latest one, then drop it.").Default("1h").Duration(),
		Endpoint: cmd.Flag("cloudmonitoring.endpoint",
			"Cloud Monitoring API endpoint, host:port (default: Google's).").String(),
		Insecure: cmd.Flag("cloudmonitoring.insecure",
			"Talk plaintext gRPC without credentials to --cloudmonitoring.endpoint (the simulator, tests).").Bool(),
	}
}

// Active reports whether a project was given.
func (f *Flags) Active() bool { return len(*f.Projects) > 0 }

// Config is the collector configuration the flags describe.
func (f *Flags) Config() (Config, error) {
	cfg := Config{
		Projects:    *f.Projects,
		Interval:    *f.Interval,
		Lookback:    *f.Lookback,
		IdleTimeout: *f.IdleTimeout,
	}
	for _, s := range *f.Clusters {
		cluster, err := ParseCluster(s)
		if err != nil {
			return Config{}, fmt.Errorf("--cloudmonitoring.cluster: %w", err)
		}
		cfg.Clusters = append(cfg.Clusters, cluster)
	}
	return cfg, nil
}
