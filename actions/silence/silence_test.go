package silence

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/go-openapi/strfmt"
	amclient "github.com/prometheus/alertmanager/api/v2/client"
	amsilence "github.com/prometheus/alertmanager/api/v2/client/silence"
	"github.com/prometheus/alertmanager/api/v2/models"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// TestReconcile drives one Silencer against the real Alertmanager: one silence per node label is created, left alone
// while its lease is fresh, extended in place, adopted (not duplicated) by a second Silencer, and expired when the
// work ends; a duplicate left by a race is expired.
func TestReconcile(t *testing.T) {
	amURL := testenv.StartAlertmanager(t, "route: {receiver: default}\nreceivers: [{name: default}]\n")
	u, err := url.Parse(amURL)
	if err != nil {
		t.Fatal(err)
	}
	newSilencer := func() *Silencer {
		s, err := New(slog.New(slog.DiscardHandler), Options{URLs: []*url.URL{u}, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	client := amclient.NewHTTPClientWithConfig(strfmt.Default, amclient.DefaultTransportConfig().WithHost(u.Host).WithSchemes([]string{"http"}))
	active := func() map[string]*models.GettableSilence {
		t.Helper()
		resp, err := client.Silence.GetSilences(amsilence.NewGetSilencesParamsWithContext(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*models.GettableSilence{}
		for _, s := range resp.Payload {
			if key, ok := ownKey(s); ok && *s.Status.State == models.SilenceStatusStateActive {
				if out[key] != nil {
					t.Errorf("two active silences for %s", key)
				}
				out[key] = s
			}
		}
		return out
	}
	ctx := context.Background()
	cfg := config.Silences{Duration: config.Duration(time.Hour), NodeLabels: []string{"node", "exported_node"}}
	work := []Work{{Node: "gke-a3-1", Action: "drain", Maintenance: "scheduled/1750000000"}}

	s := newSilencer()
	clock := time.Now()
	s.now = func() time.Time { return clock }
	if err := s.Reconcile(ctx, Desired{Work: work, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	first := active()
	if len(first) != 2 || first["node=gke-a3-1"] == nil || first["exported_node=gke-a3-1"] == nil {
		t.Fatalf("silences %v, want node and exported_node for gke-a3-1", first)
	}

	// A fresh lease is left alone; past half of it, the same silence is extended.
	clock = clock.Add(10 * time.Minute)
	if err := s.Reconcile(ctx, Desired{Work: work, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := active()["node=gke-a3-1"]; !time.Time(*got.EndsAt).Equal(time.Time(*first["node=gke-a3-1"].EndsAt)) {
		t.Errorf("a fresh lease was extended: ends %s", time.Time(*got.EndsAt))
	}
	clock = clock.Add(25 * time.Minute)
	other := newSilencer() // a new leader adopts
	other.now = func() time.Time { return clock }
	if err := other.Reconcile(ctx, Desired{Work: work, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	extended := active()
	for key, was := range first {
		got := extended[key]
		if got == nil || *got.ID != *was.ID {
			t.Fatalf("silence %s replaced rather than extended: %v", key, got)
		}
		if !time.Time(*got.EndsAt).After(time.Time(*was.EndsAt)) {
			t.Errorf("silence %s not extended: ends %s", key, time.Time(*got.EndsAt))
		}
	}

	// A duplicate (two leaders raced) is expired; the silence that lasts longer stays.
	createdBy, comment := CreatedBy, Comment(work[0], time.Hour)
	start, end := strfmt.DateTime(time.Now()), strfmt.DateTime(time.Now().Add(time.Minute))
	if _, err := client.Silence.PostSilences(amsilence.NewPostSilencesParamsWithContext(ctx).WithSilence(&models.PostableSilence{
		Silence: models.Silence{Matchers: Matchers("node", "gke-a3-1", nil), StartsAt: &start, EndsAt: &end, CreatedBy: &createdBy, Comment: &comment},
	})); err != nil {
		t.Fatal(err)
	}
	if err := other.Reconcile(ctx, Desired{Work: work, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := active()["node=gke-a3-1"]; *got.ID != *first["node=gke-a3-1"].ID {
		t.Errorf("kept the duplicate %s rather than %s", *got.ID, *first["node=gke-a3-1"].ID)
	}

	// The work ends: both silences are expired.
	if err := other.Reconcile(ctx, Desired{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := active(); len(got) != 0 {
		t.Errorf("silences still active after the work ended: %v", got)
	}
}

func TestMatchers(t *testing.T) {
	canon := func(ms models.Matchers) string {
		out := ""
		for _, m := range ms {
			op := "="
			switch {
			case *m.IsRegex && equal(m):
				op = "=~"
			case *m.IsRegex:
				op = "!~"
			case !equal(m):
				op = "!="
			}
			out += *m.Name + op + *m.Value + " "
		}
		return out
	}
	if got, want := canon(Matchers("node", "gke-a3-1", nil)),
		`node=gke-a3-1 alertname!~GKEDisruptionActionFailed|GKENodeMaintenanceStuck|GKEDisruptionActionsStalled gke_disruption_action= `; got != want {
		t.Errorf("default matchers %q, want %q", got, want)
	}
	if got, want := canon(Matchers("instance", "gke-a3-1", []string{"KubeNodeNotReady", "DCGM.Xid"})),
		`instance=gke-a3-1 alertname=~KubeNodeNotReady|DCGM\.Xid gke_disruption_action= `; got != want {
		t.Errorf("allow-list matchers %q, want %q", got, want)
	}
}
