package actions

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-openapi/strfmt"
	amclient "github.com/prometheus/alertmanager/api/v2/client"
	amalert "github.com/prometheus/alertmanager/api/v2/client/alert"
	amsilence "github.com/prometheus/alertmanager/api/v2/client/silence"
	"github.com/prometheus/alertmanager/api/v2/models"
	corev1 "k8s.io/api/core/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/silence"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// plainAlertmanager routes everything to a receiver that sends nothing: the tests only look at silences and alerts.
const plainAlertmanager = `
route: {receiver: default}
receivers: [{name: default}]
`

// silencePolicy keeps 10 s leases (extended every few seconds) for the node and instance labels.
const silencePolicy = "silences: {duration: 10s, nodeLabels: [node, instance]}\n"

// TestSilences runs the service against the real API server and the real Alertmanager.
func TestSilences(t *testing.T) {
	api := testenv.StartAPIServer(t)
	t.Run("KeptWhileWorkRuns", func(t *testing.T) { testSilenceKeptWhileWorkRuns(t, api) })
	t.Run("LapsesWhenServiceDies", func(t *testing.T) { testSilenceLapses(t, api) })
	t.Run("NewLeaderAdopts", func(t *testing.T) { testSilenceAdopted(t, api) })
}

// am is a test's view of Alertmanager through its own API client.
type am struct {
	t      *testing.T
	url    string
	client *amclient.AlertmanagerAPI
}

func startAM(t *testing.T) *am {
	u := testenv.StartAlertmanager(t, plainAlertmanager)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return &am{t: t, url: u, client: amclient.NewHTTPClientWithConfig(strfmt.Default,
		amclient.DefaultTransportConfig().WithHost(parsed.Host).WithSchemes([]string{"http"}))}
}

// silences lists the service's silences matching label=node, in any state.
func (a *am) silences(label, node string) []*models.GettableSilence {
	a.t.Helper()
	resp, err := a.client.Silence.GetSilences(amsilence.NewGetSilencesParamsWithContext(context.Background()).
		WithFilter([]string{fmt.Sprintf("%s=%q", label, node)}))
	if err != nil {
		a.t.Fatal(err)
	}
	var out []*models.GettableSilence
	for _, s := range resp.Payload {
		if *s.CreatedBy == silence.CreatedBy {
			out = append(out, s)
		}
	}
	return out
}

// waitActive waits until exactly one silence of the service matches label=node and it is active, and returns it.
func (a *am) waitActive(step, label, node string, check func(*models.GettableSilence) error) *models.GettableSilence {
	a.t.Helper()
	var got *models.GettableSilence
	testenv.Eventually(a.t, waitLong, step, func() error {
		all := a.silences(label, node)
		if len(all) != 1 {
			return fmt.Errorf("%d silences for %s=%s, want one", len(all), label, node)
		}
		got = all[0]
		if *got.Status.State != models.SilenceStatusStateActive {
			return fmt.Errorf("silence %s is %s", *got.ID, *got.Status.State)
		}
		if check != nil {
			return check(got)
		}
		return nil
	})
	return got
}

func (a *am) waitExpired(step string, id string) *models.GettableSilence {
	a.t.Helper()
	var got *models.GettableSilence
	testenv.Eventually(a.t, waitLong, step, func() error {
		resp, err := a.client.Silence.GetSilence(amsilence.NewGetSilenceParamsWithContext(context.Background()).WithSilenceID(strfmt.UUID(id)))
		if err != nil {
			return err
		}
		got = resp.Payload
		if *got.Status.State != models.SilenceStatusStateExpired {
			return fmt.Errorf("silence %s is %s", id, *got.Status.State)
		}
		return nil
	})
	return got
}

// silencedBy returns the silences suppressing the alert named alertname with labels, once Alertmanager has it.
func (a *am) silencedBy(labels map[string]string) []string {
	a.t.Helper()
	var ids []string
	testenv.Eventually(a.t, waitLong, "Alertmanager holding alert "+labels["alertname"], func() error {
		var filter []string
		for k, v := range labels {
			filter = append(filter, fmt.Sprintf("%s=%q", k, v))
		}
		resp, err := a.client.Alert.GetAlerts(amalert.NewGetAlertsParamsWithContext(context.Background()).WithFilter(filter))
		if err != nil {
			return err
		}
		if len(resp.Payload) != 1 {
			return fmt.Errorf("%d alerts", len(resp.Payload))
		}
		ids = resp.Payload[0].Status.SilencedBy
		return nil
	})
	return ids
}

func testSilenceKeptWhileWorkRuns(t *testing.T, api *testenv.APIServer) {
	a := startAM(t)
	c := newCluster(t, api)
	pool := unique("silence")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, silencePolicy), replicaOpts{alertmanager: a.url})
	r.waitLeading()
	if got := a.silences("node", node); len(got) != 0 {
		t.Fatalf("silences before any work: %d", len(got))
	}

	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drain done, cordon held", inState(nodeview.Done))
	first := a.waitActive("silence created for the node label", "node", node, func(s *models.GettableSilence) error {
		if !strings.Contains(*s.Comment, nodeview.LabelKey("1750000000")) || !strings.Contains(*s.Comment, node) {
			return fmt.Errorf("comment %q does not name the node and its maintenance", *s.Comment)
		}
		return nil
	})
	a.waitActive("silence created for the instance label", "instance", node, nil)
	r.waitMetric("silences counted", "gke_disruption_silences", nil, 2)

	// The node's alerts are silenced, not the product's failure alerts nor the alerts that drive automation.
	testenv.PostAlerts(t, a.url, time.Time{},
		map[string]string{"alertname": "KubeNodeNotReady", "node": node},
		map[string]string{"alertname": "GKEDisruptionActionFailed", "node": node},
		map[string]string{"alertname": "GKENodeMaintenanceNotReschedulable", "node": node, "gke_disruption_action": "drain"},
	)
	if ids := a.silencedBy(map[string]string{"alertname": "KubeNodeNotReady", "node": node}); !slices.Contains(ids, *first.ID) {
		t.Errorf("KubeNodeNotReady silenced by %v, want %s", ids, *first.ID)
	}
	for _, name := range []string{"GKEDisruptionActionFailed", "GKENodeMaintenanceNotReschedulable"} {
		if ids := a.silencedBy(map[string]string{"alertname": name, "node": node}); len(ids) != 0 {
			t.Errorf("%s silenced by %v", name, ids)
		}
	}

	// Extended in place while the work runs: the same silence, ending later.
	a.waitActive("silence extended", "node", node, func(s *models.GettableSilence) error {
		if *s.ID != *first.ID {
			return fmt.Errorf("silence %s replaced by %s", *first.ID, *s.ID)
		}
		if !time.Time(*s.EndsAt).After(time.Time(*first.EndsAt)) {
			return fmt.Errorf("ends at %s, not extended beyond %s", time.Time(*s.EndsAt), time.Time(*first.EndsAt))
		}
		return nil
	})

	// GKE's maintenance comes and goes; our cordon is lifted, the work ends, the silences are expired at once.
	c.startMaintenanceAndWaitNoted(node)
	lease := a.waitActive("silence still kept during GKE's maintenance", "node", node, nil)
	c.finishMaintenance(node)
	c.waitNode(node, "uncordoned after maintenance", func(n *corev1.Node) error {
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	expired := a.waitExpired("silence expired when the work ended", *first.ID)
	if !time.Time(*expired.EndsAt).Before(time.Time(*lease.EndsAt)) {
		t.Errorf("silence ended at %s, the end of its lease: it lapsed rather than being expired", time.Time(*expired.EndsAt))
	}
	for _, label := range []string{"node", "instance"} {
		for _, s := range a.silences(label, node) {
			if *s.Status.State != models.SilenceStatusStateExpired {
				t.Errorf("silence %s for %s=%s is still %s", *s.ID, label, node, *s.Status.State)
			}
		}
	}
}

func testSilenceLapses(t *testing.T, api *testenv.APIServer) {
	a := startAM(t)
	c := newCluster(t, api)
	pool := unique("lapse")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	r := startReplica(t, api, poolPolicy(pool, silencePolicy), replicaOpts{alertmanager: a.url})
	r.waitLeading()
	mustAccept(t, r, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drain done, cordon held", inState(nodeview.Done))
	a.waitActive("silence created", "node", node, nil)

	r.stop() // the work is still on the node: nothing expires the silence, it runs out
	last := a.silences("node", node)[0]
	expired := a.waitExpired("silence lapsed at the end of its lease", *last.ID)
	if got, want := time.Time(*expired.EndsAt), time.Time(*last.EndsAt); !got.Equal(want) {
		t.Errorf("silence ended at %s, want the end of its last lease %s: a stopping service must not expire it", got, want)
	}
}

func testSilenceAdopted(t *testing.T, api *testenv.APIServer) {
	a := startAM(t)
	c := newCluster(t, api)
	pool := unique("adopt")
	node := unique("gpu")
	c.node(node, map[string]string{"pool": pool}, withScheduledMaintenance)
	lease := unique("lease")
	policy := poolPolicy(pool, silencePolicy)
	first := startReplica(t, api, policy, replicaOpts{identity: "replica-a", lease: lease, alertmanager: a.url})
	first.waitLeading()
	second := startReplica(t, api, policy, replicaOpts{identity: "replica-b", lease: lease, alertmanager: a.url})
	mustAccept(t, first, alert(node, nodeview.Drain, false, startsAt))
	c.waitNode(node, "drain done, cordon held", inState(nodeview.Done))
	before := a.waitActive("silence created by the first leader", "node", node, nil)

	first.stop()
	second.waitLeading()
	a.waitActive("the new leader extends the same silence", "node", node, func(s *models.GettableSilence) error {
		if *s.ID != *before.ID {
			return fmt.Errorf("silence %s, want the adopted %s", *s.ID, *before.ID)
		}
		if !time.Time(*s.EndsAt).After(time.Time(*before.EndsAt)) {
			return fmt.Errorf("not extended yet")
		}
		return nil
	})
}
