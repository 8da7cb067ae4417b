package actions

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// failPatches answers 500 to PATCH requests on one node while on is set: the API server (or an admission webhook on
// Nodes) failing for a while.
type failPatches struct {
	next http.RoundTripper
	node string
	on   *atomic.Bool
}

func (f failPatches) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.on.Load() && req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/nodes/"+f.node) {
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500}`
		return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{"Content-Type": []string{"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	return f.next.RoundTrip(req)
}

// TestParallelGroupNotStartedHalfWay: claiming one member of a parallel pool fails for a while (an API error, not a
// change that makes it unclaimable). No member may proceed while the group is claimed half-way, and once the API
// answers again the group is completed; instead the claimed members drain and the failed one is never claimed.
func TestParallelGroupNotStartedHalfWay(t *testing.T) {
	api := testenv.StartAPIServer(t)
	c := newCluster(t, api)
	pool := unique("halfstart")
	var nodes []string
	for i := range 3 {
		nodes = append(nodes, fmt.Sprintf("%s-%d", pool, i))
		c.node(nodes[i], map[string]string{"pool": pool}, withScheduledMaintenance)
	}
	failing := &atomic.Bool{}
	failing.Store(true)
	r := startReplica(t, api, parallelPolicy(pool, 100), replicaOpts{wrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return failPatches{next: rt, node: nodes[2], on: failing}
	}})
	r.waitLeading()
	mustAccept(t, r, alert(nodes[0], nodeview.Drain, false, startsAt))
	c.waitNode(nodes[0], "claimed", func(n *corev1.Node) error {
		if nodeview.Of(n).Record.Phase == "" {
			return fmt.Errorf("not claimed")
		}
		return nil
	})
	settle()
	for _, name := range nodes[:2] {
		n := c.get(name)
		if rec := nodeview.Of(n).Record; rec.Phase != nodeview.Accepted || n.Spec.Unschedulable {
			t.Errorf("%s went ahead (state %q, unschedulable %v) while %s of its group is not claimed", name, rec.Phase, n.Spec.Unschedulable, nodes[2])
		}
	}
	failing.Store(false)
	testenv.Eventually(t, 20*time.Second, "the group completed once the API answers", func() error {
		n := c.get(nodes[2])
		if rec := nodeview.Of(n).Record; rec.Phase == "" {
			return fmt.Errorf("%s never claimed; group members: %s %s", nodes[2], nodeview.Of(c.get(nodes[0])).Record.Phase, nodeview.Of(c.get(nodes[1])).Record.Phase)
		}
		return nil
	})
}
