package actions

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// poolWatch sees every change to the nodes of a pool, in order, and keeps what budgets and exactly-once are
// checked against: the distinct claims of each node and how many nodes were disrupted at once.
type poolWatch struct {
	mu        sync.Mutex
	disrupted map[string]bool
	claims    map[string]map[string]bool // node -> distinct claims seen
	most      int
	// over lists the sets of disrupted nodes seen beyond limit.
	limit int
	over  []string
}

// watchPool watches the nodes labelled pool=<pool> until the test ends.
func watchPool(t *testing.T, api *testenv.APIServer, pool string, limit int) *poolWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := api.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pw := &poolWatch{disrupted: map[string]bool{}, claims: map[string]map[string]bool{}, limit: limit}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				pw.observe(n)
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return pw
}

func (pw *poolWatch) observe(n *corev1.Node) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if r := nodeview.Of(n).Record; r.Phase == nodeview.Accepted {
		if pw.claims[n.Name] == nil {
			pw.claims[n.Name] = map[string]bool{}
		}
		pw.claims[n.Name][r.ClaimedBy+" at "+n.Annotations[nodeview.AnnotationAcceptedAt]] = true
	}
	pw.disrupted[n.Name] = nodeview.Of(n).Disrupted()
	var which []string
	for name, d := range pw.disrupted {
		if d {
			which = append(which, name)
		}
	}
	pw.most = max(pw.most, len(which))
	if len(which) > pw.limit {
		sort.Strings(which)
		pw.over = append(pw.over, fmt.Sprint(which))
	}
}

// check fails the test when the limit was exceeded, when at most fewer than want nodes were ever disrupted at
// once, or when a node was claimed other than once.
func (pw *poolWatch) check(t *testing.T, names []string, want int) {
	t.Helper()
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.over) > 0 {
		t.Errorf("more than %d pool nodes disrupted at once, %d times, e.g. %s", pw.limit, len(pw.over), pw.over[0])
	}
	if pw.most != want {
		t.Errorf("at most %d pool nodes disrupted at once, want exactly %d", pw.most, want)
	}
	for _, name := range names {
		if len(pw.claims[name]) != 1 {
			t.Errorf("node %s claimed %d times, want once: %v", name, len(pw.claims[name]), pw.claims[name])
		}
	}
}
