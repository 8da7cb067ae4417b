package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/cli"
)

// pluginBinary is the name kubectl runs as `kubectl gke-disruption`.
const pluginBinary = "kubectl-gke_disruption"

// appName is how the binary is invoked: as itself, or as the kubectl plugin.
func appName() string {
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == pluginBinary {
		return "kubectl gke-disruption"
	}
	return name
}

// kubectlFlags adds kubectl's client flags to a terminal command, with kubectl's names, meaning and kubeconfig
// precedence (cli-runtime's ConfigFlags): --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster.
func kubectlFlags(cmd *kingpin.CmdClause) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	cmd.Flag("kubeconfig", "Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster, as kubectl).").StringVar(f.KubeConfig)
	cmd.Flag("context", "The kubeconfig context to use.").StringVar(f.Context)
	cmd.Flag("cluster", "The kubeconfig cluster to use.").StringVar(f.ClusterName)
	cmd.Flag("user", "The kubeconfig user to use.").StringVar(f.AuthInfoName)
	cmd.Flag("server", "The address and port of the Kubernetes API server.").Short('s').StringVar(f.APIServer)
	cmd.Flag("tls-server-name", "Server name to use for server certificate validation.").StringVar(f.TLSServerName)
	cmd.Flag("insecure-skip-tls-verify", "Do not check the server's certificate (insecure).").BoolVar(f.Insecure)
	cmd.Flag("certificate-authority", "Path to a certificate file for the certificate authority.").StringVar(f.CAFile)
	cmd.Flag("client-certificate", "Path to a client certificate file for TLS.").StringVar(f.CertFile)
	cmd.Flag("client-key", "Path to a client key file for TLS.").StringVar(f.KeyFile)
	cmd.Flag("token", "Bearer token for authentication to the API server.").StringVar(f.BearerToken)
	cmd.Flag("as", "Username to impersonate for the operation (a user or a service account).").StringVar(f.Impersonate)
	cmd.Flag("as-group", "Group to impersonate for the operation; repeat it for several.").StringsVar(f.ImpersonateGroup)
	cmd.Flag("as-uid", "UID to impersonate for the operation.").StringVar(f.ImpersonateUID)
	cmd.Flag("username", "Username for basic authentication to the API server.").StringVar(f.Username)
	cmd.Flag("password", "Password for basic authentication to the API server.").StringVar(f.Password)
	cmd.Flag("request-timeout", "How long to wait for one request to the API server (1s, 2m, 3h; 0 waits forever).").
		Default("30s").StringVar(f.Timeout)
	return f
}

// outputFlags adds -o and --no-headers.
func outputFlags(cmd *kingpin.CmdClause, formats string) (output *string, noHeaders *bool) {
	output = cmd.Flag("output", "Output format: "+formats+", yaml, name, jsonpath=…, jsonpath-file=…, go-template=…, custom-columns=… or custom-columns-file=… (kubectl's).").
		Short('o').Default(cli.OutputTable).String()
	noHeaders = cmd.Flag("no-headers", "Print the table's rows only (also custom-columns).").Bool()
	return output, noHeaders
}

// cliClient is the status and audit commands' client, from kubectl's client flags.
func cliClient(flags *genericclioptions.ConfigFlags) (*rest.Config, *kubernetes.Clientset, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, nil, &cli.ExitError{Code: cli.ExitAPI, Err: fmt.Errorf("loading kubeconfig: %s", strings.TrimSpace(err.Error()))}
	}
	cfg = userAgent(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, &cli.ExitError{Code: cli.ExitAPI, Err: err}
	}
	return cfg, client, nil
}

// versionCommand prints the version, as --version does.
func versionCommand(app *kingpin.Application) runFunc {
	app.Command("version", "Print the version.")
	return func(ctx context.Context, _ *slog.Logger) error {
		fmt.Fprintln(os.Stdout, version.Print(appName()))
		return nil
	}
}

// fishCompletion asks the binary for completions, as kingpin's bash and zsh scripts do.
const fishCompletion = `function __{{.App.Name}}_complete
    set -l args (commandline -opc)
    {{.App.Name}} --completion-bash $args[2..-1] (commandline -ct)
end
complete -c {{.App.Name}} -f -a '(__{{.App.Name}}_complete)'
`

// completionCommand prints a shell completion script: source <(gke-disruption-exporter completion bash).
func completionCommand(app *kingpin.Application) runFunc {
	cmd := app.Command("completion", "Print the completion script of a shell: bash, zsh or fish (e.g. source <("+name+" completion bash)).")
	shell := cmd.Arg("shell", "bash, zsh or fish.").Required().Enum("bash", "zsh", "fish")
	return func(context.Context, *slog.Logger) error {
		script := map[string]string{"bash": kingpin.BashCompletionTemplate, "zsh": kingpin.ZshCompletionTemplate, "fish": fishCompletion}[*shell]
		return template.Must(template.New(*shell).Parse(script)).Execute(os.Stdout, map[string]any{"App": map[string]string{"Name": name}})
	}
}
