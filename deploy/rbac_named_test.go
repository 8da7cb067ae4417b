package deploy

import (
	"context"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// namedNeeds are the grants limited to single objects by name (resourceNames): the ServiceAccount may read the
// named object and no other of its kind (checkRBAC already proves the kind is refused without a name).
var namedNeeds = map[string][]namedAccess{
	"gke-disruption-exporter-cluster": {
		{access{"get", "", "configmaps", "", "kube-system"}, "gke-disruption-handling"},
		{access{"list", "", "configmaps", "", "kube-system"}, "gke-disruption-handling"},
		{access{"watch", "", "configmaps", "", "kube-system"}, "gke-disruption-handling"},
	},
	"gke-disruption-exporter-actions": {
		{access{"get", "", "configmaps", "", namespace}, "gke-disruption-exporter-actions-repairs"},
		{access{"update", "", "configmaps", "", namespace}, "gke-disruption-exporter-actions-repairs"},
	},
}

type namedAccess struct {
	access
	name string
}

// checkNamedRBAC runs after checkRBAC has applied the RBAC objects: every verb on the named objects, in their
// namespace and others, and on another object of the same kind.
func (c *cluster) checkNamedRBAC(t *testing.T) {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for sa, grants := range namedNeeds {
		t.Run(sa, func(t *testing.T) {
			for _, g := range grants {
				for _, verb := range verbs {
					for _, ns := range []string{g.namespace, namespace, "default"} {
						for _, name := range []string{g.name, "other-" + g.name} {
							probe := namedAccess{access{verb, g.group, g.resource, g.subresource, ns}, name}
							want := slices.Contains(grants, probe)
							if got := c.allowedNamed(t, sa, probe); got != want {
								t.Errorf("%s may %s named %s: %v, want %v", sa, probe.access, name, got, want)
							}
						}
					}
				}
			}
		})
	}
}

func (c *cluster) allowedNamed(t *testing.T, sa string, a namedAccess) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
		},
	}}
	got, err := c.api.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview for %s %s named %s: %v", sa, a.access, a.name, err)
	}
	return got.Status.Allowed
}
