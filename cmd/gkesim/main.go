// Command gkesim plays GKE for the demo and for trying the exporter without a cluster: `gkesim run` drives a
// scenario on an existing API server with the metadata, Cloud Monitoring and GKE API simulators; `gkesim demo` runs the
// whole product against it (make demo).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/promslog/flag"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/demo"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/kube"
)

func main() {
	app := kingpin.New("gkesim", "Simulated GKE: node maintenance, Spot preemption, the metadata server and Cloud Monitoring.")
	app.HelpFlag.Short('h')
	logConfig := &promslog.Config{}
	flag.AddFlags(app, logConfig)
	scenario := app.Flag("scenario", "Scenario: a shipped one by name (demo) or a YAML file.").Default("demo").String()

	runCmd := app.Command("run", "Play the scenario on an existing API server; serve a metadata server per node, a dcgm-exporter per GPU node, Cloud Monitoring and the GKE API.")
	kubeconfig := runCmd.Flag("kubeconfig", "Path to a kubeconfig file (default: in-cluster, then $KUBECONFIG).").String()
	monitoringAddr := runCmd.Flag("monitoring.listen-address", "Address of the Cloud Monitoring simulator (gRPC).").
		Default("127.0.0.1:9940").String()
	gkeAddr := runCmd.Flag("gke.listen-address", "Address of the GKE API simulator (gRPC): the scenario's cluster and node pools.").
		Default("127.0.0.1:9941").String()
	metadataPort := runCmd.Flag("metadata.base-port", "Port of the first node's metadata server; the others follow (0: any free ports).").
		Default("9950").Int()
	dcgmPort := runCmd.Flag("dcgm.base-port", "Port of the first GPU node's dcgm-exporter (path /metrics); the others follow (0: any free ports).").
		Default("9400").Int()
	samplePeriod := runCmd.Flag("monitoring.sample-period", "Sampling period of the interruption metrics (GKE: 60s).").
		Default("10s").Duration()

	demoCmd := app.Command("demo", "Run the whole product against simulated GKE with a live summary (make demo).")
	exporter := demoCmd.Flag("exporter", "The gke-disruption-exporter binary.").Default("bin/gke-disruption-exporter").String()
	policy := demoCmd.Flag("policy", "Actions policy file.").Default("examples/demo-policy.yaml").String()
	alertmanager := demoCmd.Flag("alertmanager.config", "Alertmanager configuration; its actions webhook is pointed at the demo's actions service.").
		Default("examples/alertmanager.yml").String()
	refresh := demoCmd.Flag("refresh", "How often the summary is redrawn.").Default("2s").Duration()

	selected := kingpin.MustParse(app.Parse(os.Args[1:]))
	logger := promslog.New(logConfig)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sc, err := driver.LoadNamed(*scenario)
	if err == nil {
		switch selected {
		case runCmd.FullCommand():
			err = run(ctx, logger, sc, *kubeconfig, *monitoringAddr, *gkeAddr, listenPorts{metadata: *metadataPort, dcgm: *dcgmPort}, *samplePeriod)
		case demoCmd.FullCommand():
			err = demo.Run(ctx, demo.Config{
				Scenario: sc, Exporter: *exporter, PolicyFile: *policy, AlertmanagerFile: *alertmanager,
				Ports: demo.DefaultPorts, Refresh: *refresh, Out: os.Stdout,
			})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gkesim:", err)
		os.Exit(1)
	}
}

// listenPorts are the first ports of the per-node servers; zero picks free ones.
type listenPorts struct{ metadata, dcgm int }

// run plays sc on the API server of kubeconfig until ctx ends.
func run(ctx context.Context, logger *slog.Logger, sc *driver.Scenario, kubeconfig, monitoringAddr, gkeAddr string, ports listenPorts,
	samplePeriod time.Duration) error {
	cfg, err := kube.Config(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mon := monitoring.New(monitoring.Options{SamplePeriod: samplePeriod, Delay: samplePeriod})
	addr, err := mon.Start(monitoringAddr)
	if err != nil {
		return fmt.Errorf("Cloud Monitoring simulator: %w", err)
	}
	defer mon.Close()
	gkeAPI := container.New()
	clusterName := gkeAPI.SetCluster(sc.Cluster.Project, sc.Cluster.Location, sc.GKECluster())
	gkeAPIAddr, err := gkeAPI.Start(gkeAddr)
	if err != nil {
		return fmt.Errorf("GKE API simulator: %w", err)
	}
	defer gkeAPI.Close()
	d, err := driver.New(logger, driver.Options{Client: client, Scenario: sc, Monitoring: mon, GKE: gkeAPI})
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the wait: ends the metadata servers on an early return too
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Cloud Monitoring simulator: %s (--cloudmonitoring.endpoint=%s --cloudmonitoring.insecure --cloudmonitoring.project=%s)\n",
		addr, addr, sc.Cluster.Project)
	fmt.Fprintf(tw, "GKE API simulator: %s (--gke.endpoint=%s --gke.insecure --gke.cluster=%s)\n", gkeAPIAddr, gkeAPIAddr, clusterName)
	fmt.Fprintln(tw, "NODE\tPOOL\tGCE_METADATA_HOST")
	serve := func(what, node string, port int, s interface {
		Serve(context.Context, net.Listener) error
	}) (net.Addr, error) {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", what, node, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Serve(ctx, l) // ends with ctx
		}()
		return l.Addr(), nil
	}
	for i, n := range d.Nodes() {
		addr, err := serve("metadata server", n.Name, nthPort(ports.metadata, i), n.Metadata)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Name, n.Pool, addr)
	}
	gpu := 0
	for _, n := range d.Nodes() {
		if n.DCGM == nil {
			continue
		}
		if gpu == 0 {
			fmt.Fprintln(tw, "\nNODE\tDCGM_EXPORTER")
		}
		addr, err := serve("dcgm-exporter", n.Name, nthPort(ports.dcgm, gpu), n.DCGM)
		if err != nil {
			return err
		}
		gpu++
		fmt.Fprintf(tw, "%s\thttp://%s/metrics\n", n.Name, addr)
	}
	tw.Flush()
	return d.Run(ctx)
}

// nthPort is the i-th of consecutive ports from base; a zero base stays zero (a free port).
func nthPort(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}
