package deploy

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"
	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	workloadcollector "github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// runbookCanI returns the `kubectl auth can-i` commands of docs/runbooks.md, without the `kubectl auth can-i`.
func runbookCanI(t *testing.T) [][]string {
	t.Helper()
	content, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	var commands [][]string
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		_, command, ok := strings.Cut(line, "kubectl auth can-i ")
		if !ok {
			continue
		}
		command, _, _ = strings.Cut(command, "`") // inline code ends at its backquote
		commands = append(commands, strings.Fields(command))
	}
	if len(commands) == 0 {
		t.Fatal("docs/runbooks.md has no kubectl auth can-i command")
	}
	return commands
}

// checkRunbookRBAC runs the runbooks' RBAC checks as written against the API server with the installs' RBAC
// applied: GKEDisruptionWatchFailing's command, for every resource the cluster
// exporter watches (the resource label of its gke_disruption_watch_errors_total), must answer yes; so must every
// other can-i command the runbooks give. A ServiceAccount the installs do not have, or a verb they do not grant,
// answers no.
func (c *cluster) checkRunbookRBAC(t *testing.T) {
	c.applyRBAC(t)
	commands := runbookCanI(t)
	for _, resource := range watchedResources(t, c) {
		i := slices.IndexFunc(commands, func(args []string) bool {
			return len(args) > 1 && strings.HasPrefix(args[1], resource+"/")
		})
		if i < 0 {
			i = slices.IndexFunc(commands, func(args []string) bool { return len(args) > 1 && args[1] == "RESOURCE" })
		}
		if i < 0 {
			t.Errorf("docs/runbooks.md has no can-i command for %s, nor one for RESOURCE", resource)
			continue
		}
		args := slices.Clone(commands[i])
		if args[1] == "RESOURCE" {
			args[1] = resource
			if kubeResource, ok := watchedAs[resource]; ok {
				args[1] = kubeResource
			}
		}
		if !c.canI(t, args) {
			t.Errorf("kubectl auth can-i %s: no, want yes", strings.Join(args, " "))
		}
	}
	for _, args := range commands {
		if !slices.Contains(args, "RESOURCE") && !c.canI(t, args) {
			t.Errorf("kubectl auth can-i %s: no, want yes", strings.Join(args, " "))
		}
	}
}

// watchedAs are the Kubernetes resources behind the resource labels that are not one, as the runbook names them.
var watchedAs = map[string]string{"leaderpods": "pods"}

// watchedResources are the resource labels of the cluster exporter's watch error counter, which it sets up for
// every watch it runs.
func watchedResources(t *testing.T, c *cluster) []string {
	t.Helper()
	meta, err := metadata.NewForConfig(c.api.Config)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := workloadcollector.New(promslog.NewNopLogger(), c.api.Client, meta, readiness.Config{}, reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var resources []string
	for _, f := range families {
		if f.GetName() != "gke_disruption_watch_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" {
					resources = append(resources, l.GetValue())
				}
			}
		}
	}
	if len(resources) == 0 {
		t.Fatal("the workloads collector counts no watch errors")
	}
	return resources
}

// canI answers `kubectl auth can-i args...` as kubectl does: the resource (TYPE or TYPE/NAME) resolved through the
// API server's discovery, in the namespace of -n (every namespace with -A), for the user of --as; the API server's
// authorizer answers a SubjectAccessReview for it. A flag kubectl's can-i would take that this does not know fails
// the test rather than being ignored.
func (c *cluster) canI(t *testing.T, args []string) bool {
	t.Helper()
	command := "kubectl auth can-i " + strings.Join(args, " ")
	flags := pflag.NewFlagSet("can-i", pflag.ContinueOnError)
	allNamespaces := flags.BoolP("all-namespaces", "A", false, "")
	ns := flags.StringP("namespace", "n", "", "")
	user := flags.String("as", "", "")
	if err := flags.Parse(args); err != nil || flags.NArg() != 2 || *user == "" {
		t.Fatalf("%s: want VERB TYPE[/NAME] [-A | -n NAMESPACE] --as=USER (%v)", command, err)
	}
	if *allNamespaces {
		*ns = ""
	} else if *ns == "" {
		*ns = "default"
	}
	verb := flags.Arg(0)
	resource, name, _ := strings.Cut(flags.Arg(1), "/")
	gr := schema.ParseGroupResource(resource)
	gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: *user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: gvr.Group, Resource: gvr.Resource, Name: name, Namespace: *ns,
		},
	}}
	got, err := c.api.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return got.Status.Allowed
}
