package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector"
	workloadcollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// teams are the namespaces of the workloads the exporter reports in TestOverlayScrapeKeepsTeamsApart: each runs a
// Deployment of the same name on a GPU node with maintenance scheduled, with a grace period too short for it.
var teams = []string{"team-a", "team-b"}

// The labels Managed Service for Prometheus gives every target of a cluster.
const gmpProject, gmpLocation, gmpCluster = "my-project", "us-central1", "prod"

// TestOverlayScrapeKeepsTeamsApart scrapes a real cluster exporter's workload series of two teams with a real
// Prometheus configured as each overlay's scrape configuration configures it, with that overlay's rules loaded, and
// checks that the workload alerts stay one per team, each with its team's namespace. The ServiceMonitor and the
// PodMonitoring put the exporter's own namespace on its target, so Prometheus moves each series' namespace to
// exported_namespace: rules that read `namespace` would merge the teams into one alert about the exporter's.
func TestOverlayScrapeKeepsTeamsApart(t *testing.T) {
	api := testenv.StartAPIServer(t)
	exporter := startWorkloadExporter(t, api)

	for _, tc := range []struct {
		dir    string
		scrape func(t *testing.T, m manifests, target string) map[string]any
		rules  func(t *testing.T, m manifests) []any
		// namespace is the namespace label an alert about a team's workload carries.
		namespace func(team string) string
	}{
		{"overlays/prometheus-operator", operatorScrapeConfig, operatorRuleGroups, func(team string) string { return team }},
		// Managed Service for Prometheus labels every result of a namespaced Rules resource with that namespace.
		{"overlays/google-managed-prometheus", gmpScrapeConfig, gmpRuleGroups, func(string) string { return namespace }},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			m := build(t, tc.dir)
			rules, err := yaml.Marshal(map[string]any{"groups": tc.rules(t, m)})
			if err != nil {
				t.Fatal(err)
			}
			ruleFile := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(ruleFile, rules, 0o600); err != nil {
				t.Fatal(err)
			}
			config, err := yaml.Marshal(map[string]any{
				"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
				"rule_files":     []string{ruleFile},
				"scrape_configs": []any{tc.scrape(t, m, exporter)},
			})
			if err != nil {
				t.Fatal(err)
			}
			prom := promClient(t, testenv.StartPrometheus(t, string(config)))

			for _, alert := range []string{"GKEWorkloadMaintenanceScheduled", "GKEReadinessFinding"} {
				testenv.Eventually(t, time.Minute, alert+" for every team", func() error {
					got, err := alertsNamed(prom, alert)
					if err != nil {
						return err
					}
					var teamsSeen []string
					for _, a := range got {
						if a.Labels["workload"] == "" {
							continue // a finding about the cluster
						}
						team := string(a.Labels["exported_namespace"])
						teamsSeen = append(teamsSeen, team)
						if want := tc.namespace(team); team != "" && string(a.Labels["namespace"]) != want {
							t.Fatalf("%s for %s has namespace %q, want %q: %v", alert, team, a.Labels["namespace"], want, a.Labels)
						}
					}
					sort.Strings(teamsSeen)
					if !slices.Equal(teamsSeen, teams) {
						return fmt.Errorf("alerts for the teams %q, want one for each of %q: %v", teamsSeen, teams, got)
					}
					return nil
				})
			}
			// The chart ships these dashboards with either scrape configuration.
			dashboards := m.find("ConfigMap", namespace, "gke-disruption-exporter-dashboards")
			if dashboards == nil {
				dashboards = build(t, "overlays/prometheus-operator").must(t, "ConfigMap", namespace, "gke-disruption-exporter-dashboards")
			}
			checkDashboardNamespaces(t, prom, dashboards)
		})
	}
}

// dashboardVariables stand in for the dashboards' variables at their "All" values.
var dashboardVariables = strings.NewReplacer("$cluster", ".*", "$node_pool", ".*", "$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// checkDashboardNamespaces runs the queries of every dashboard table with a Namespace column and checks that the
// column shows the teams' namespaces, and only those, for every row about a workload.
func checkDashboardNamespaces(t *testing.T, prom promv1.API, configMap *unstructured.Unstructured) {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(configMap.Object, "data")
	tables := 0
	for _, name := range sortedKeys(data) {
		var d struct {
			Panels []dashboardPanel `json:"panels"`
		}
		if err := json.Unmarshal([]byte(data[name]), &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, row := range d.Panels {
			for _, p := range append([]dashboardPanel{row}, row.Panels...) {
				column := p.namespaceColumn()
				if column == "" {
					continue
				}
				tables++
				var seen []string
				for _, target := range p.Targets {
					v, _, _, err := prom.Query(context.Background(), dashboardVariables.Replace(target.Expr), time.Now())
					if err != nil {
						t.Fatalf("%s, %q: %s: %v", name, p.Title, target.Expr, err)
					}
					for _, sample := range v.(model.Vector) {
						if sample.Metric["workload"] == "" {
							continue // a finding about the cluster
						}
						ns := string(sample.Metric[model.LabelName(column)])
						if !slices.Contains(teams, ns) {
							t.Errorf("%s, %q shows namespace %q (label %s) for %v", name, p.Title, ns, column, sample.Metric)
						}
						if !slices.Contains(seen, ns) {
							seen = append(seen, ns)
						}
					}
				}
				sort.Strings(seen)
				if !slices.Equal(seen, teams) {
					t.Errorf("%s, %q shows namespaces %q, want %q", name, p.Title, seen, teams)
				}
			}
		}
	}
	if tables == 0 {
		t.Error("no dashboard table has a Namespace column")
	}
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			RenameByName map[string]string `json:"renameByName"`
		} `json:"options"`
	} `json:"transformations"`
	Panels []dashboardPanel `json:"panels"`
}

// namespaceColumn is the label a table shows as its Namespace column, or "".
func (p dashboardPanel) namespaceColumn() string {
	for _, tr := range p.Transformations {
		for label, title := range tr.Options.RenameByName {
			if tr.ID == "organize" && title == "Namespace" {
				return label
			}
		}
	}
	return ""
}

// startWorkloadExporter runs the cluster exporter's workload collector against the API server, with the two
// teams' workloads in place, behind the exporter's metrics handler, and returns the handler's host:port.
func startWorkloadExporter(t *testing.T, api *testenv.APIServer) string {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-prod-a3-4f2c1a9b-x7kq", Labels: map[string]string{
		gke.LabelNodePool: "a3", gke.LabelAccelerator: "nvidia-h100-80gb",
		gke.LabelScheduledMaintenanceTime: fmt.Sprint(time.Now().Add(48 * time.Hour).Unix()),
	}}}
	node, err := api.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.KubeletVersion = "v1.33.5-gke.1080000"
	if _, err := api.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(5)
	for _, team := range teams {
		if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		podLabels := map[string]string{"app": "serve"}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
		selector := &metav1.LabelSelector{MatchLabels: podLabels}
		d, err := api.Client.AppsV1().Deployments(team).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "serve"},
			Spec:       appsv1.DeploymentSpec{Selector: selector, Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := api.Client.AppsV1().ReplicaSets(team).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "serve-5d8f7", OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", d.Name, d.UID)}},
			Spec:       appsv1.ReplicaSetSpec{Selector: selector, Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "serve-5d8f7-q2x9z", Labels: podLabels,
				OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}},
			Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: &grace, Containers: tmpl.Spec.Containers},
		}
		if _, err := api.Client.CoreV1().Pods(team).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	logger := promslog.NewNopLogger()
	meta, err := metadata.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := workloadcollector.New(logger, api.Client, meta, readiness.Config{MinGracePeriod: time.Minute, SpotNotice: 15 * time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	srv := httptest.NewServer(collector.NewSet(logger, reg, map[string]collector.Collector{"workloads": c}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return strings.TrimPrefix(srv.URL, "http://")
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// operatorScrapeConfig is the scrape configuration prometheus-operator generates from the overlay's ServiceMonitor
// of the cluster exporter (prometheus-operator/prometheus-operator, pkg/prometheus/promcfg.go,
// generateServiceMonitorConfig), for the target at address: honor_labels as the endpoint says (false when unset),
// and the target labels its relabelings set from the Service and the Pod behind it: namespace, service, pod,
// container, endpoint (the port's name) and job (the Service's name, without a jobLabel); instance stays the address.
// The endpoint's own relabelings follow. Two things differ, neither touching labels: the target is static (no
// Endpoints to discover) and scraped every second, so that the test need not wait for 30s scrapes.
func operatorScrapeConfig(t *testing.T, m manifests, address string) map[string]any {
	t.Helper()
	sm := m.must(t, "ServiceMonitor", namespace, clusterWorkload.name)
	ep := onlyEndpoint(t, sm)
	var svc corev1.Service
	decode(t, selected(t, m, "Service", sm), &svc)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep["port"] })
	if i < 0 {
		t.Fatalf("Service %s has no port %v", svc.Name, ep["port"])
	}
	targetPort := svc.Spec.Ports[i].TargetPort.String()
	pod, container := podAndContainer(t, m, targetPort, func(tmpl corev1.PodTemplateSpec) bool {
		return k8slabels.SelectorFromSet(svc.Spec.Selector).Matches(k8slabels.Set(tmpl.Labels))
	})
	honor, _, _ := unstructured.NestedBool(ep, "honorLabels")
	return map[string]any{
		"job_name":     fmt.Sprintf("serviceMonitor/%s/%s/0", sm.GetNamespace(), sm.GetName()),
		"honor_labels": honor,
		"static_configs": []any{map[string]any{"targets": []string{address}, "labels": map[string]string{
			"namespace": svc.Namespace, "service": svc.Name, "pod": pod, "container": container,
			"endpoint": fmt.Sprint(ep["port"]), "job": svc.Name,
		}}},
		"relabel_configs":        relabelConfigs(ep["relabelings"]),
		"metric_relabel_configs": relabelConfigs(ep["metricRelabelings"]),
	}
}

// gmpScrapeConfig is the scrape configuration Managed Service for Prometheus generates from the overlay's
// PodMonitoring of the cluster exporter (GoogleCloudPlatform/prometheus-engine,
// pkg/operator/apis/monitoring/v1/pod_config.go, PodMonitoring.ScrapeConfigs), for the target at address: no
// honor_labels (its ScrapeConfig leaves it false), project_id, location and cluster of the cluster, namespace of the
// pod, job the PodMonitoring's name, instance the pod and port name, and the metadata labels
// spec.targetLabels.metadata asks for. The endpoint's metric relabeling follows. As above, the target is static and
// scraped every second.
func gmpScrapeConfig(t *testing.T, m manifests, address string) map[string]any {
	t.Helper()
	pm := m.must(t, "PodMonitoring", namespace, clusterWorkload.name)
	ep := onlyEndpoint(t, pm)
	port := fmt.Sprint(ep["port"])
	matchLabels, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	pod, container := podAndContainer(t, m, port, func(tmpl corev1.PodTemplateSpec) bool {
		return k8slabels.SelectorFromSet(matchLabels).Matches(k8slabels.Set(tmpl.Labels))
	})
	targetLabels := map[string]string{
		"project_id": gmpProject, "location": gmpLocation, "cluster": gmpCluster,
		"namespace": pm.GetNamespace(), "job": pm.GetName(), "instance": pod + ":" + port,
	}
	metadataLabels, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "targetLabels", "metadata")
	for _, l := range metadataLabels {
		targetLabels[l] = map[string]string{"pod": pod, "container": container, "node": "gke-prod-default-pool-1a2b3c4d-9xkz"}[l]
	}
	return map[string]any{
		"job_name":               fmt.Sprintf("PodMonitoring/%s/%s/%s", pm.GetNamespace(), pm.GetName(), port),
		"honor_labels":           false,
		"static_configs":         []any{map[string]any{"targets": []string{address}, "labels": targetLabels}},
		"metric_relabel_configs": relabelConfigs(ep["metricRelabeling"]),
	}
}

func onlyEndpoint(t *testing.T, monitor *unstructured.Unstructured) map[string]any {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%s %s: %d endpoints, want 1", monitor.GetKind(), monitor.GetName(), len(endpoints))
	}
	return endpoints[0].(map[string]any)
}

// selected returns the one object of kind in the monitor's namespace that its selector matches.
func selected(t *testing.T, m manifests, kind string, monitor *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	matchLabels, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	var found []*unstructured.Unstructured
	for _, u := range m.ofKind(kind) {
		if u.GetNamespace() == monitor.GetNamespace() && k8slabels.SelectorFromSet(matchLabels).Matches(k8slabels.Set(u.GetLabels())) {
			found = append(found, u)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %s selects %d %ss, want 1", monitor.GetKind(), monitor.GetName(), len(found), kind)
	}
	return found[0]
}

// podAndContainer returns the name of a pod of the one Deployment or DaemonSet whose pods match, and the name of
// its container that has port (a name or a number).
func podAndContainer(t *testing.T, m manifests, port string, matches func(corev1.PodTemplateSpec) bool) (string, string) {
	t.Helper()
	var pods []string
	var container string
	for _, w := range workloads {
		tmpl := m.podTemplate(t, w)
		if !matches(tmpl) {
			continue
		}
		pods = append(pods, w.name+"-7d9f8c6b5d-x2k4q")
		for _, c := range tmpl.Spec.Containers {
			if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == port || fmt.Sprint(p.ContainerPort) == port }) {
				container = c.Name
			}
		}
	}
	if len(pods) != 1 || container == "" {
		t.Fatalf("pods %v, container %q with port %s: want one of each", pods, container, port)
	}
	return pods[0], container
}

// relabelConfigs writes a monitor's relabelings (camelCase fields) as Prometheus relabel_configs.
func relabelConfigs(rules any) []any {
	var out []any
	for _, r := range asSlice(rules) {
		c := map[string]any{}
		for k, v := range r.(map[string]any) {
			switch k {
			case "sourceLabels":
				k = "source_labels"
			case "targetLabel":
				k = "target_label"
			case "action":
				v = strings.ToLower(fmt.Sprint(v))
			}
			c[k] = v
		}
		out = append(out, c)
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// operatorRuleGroups are the groups of the overlay's PrometheusRule, which prometheus-operator loads as they are.
func operatorRuleGroups(t *testing.T, m manifests) []any {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(m.must(t, "PrometheusRule", namespace, "gke-disruption-exporter").Object, "spec", "groups")
	return groups
}

// gmpRuleGroups are the groups of the overlay's Rules as Managed Service for Prometheus's rule evaluator runs them
// (GoogleCloudPlatform/prometheus-engine, pkg/operator/apis/monitoring/v1/rules_config.go, Rules.RuleGroupsConfig):
// scoped to the cluster and the resource's namespace, every selector matching project_id, location, cluster and
// namespace, and every result labelled with them.
func gmpRuleGroups(t *testing.T, m manifests) []any {
	t.Helper()
	r := m.must(t, "Rules", namespace, "gke-disruption-exporter")
	scope := map[string]string{"project_id": gmpProject, "location": gmpLocation, "cluster": gmpCluster, "namespace": r.GetNamespace()}
	groups, _, _ := unstructured.NestedSlice(r.Object, "spec", "groups")
	p := parser.NewParser(parser.Options{})
	for _, g := range groups {
		for _, rule := range asSlice(g.(map[string]any)["rules"]) {
			rule := rule.(map[string]any)
			expr, err := p.ParseExpr(fmt.Sprint(rule["expr"]))
			if err != nil {
				t.Fatal(err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				for _, name := range sortedKeys(scope) {
					for _, existing := range vs.LabelMatchers {
						if existing.Name == name && (existing.Type != labels.MatchEqual || existing.Value != scope[name]) {
							t.Fatalf("%v%v: selector %s conflicts with the rule evaluator's %s=%q", rule["record"], rule["alert"], vs, name, scope[name])
						}
					}
					vs.LabelMatchers = append(vs.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, name, scope[name]))
				}
				return nil
			})
			rule["expr"] = expr.String()
			ruleLabels, _ := rule["labels"].(map[string]any)
			if ruleLabels == nil {
				ruleLabels = map[string]any{}
			}
			for name, value := range scope {
				if _, ok := ruleLabels[name]; ok {
					t.Fatalf("%v%v sets label %s, which the rule evaluator refuses", rule["record"], rule["alert"], name)
				}
				ruleLabels[name] = value
			}
			rule["labels"] = ruleLabels
		}
	}
	return groups
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func promClient(t *testing.T, url string) promv1.API {
	t.Helper()
	client, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	return promv1.NewAPI(client)
}

// alertsNamed returns the alerts of that name Prometheus holds, pending or firing.
func alertsNamed(prom promv1.API, name string) ([]promv1.Alert, error) {
	res, err := prom.Alerts(context.Background())
	if err != nil {
		return nil, err
	}
	var out []promv1.Alert
	for _, a := range res.Alerts {
		if a.Labels[model.AlertNameLabel] == model.LabelValue(name) {
			out = append(out, a)
		}
	}
	return out, nil
}
