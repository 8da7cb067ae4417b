// Command gke-disruption-exporter turns GKE host-maintenance, preemption and interruption signals into Prometheus
// series, and acts on the alerts they raise.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
)

const name = "gke-disruption-exporter"

// runFunc runs one command until ctx ends.
type runFunc func(ctx context.Context, logger *slog.Logger) error

func main() {
	app := kingpin.New(appName(), "Prometheus exporter and actions for GKE node maintenance, preemption and interruptions.")
	// Help and --version are what was asked for: stdout, as kubectl prints them.
	app.UsageWriter(os.Stdout)
	app.Version(version.Print(appName()))
	app.HelpFlag.Short('h')
	logConfig := &promslog.Config{}
	flag.AddFlags(app, logConfig)

	commands := map[string]runFunc{
		"cluster":       clusterCommand(app),
		"node":          nodeCommand(app),
		"actions":       actionsCommand(app),
		"status":        statusCommand(app),
		"audit":         auditCommand(app),
		"report-faulty": reportFaultyCommand(app),
		"repairs reset": repairsResetCommand(app),
		"version":       versionCommand(app),
		"completion":    completionCommand(app),
	}

	selected, err := app.Parse(os.Args[1:])
	if err != nil {
		// Usage errors exit 2, so that audit's 1 always means findings.
		fmt.Fprintf(os.Stderr, "%s: error: %v, try --help\n", appName(), err)
		os.Exit(2)
	}
	logger := promslog.New(logConfig)
	// Terminal commands print their results, not a log; their failures are one line and an exit code.
	terminal := selected == "status" || selected == "audit" || selected == "report-faulty" || selected == "repairs reset" || selected == "version" || selected == "completion"
	if !terminal {
		logger.Info("starting "+name, "command", selected, "version", version.Info(), "build_context", version.BuildContext())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[selected](ctx, logger); err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, appName()+" "+selected+": "+err.Error())
			os.Exit(exit.Code)
		}
		logger.Error("exiting", "command", selected, "err", err)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
