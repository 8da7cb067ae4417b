package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"golang.org/x/term"
	k8smetadata "k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
)

// statusCommand prints the fleet's maintenance table from the API server.
func statusCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("status", "Print the nodes with maintenance pending or in progress, from the API server.")
	clientFlags := kubectlFlags(cmd)
	output, noHeaders := outputFlags(cmd, "table, wide, json")
	selector := cmd.Flag("selector", "Label selector over nodes (kubectl's -l).").Short('l').String()
	pool := cmd.Flag("pool", "Only the nodes of this node pool.").String()
	all := cmd.Flag("all", "Every node, not only those with something pending or in progress.").Bool()
	nodes := cmd.Arg("node", "Only these nodes, whatever their state (as kubectl get nodes NAME...).").Strings()
	watch := cmd.Flag("watch", "Redraw whenever a node, or the workloads on it, change.").Short('w').Bool()
	policyFile := cmd.Flag("config.file", "The actions policy file (YAML) to report budgets against; default: the policy of --actions.deployment.").String()
	actionsDeployment := cmd.Flag("actions.deployment", "The actions service's Deployment (NAMESPACE/NAME), whose policy ConfigMap gives the budgets.").
		Default(cli.DefaultActionsDeployment).String()
	actionsLease := cmd.Flag("actions.lease", "The actions service's Lease (NAMESPACE/NAME), beside which its repair ledger says which repair circuit breakers are tripped.").
		Default(cli.DefaultActionsLease).String()

	return func(ctx context.Context, _ *slog.Logger) error {
		if err := cli.CheckOutput(*output, true); err != nil {
			return err
		}
		cfg, client, err := cliClient(clientFlags)
		if err != nil {
			return err
		}
		meta, err := k8smetadata.NewForConfig(cfg)
		if err != nil {
			return cliExit(err)
		}
		opts := cli.StatusOptions{Selector: *selector, Pool: *pool, All: *all, Nodes: *nodes, Output: *output,
			NoHeaders: *noHeaders, Now: time.Now, PolicyFile: *policyFile, ActionsDeployment: *actionsDeployment,
			ActionsLease: *actionsLease}
		if *watch {
			return cliExit(cli.Watch(ctx, client, meta, os.Stdout, term.IsTerminal(int(os.Stdout.Fd())), opts))
		}
		return cliExit(cli.Status(ctx, client, meta, os.Stdout, opts))
	}
}

// cliExit gives every failure of a terminal command an exit code: 1 belongs to audit's findings, so other errors
// exit 2.
func cliExit(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*cli.ExitError); ok {
		return err
	}
	return &cli.ExitError{Code: cli.ExitAPI, Err: err}
}
