package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"
	k8smetadata "k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// auditCommand prints the readiness findings and fails a pipeline on those at or above --fail-on.
func auditCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("audit", "Print the readiness findings of workloads on GPU/TPU/Spot nodes; exit 1 when one is at or above --fail-on.")
	clientFlags := kubectlFlags(cmd)
	output, noHeaders := outputFlags(cmd, "table, json")
	failOn := cmd.Flag("fail-on", "Exit 1 when a finding has this severity or a higher one: warning or error.").
		Default(string(readiness.Warning)).Enum(string(readiness.Warning), string(readiness.Error))
	namespace := cmd.Flag("namespace", "Only the workloads of this namespace (the cluster's own checks always count).").Short('n').String()
	allNamespaces := cmd.Flag("all-namespaces", "Every namespace's workloads: the default, as kubectl's -A.").Short('A').Bool()
	selector := cmd.Flag("selector", "Label selector over nodes (kubectl's -l): only the pods on the nodes it matches, and their node pools.").Short('l').String()
	policyFile := cmd.Flag("config.file", "The actions policy file (YAML) to check against GKE's maintenance handler; default: the policy of --actions.deployment.").String()
	actionsDeployment := cmd.Flag("actions.deployment", "The actions service's Deployment (NAMESPACE/NAME), whose policy ConfigMap is checked.").
		Default(cli.DefaultActionsDeployment).String()
	readinessFlags := workloads.AddFlags(cmd)

	return func(ctx context.Context, logger *slog.Logger) error {
		if err := cli.CheckOutput(*output, false); err != nil {
			return err
		}
		if *allNamespaces && *namespace != "" {
			return &cli.ExitError{Code: cli.ExitAPI, Err: errors.New("--all-namespaces (-A) and --namespace (-n) exclude each other")}
		}
		cfg, client, err := cliClient(clientFlags)
		if err != nil {
			return err
		}
		meta, err := k8smetadata.NewForConfig(cfg)
		if err != nil {
			return cliExit(err)
		}
		return cliExit(cli.Audit(ctx, logger, client, meta, os.Stdout, cli.AuditOptions{
			FailOn: readiness.Severity(*failOn), Output: *output, NoHeaders: *noHeaders, Namespace: *namespace, Config: readinessFlags.Config(),
			Selector: *selector, PolicyFile: *policyFile, ActionsDeployment: *actionsDeployment,
		}))
	}
}
