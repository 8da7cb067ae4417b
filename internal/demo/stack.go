// Package demo runs the whole product on one machine against simulated GKE: etcd and kube-apiserver, the GKE
// lifecycle driver with the metadata, Cloud Monitoring and GKE API simulators, the cluster exporter, a node agent
// per node, Prometheus with the mixin's rules, Alertmanager and the actions service. `make demo` shows it with a
// live summary; the end-to-end tests run the same stack on free ports.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/container"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/driver"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/gkesim/monitoring"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// Ports are the loopback ports of the stack's components; zero picks a free one. NodeAgents and Metadata are the
// first of consecutive ports, one per node; DCGM the first of consecutive ports, one per GPU node.
type Ports struct {
	Etcd, EtcdPeer, APIServer int
	Prometheus, Alertmanager  int
	Cluster, Actions          int
	Monitoring, GKE           int
	NodeAgents, Metadata      int
	DCGM                      int
}

// DefaultPorts are the demo's ports: the commands' own defaults where one of each runs, and ranges nearby.
var DefaultPorts = Ports{
	Etcd: 12379, EtcdPeer: 12380, APIServer: 16443,
	Prometheus: 9090, Alertmanager: 9093,
	Cluster: 9842, Actions: 9844,
	Monitoring: 9940, GKE: 9941,
	NodeAgents: 9850, Metadata: 9950,
	DCGM: 9400, // dcgm-exporter's own port
}

// Kube is an API server the stack uses instead of starting its own.
type Kube struct {
	Client     kubernetes.Interface
	Kubeconfig string
}

// Options configure a Stack.
type Options struct {
	Scenario *driver.Scenario
	// Exporter is the path of the gke-disruption-exporter binary.
	Exporter string
	// PolicyFile is the actions service's policy; AlertmanagerFile the Alertmanager configuration, whose actions
	// webhook is pointed at this stack's actions service.
	PolicyFile, AlertmanagerFile string
	// Rules renders the mixin; its TimeScale defaults to the scenario's.
	Rules RuleConfig
	// Interval is Prometheus' scrape and evaluation interval and the Cloud Monitoring collector's listing interval.
	Interval time.Duration
	// Kube, when set, is used instead of starting etcd and kube-apiserver.
	Kube  *Kube
	Ports Ports
	// Dir holds configuration, data and logs (logs/NAME.log); it is created, and removed by Close. A failed Start
	// leaves it for its logs.
	Dir    string
	Logger *slog.Logger
}

// Stack is the running product with its simulators.
type Stack struct {
	Driver *driver.Driver
	Client kubernetes.Interface
	// Addresses of the HTTP endpoints (host:port).
	Prometheus, Alertmanager, Cluster, Actions, Monitoring string
	// GKE is the GKE API simulator's address (gRPC), GKECluster the cluster's resource name in it.
	GKE, GKECluster string
	// NodeAgents and Metadata are the node agents' and the metadata servers' addresses by node name; DCGM the
	// dcgm-exporters' of the GPU nodes (path /metrics).
	NodeAgents, Metadata, DCGM map[string]string
	// ActionsAuth is the basic auth the actions service requires.
	ActionsAuth basicAuth
	// APIServer is the API server's URL; Kubeconfig a kubeconfig file for it.
	APIServer, Kubeconfig string
	// ActionsLease is the actions service's Lease (NAMESPACE/NAME; no POD_NAMESPACE here: the default namespace),
	// beside which its repair ledger is kept: the commands' --actions.lease.
	ActionsLease string
	// LogDir holds one log file per component.
	LogDir string

	opts      Options
	apiserver *localenv.APIServer
	monitor   *monitoring.Server
	gke       *container.Server
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	processes []*process
	driverErr chan error
	// actionsUp is closed once the actions service is ready (and Actions set).
	actionsUp chan struct{}
	// begin starts the driver's story.
	begin chan struct{}
}

// Start starts every component, waits until each is ready, and then starts the scenario's story once Prometheus
// watches the cluster, as the monitoring of a production cluster runs before anything happens to it. On error
// everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Scenario == nil || opts.Exporter == "" || opts.PolicyFile == "" || opts.AlertmanagerFile == "" {
		return nil, errors.New("a scenario, the exporter binary, a policy file and an Alertmanager configuration are required")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Rules.TimeScale == 0 {
		opts.Rules.TimeScale = opts.Scenario.TimeScale
	}
	if opts.Rules.MinFor == 0 {
		opts.Rules.MinFor = 3 * opts.Interval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Stack{opts: opts, LogDir: filepath.Join(opts.Dir, "logs"), NodeAgents: map[string]string{},
		Metadata: map[string]string{}, DCGM: map[string]string{}, driverErr: make(chan error, 1), actionsUp: make(chan struct{}),
		begin: make(chan struct{})}
	if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// On error the files stay: the error names a component's log.
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := s.startKube(opts); err != nil {
		return nil, err
	}
	if err := s.startSimulators(runCtx, opts); err != nil {
		return nil, err
	}
	if err := s.startExporters(ctx, opts); err != nil {
		return nil, err
	}
	if err := s.startPrometheusAndAlertmanager(ctx, opts); err != nil {
		return nil, err
	}
	if err := s.startStory(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stack) startKube(opts Options) error {
	if opts.Kube != nil {
		s.Client, s.Kubeconfig = opts.Kube.Client, opts.Kube.Kubeconfig
		return nil
	}
	opts.Logger.Info("starting etcd and kube-apiserver (built on first use: several minutes)")
	api, err := localenv.StartAPIServer(localenv.APIServerOptions{
		Port: opts.Ports.APIServer, EtcdPort: opts.Ports.Etcd, EtcdPeerPort: opts.Ports.EtcdPeer})
	if err != nil {
		return err
	}
	s.apiserver = api
	s.Client, s.Kubeconfig, s.APIServer = api.Client, api.Kubeconfig, api.Config.Host
	return nil
}

// startSimulators starts the Cloud Monitoring and GKE API simulators, one metadata server per node, and the
// driver, and waits until the driver has registered the cluster; its story waits for startStory.
func (s *Stack) startSimulators(ctx context.Context, opts Options) error {
	// Points are sampled and published once per listing interval, as GKE samples once per collector interval.
	s.monitor = monitoring.New(monitoring.Options{SamplePeriod: opts.Interval, Delay: opts.Interval})
	addr, err := s.monitor.Start(loopback(opts.Ports.Monitoring))
	if err != nil {
		return fmt.Errorf("starting the Cloud Monitoring simulator: %w", err)
	}
	s.Monitoring = addr
	sc := opts.Scenario
	s.gke = container.New()
	s.GKECluster = s.gke.SetCluster(sc.Cluster.Project, sc.Cluster.Location, sc.GKECluster())
	if s.GKE, err = s.gke.Start(loopback(opts.Ports.GKE)); err != nil {
		return fmt.Errorf("starting the GKE API simulator: %w", err)
	}
	d, err := driver.New(opts.Logger.With("component", "gke"), driver.Options{
		Client: s.Client, Scenario: sc, Monitoring: s.monitor, GKE: s.gke, Reporter: s.ReportFaulty, Begin: s.begin})
	if err != nil {
		return err
	}
	s.Driver = d
	for i, n := range d.Nodes() {
		l, err := net.Listen("tcp", loopback(offset(opts.Ports.Metadata, i)))
		if err != nil {
			return fmt.Errorf("metadata server of %s: %w", n.Name, err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = n.Metadata.Serve(ctx, l) // ends when ctx does
		}()
		s.Metadata[n.Name] = l.Addr().String()
	}
	if err := s.serveDCGM(ctx, d, opts.Ports.DCGM); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.driverErr <- d.Run(ctx)
	}()
	select {
	case <-d.Registered():
		return nil
	case err := <-s.driverErr:
		return fmt.Errorf("GKE driver: %w", err)
	case <-time.After(2 * time.Minute):
		return errors.New("the GKE driver did not register the cluster within 2 minutes")
	}
}

// startStory waits until Prometheus watches the cluster, every target scraped and up and every rule evaluated
// since, and then starts the driver's story: what happens at its start is seen as it happens, however long the
// components took to start. Story time runs hundreds of times faster than the wall clock, so a few seconds of a
// slow start would otherwise be hours of the story nobody watched.
func (s *Stack) startStory(ctx context.Context) error {
	if err := s.waitWatching(ctx, time.Minute); err != nil {
		return err
	}
	close(s.begin)
	select {
	case <-s.Driver.Started():
		return nil
	case err := <-s.driverErr:
		return fmt.Errorf("GKE driver: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitWatching polls Prometheus until every target has answered a scrape and every rule has been evaluated after
// that.
func (s *Stack) waitWatching(ctx context.Context, timeout time.Duration) error {
	prom, err := s.PrometheusAPI()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var up time.Time // when every target was first seen up
	for {
		problem := ""
		if up.IsZero() {
			if problem = targetsDown(ctx, prom); problem == "" {
				up = time.Now()
				problem = "rules not evaluated yet"
			}
		} else {
			problem = rulesNotEvaluatedSince(ctx, prom, up)
		}
		if problem == "" {
			return nil
		}
		if msg := s.Exited(); msg != "" {
			return errors.New(msg)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Prometheus does not watch the cluster after %v: %s", timeout, problem)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), errors.New("waiting for Prometheus' first scrapes and evaluations"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// targetsDown names a target Prometheus has not scraped successfully yet, or returns "".
func targetsDown(ctx context.Context, prom promv1.API) string {
	targets, err := prom.Targets(ctx)
	if err != nil {
		return err.Error()
	}
	if len(targets.Active) == 0 {
		return "no targets"
	}
	for _, t := range targets.Active {
		if t.Health != promv1.HealthGood {
			return fmt.Sprintf("target %s %s %s", t.ScrapeURL, t.Health, t.LastError)
		}
	}
	return ""
}

// rulesNotEvaluatedSince names a rule Prometheus has not evaluated since t, or returns "".
func rulesNotEvaluatedSince(ctx context.Context, prom promv1.API, t time.Time) string {
	rules, err := prom.Rules(ctx, nil)
	if err != nil {
		return err.Error()
	}
	if len(rules.Groups) == 0 {
		return "no rule groups"
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			var name string
			var last time.Time
			switch r := r.(type) {
			case promv1.RecordingRule:
				name, last = r.Name, r.LastEvaluation
			case promv1.AlertingRule:
				name, last = r.Name, r.LastEvaluation
			}
			if !last.After(t) {
				return fmt.Sprintf("rule %s of group %s last evaluated %s", name, g.Name, last.Format(time.RFC3339Nano))
			}
		}
	}
	return ""
}

// serveDCGM serves each GPU node's dcgm-exporter on its own port from base, as Prometheus scrapes the pods of its
// DaemonSet one by one.
func (s *Stack) serveDCGM(ctx context.Context, d *driver.Driver, base int) error {
	i := 0
	for _, n := range d.Nodes() {
		if n.DCGM == nil {
			continue
		}
		l, err := net.Listen("tcp", loopback(offset(base, i)))
		if err != nil {
			return fmt.Errorf("dcgm-exporter of %s: %w", n.Name, err)
		}
		i++
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = n.DCGM.Serve(ctx, l) // ends when ctx does
		}()
		s.DCGM[n.Name] = l.Addr().String()
	}
	return nil
}

// startExporters starts the cluster exporter, a node agent per node (each reading its node's metadata server) and
// the actions service, and waits until all are ready.
func (s *Stack) startExporters(ctx context.Context, opts Options) error {
	actionsAddr, err := listenAddress(opts.Ports.Actions)
	if err != nil {
		return err
	}
	am, err := pointAlertmanagerAt(opts.AlertmanagerFile, "http://"+actionsAddr+"/webhook")
	if err != nil {
		return err
	}
	s.ActionsAuth = am.auth
	webCfg, err := webConfig(am.auth)
	if err != nil {
		return err
	}
	clientCfg, err := yaml.Marshal(map[string]any{"basic_auth": am.auth})
	if err != nil {
		return err
	}
	files := map[string][]byte{"alertmanager.yml": am.content, "actions-web-config.yml": webCfg, "actions-client.yml": clientCfg}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(opts.Dir, name), content, 0o600); err != nil {
			return err
		}
	}

	type ready struct {
		p    *process
		url  string
		auth *basicAuth
	}
	var waits []ready
	run := func(name, addr string, env []string, args ...string) error {
		p, err := startProcess(name, s.LogDir, opts.Exporter, env, append(args, "--web.listen-address="+addr)...)
		if err != nil {
			return err
		}
		s.processes = append(s.processes, p)
		w := ready{p: p, url: "http://" + addr + "/-/ready"}
		if name == "actions" {
			w.auth = &s.ActionsAuth
		}
		waits = append(waits, w)
		return nil
	}

	s.Cluster, err = listenAddress(opts.Ports.Cluster)
	if err != nil {
		return err
	}
	sc := opts.Scenario
	if err := run("cluster", s.Cluster, nil, "cluster",
		"--kubeconfig="+s.Kubeconfig,
		"--cloudmonitoring.project="+sc.Cluster.Project,
		// The simulated cluster is named here: no metadata server answers for the exporter's own VM.
		"--cloudmonitoring.cluster="+sc.Cluster.Location+"/"+sc.Cluster.Name,
		"--cloudmonitoring.endpoint="+s.Monitoring,
		"--cloudmonitoring.insecure",
		"--cloudmonitoring.interval="+opts.Interval.String(),
		"--cloudmonitoring.lookback="+(30*opts.Interval).String(),
		"--gke.endpoint="+s.GKE,
		"--gke.insecure",
		"--gke.cluster="+s.GKECluster,
		"--gke.interval="+opts.Interval.String(),
	); err != nil {
		return err
	}
	for i, n := range s.Driver.Nodes() {
		addr, err := listenAddress(offset(opts.Ports.NodeAgents, i))
		if err != nil {
			return err
		}
		s.NodeAgents[n.Name] = addr
		// Stopped one after another at the end of the demo, the agents exit at SIGTERM rather than serve on.
		if err := run("node-"+n.Name, addr, []string{"GCE_METADATA_HOST=" + s.Metadata[n.Name]}, "node",
			"--node.name="+n.Name, "--web.shutdown-delay=0s"); err != nil {
			return err
		}
	}
	s.Actions = actionsAddr
	s.ActionsLease = metav1.NamespaceDefault + "/" + actions.DefaultLeaseName
	if err := run("actions", s.Actions, nil, "actions",
		"--kubeconfig="+s.Kubeconfig,
		"--cluster="+sc.Cluster.Name,
		"--config.file="+opts.PolicyFile,
		"--web.config.file="+filepath.Join(opts.Dir, "actions-web-config.yml"),
	); err != nil {
		return err
	}
	for _, w := range waits {
		if err := w.p.waitReady(ctx, w.url, w.auth, 2*time.Minute); err != nil {
			return err
		}
	}
	close(s.actionsUp)
	return nil
}

// ReportFaulty is the operator running `gke-disruption-exporter report-faulty` against the actions service (the
// scenario's report events), its output in logs/report-faulty.log.
func (s *Stack) ReportFaulty(ctx context.Context, node string, behavior gke.FaultBehavior) error {
	select {
	case <-s.actionsUp:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.runCommand(ctx, "report-faulty", node, "--behavior="+string(behavior), "--actions.url=http://"+s.Actions,
		"--actions.http-config-file="+filepath.Join(s.opts.Dir, "actions-client.yml"), "--timeout=1m")
}

// ResetRepairs is the operator running `gke-disruption-exporter repairs reset` against the cluster: every tripped
// circuit breaker of GPU-fault repairs is reset. Its output is in logs/repairs.log.
func (s *Stack) ResetRepairs(ctx context.Context) error {
	return s.runCommand(ctx, "repairs", "reset", "--kubeconfig="+s.Kubeconfig, "--actions.lease="+s.ActionsLease, "--by=demo-operator")
}

// runCommand runs the exporter's command (its first argument) with args as an operator would, its output appended
// to logs/COMMAND.log.
func (s *Stack) runCommand(ctx context.Context, command string, args ...string) error {
	log, err := os.OpenFile(filepath.Join(s.LogDir, command+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, s.opts.Exporter, append([]string{command}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s (see %s): %w", command, strings.Join(args, " "), log.Name(), err)
	}
	return nil
}

// startPrometheusAndAlertmanager builds them on first use, renders the rules and starts both.
func (s *Stack) startPrometheusAndAlertmanager(ctx context.Context, opts Options) error {
	promBin, err := localenv.Tool("prometheus")
	if err != nil {
		return err
	}
	amBin, err := localenv.Tool("alertmanager")
	if err != nil {
		return err
	}
	if s.Alertmanager, err = listenAddress(opts.Ports.Alertmanager); err != nil {
		return err
	}
	if s.Prometheus, err = listenAddress(opts.Ports.Prometheus); err != nil {
		return err
	}
	ruleFile := filepath.Join(opts.Dir, "rules.yaml")
	if err := RenderRules(ruleFile, opts.Rules); err != nil {
		return err
	}
	params := prometheusParams{
		Interval:     opts.Interval,
		RuleFile:     ruleFile,
		Alertmanager: s.Alertmanager,
		Cluster:      s.Cluster,
		Actions:      s.Actions,
		ActionsAuth:  s.ActionsAuth,
	}
	for _, n := range s.Driver.Nodes() {
		params.NodeAgents = append(params.NodeAgents, nodeTarget{Address: s.NodeAgents[n.Name], Node: n.Name})
		if addr, ok := s.DCGM[n.Name]; ok {
			params.DCGM = append(params.DCGM, nodeTarget{Address: addr, Node: n.Name})
		}
	}
	promConfig, err := prometheusConfig(params)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "prometheus.yml"), promConfig, 0o600); err != nil {
		return err
	}

	am, err := startProcess("alertmanager", s.LogDir, amBin, nil,
		"--config.file="+filepath.Join(opts.Dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(opts.Dir, "alertmanager"),
		"--web.listen-address="+s.Alertmanager,
		"--cluster.listen-address=", // a single Alertmanager: no gossip port
	)
	if err != nil {
		return err
	}
	s.processes = append(s.processes, am)
	prom, err := startProcess("prometheus", s.LogDir, promBin, nil,
		"--config.file="+filepath.Join(opts.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(opts.Dir, "prometheus"),
		"--web.listen-address="+s.Prometheus,
	)
	if err != nil {
		return err
	}
	s.processes = append(s.processes, prom)
	if err := am.waitReady(ctx, "http://"+s.Alertmanager+"/-/ready", nil, time.Minute); err != nil {
		return err
	}
	return prom.waitReady(ctx, "http://"+s.Prometheus+"/-/ready", nil, time.Minute)
}

// Close stops every component, the simulators and the driver, and removes Dir.
func (s *Stack) Close() {
	s.Stop()
	os.RemoveAll(s.opts.Dir)
}

// Stop stops every component and leaves the files (configuration, data and logs) in place.
func (s *Stack) Stop() {
	for i := len(s.processes) - 1; i >= 0; i-- {
		s.processes[i].Stop(5 * time.Second)
	}
	s.cancel()
	s.wg.Wait()
	if s.monitor != nil {
		s.monitor.Close()
	}
	if s.gke != nil {
		s.gke.Close()
	}
	if s.apiserver != nil {
		s.apiserver.Stop()
	}
}

// Exited names a component process that has stopped on its own, with the end of its log, or returns "".
func (s *Stack) Exited() string {
	for _, p := range s.processes {
		if p.Exited() {
			return fmt.Sprintf("%s exited (%v); log %s:\n%s", p.name, p.Err(), p.logPath, p.logTail())
		}
	}
	return ""
}

// Available returns p with every port that is taken on loopback now replaced by zero (a free one), and which
// components moved. A range (NodeAgents, Metadata: nodes consecutive ports) moves as a whole when one of its
// ports is taken.
func (p Ports) Available(nodes int) (Ports, []string) {
	var moved []string
	check := func(name string, port *int, count int) {
		if *port == 0 {
			return
		}
		for i := range count {
			l, err := net.Listen("tcp", loopback(*port+i))
			if err != nil {
				moved = append(moved, fmt.Sprintf("%s (%d)", name, *port+i))
				*port = 0
				return
			}
			l.Close()
		}
	}
	check("etcd", &p.Etcd, 1)
	check("etcd peer", &p.EtcdPeer, 1)
	check("kube-apiserver", &p.APIServer, 1)
	check("Prometheus", &p.Prometheus, 1)
	check("Alertmanager", &p.Alertmanager, 1)
	check("cluster exporter", &p.Cluster, 1)
	check("actions", &p.Actions, 1)
	check("Cloud Monitoring simulator", &p.Monitoring, 1)
	check("GKE API simulator", &p.GKE, 1)
	check("node agents", &p.NodeAgents, nodes)
	check("metadata simulators", &p.Metadata, nodes)
	check("dcgm-exporters", &p.DCGM, nodes) // GPU nodes are fewer: checks a few ports more than it needs
	return p, moved
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// offset is the i-th of consecutive ports from base; a zero base stays zero (a free port).
func offset(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}

// listenAddress is the loopback address with port, or with a port free now when port is zero. The component binds
// it a moment later; nothing else on the machine is expected to take it in between.
func listenAddress(port int) (string, error) {
	if port != 0 {
		return loopback(port), nil
	}
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return loopback(p), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
