package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
)

// repairsResetCommand resets tripped circuit breakers of GPU-fault repairs in the actions service's ledger.
func repairsResetCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("repairs", "The actions service's GPU-fault repairs.").
		Command("reset", "Reset tripped circuit breakers of GPU-fault repairs (repair.maxPerHour): the actions service repairs again, counting repairs from now.")
	clientFlags := kubectlFlags(cmd)
	lease := cmd.Flag("actions.lease", "The actions service's Lease (NAMESPACE/NAME); its repair ledger is the ConfigMap NAME-repairs beside it.").
		Default(cli.DefaultActionsLease).String()
	pools := cmd.Flag("pool", "Reset this policy pool's breaker (repeatable); with neither --pool nor --cluster-wide, every tripped breaker.").Strings()
	clusterWide := cmd.Flag("cluster-wide", "Reset the cluster-wide breaker.").Bool()
	by := cmd.Flag("by", "Who resets, as recorded in the ledger.").Default(os.Getenv("USER")).String()

	return func(ctx context.Context, _ *slog.Logger) error {
		_, client, err := cliClient(clientFlags)
		if err != nil {
			return err
		}
		return cliExit(cli.ResetBreakers(ctx, client, os.Stdout, cli.ResetOptions{Lease: *lease, Pools: *pools,
			ClusterWide: *clusterWide, By: *by, Now: time.Now()}))
	}
}
