package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/config"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
)

// reportFaultyCommand asks the actions service to report a node's host as faulty through GKE.
func reportFaultyCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("report-faulty", "Ask the actions service to report a node's host as faulty through GKE (label cloud.google.com/fault-behavior), once, under its policy's repair budget.")
	node := cmd.Arg("node", "The node whose host is faulty.").Required().String()
	behavior := cmd.Flag("behavior", "How the host misbehaves: XID, SDC (silent data corruption), PERFORMANCE or unspecified (any case).").
		Default(string(gke.FaultUnspecified)).String()
	actionsURL := cmd.Flag("actions.url", "Base URL of the actions service (its leader; e.g. through kubectl port-forward svc/gke-disruption-exporter-actions 9844).").
		Default("http://localhost:9844").URL()
	httpConfig := cmd.Flag("actions.http-config-file", "Prometheus HTTP client config file (basic_auth of a user in the service's --webhook.users, tls_config) for the request.").
		ExistingFile()
	timeout := cmd.Flag("timeout", "How long to keep asking while the replica reached is not the leader.").Default("30s").Duration()

	return func(ctx context.Context, logger *slog.Logger) error {
		fault, ok := gke.ParseFaultBehavior(*behavior)
		if !ok {
			return &cli.ExitError{Code: cli.ExitAPI, Err: fmt.Errorf("--behavior %q is not one of XID, SDC, PERFORMANCE, unspecified", *behavior)}
		}
		client := http.DefaultClient
		if *httpConfig != "" {
			cfg, _, err := config.LoadHTTPConfigFile(*httpConfig)
			if err != nil {
				return &cli.ExitError{Code: cli.ExitAPI, Err: err}
			}
			if client, err = config.NewClientFromConfig(*cfg, "report-faulty"); err != nil {
				return &cli.ExitError{Code: cli.ExitAPI, Err: err}
			}
		}
		return cli.ReportFaulty(ctx, os.Stdout, cli.ReportOptions{
			Node: *node, Behavior: fault, ActionsURL: (*actionsURL).String(), Client: client,
			Timeout: *timeout, Now: time.Now(),
		})
	}
}
