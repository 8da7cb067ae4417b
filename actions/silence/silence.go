// Package silence keeps Alertmanager silences for the nodes the actions service has work on, so planned work does
// not page anyone: a silence per node (and per alert label that names the node) is created when work starts,
// extended in short leases while it runs, and expired when it ends. If the service dies the silence lapses on its
// own at the end of its lease. Silences are found again by their creator and matchers, so a new leader adopts the
// previous leader's silences rather than adding its own; the comment names the work and the maintenance it serves.
//
// The component only reads the set of nodes with work (Wanted, from the node watch) and reconciles Alertmanager
// with it through Alertmanager's own API v2 client; it never touches Nodes.
package silence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	httptransport "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"
	amclient "github.com/prometheus/alertmanager/api/v2/client"
	amsilence "github.com/prometheus/alertmanager/api/v2/client/silence"
	"github.com/prometheus/alertmanager/api/v2/models"
	"github.com/prometheus/client_golang/prometheus"
	commonconfig "github.com/prometheus/common/config"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// CreatedBy is the creator of every silence this service keeps; any replica adopts silences with it.
const CreatedBy = "gke-disruption-exporter"

// actionLabel is the label of the alerts that drive automation: they are never silenced, so Alertmanager keeps
// delivering them to the webhook.
const actionLabel = "gke_disruption_action"

// Defaults for Options left zero.
const (
	DefaultCheckInterval  = 5 * time.Second
	DefaultResyncInterval = time.Minute
)

// Work is a node this service has work on, and what the work is.
type Work struct {
	Node        string
	Action      string
	Maintenance string
}

// Wanted is the work on nodes: in progress, or finished with a cordon of ours still held (GKE's maintenance is
// still to come or under way).
func Wanted(nodes []*nodeview.View) []Work {
	var out []Work
	for _, n := range nodes {
		if r := n.Record; r.Active() || r.HoldsCordon() {
			out = append(out, Work{Node: n.Name, Action: string(r.Action), Maintenance: r.Maintenance})
		}
	}
	slices.SortFunc(out, func(a, b Work) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// Desired is what the silences should cover now.
type Desired struct {
	Work   []Work
	Config config.Silences
}

// Options configure a Silencer.
type Options struct {
	// URLs are the peers of one Alertmanager cluster (an HA pair); each pass uses the first that answers, and
	// Alertmanager's gossip carries the silences to the others.
	URLs []*url.URL
	// HTTPClient talks to Alertmanager (TLS, auth); nil means http.DefaultClient.
	HTTPClient *http.Client
	// CheckInterval is how often the set of nodes with work is compared with what was last applied.
	CheckInterval time.Duration
	// ResyncInterval is how often Alertmanager is reconciled even when nothing changed (leases are extended then;
	// it is shortened to a third of the lease when the lease is shorter).
	ResyncInterval time.Duration
	Registerer     prometheus.Registerer
}

// Silencer reconciles Alertmanager's silences with the work on nodes.
type Silencer struct {
	logger  *slog.Logger
	opts    Options
	targets []target
	now     func() time.Time

	requests *prometheus.CounterVec
	kept     prometheus.Gauge
}

type target struct {
	url    string
	client *amclient.AlertmanagerAPI
}

// LoadHTTPClient builds the Alertmanager client from a prometheus/common HTTP client configuration file (TLS,
// basic auth, bearer token, OAuth 2.0, proxy); an empty path gives a plain client.
func LoadHTTPClient(file string) (*http.Client, error) {
	cfg := &commonconfig.DefaultHTTPClientConfig
	if file != "" {
		loaded, _, err := commonconfig.LoadHTTPConfigFile(file)
		if err != nil {
			return nil, fmt.Errorf("alertmanager client configuration %s: %w", file, err)
		}
		cfg = loaded
	}
	client, err := commonconfig.NewClientFromConfig(*cfg, CreatedBy)
	if err != nil {
		return nil, fmt.Errorf("alertmanager client: %w", err)
	}
	return client, nil
}

// New builds a Silencer; Run keeps the silences.
func New(logger *slog.Logger, opts Options) (*Silencer, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("no Alertmanager URL")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	s := &Silencer{
		logger: logger,
		opts:   opts,
		now:    time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "silence_requests_total",
			Help:      "Requests to Alertmanager's silences API by operation (list, create, extend, expire) and result (success, error).",
		}, []string{"operation", "result"}),
		kept: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: nodeview.Namespace,
			Name:      "silences",
			Help:      "Silences this replica keeps in Alertmanager for nodes with work (only the leader keeps any).",
		}),
	}
	for _, u := range opts.URLs {
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("alertmanager URL %q: want http(s)://host[:port][/prefix]", u.Redacted())
		}
		transport := httptransport.NewWithClient(u.Host, path.Join("/", u.Path, "api/v2"), []string{u.Scheme}, opts.HTTPClient)
		s.targets = append(s.targets, target{url: u.Redacted(), client: amclient.New(transport, strfmt.Default)})
	}
	for _, op := range []string{"list", "create", "extend", "expire"} {
		for _, result := range []string{"success", "error"} {
			s.requests.WithLabelValues(op, result)
		}
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.requests, s.kept} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Run reconciles until ctx ends: at once, whenever desired changes, and every resync interval. desired reports
// false while nothing may be written (dry run); silences are then left to lapse. Run never expires silences when it
// stops: the next leader adopts them, or they lapse.
func (s *Silencer) Run(ctx context.Context, desired func() (Desired, bool)) {
	defer s.kept.Set(0)
	var applied []Work
	var appliedCfg config.Silences
	var last time.Time
	ticker := time.NewTicker(s.opts.CheckInterval)
	defer ticker.Stop()
	for {
		if d, ok := desired(); ok {
			resync := min(s.opts.ResyncInterval, time.Duration(d.Config.Duration)/3)
			changed := !slices.Equal(applied, d.Work) || !sameConfig(appliedCfg, d.Config)
			if last.IsZero() || changed || s.now().Sub(last) >= resync {
				if err := s.Reconcile(ctx, d); err != nil {
					if ctx.Err() != nil {
						return
					}
					s.logger.Warn("keeping Alertmanager silences", "err", err)
				} else {
					applied, appliedCfg, last = d.Work, d.Config, s.now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func sameConfig(a, b config.Silences) bool {
	return a.Duration == b.Duration && slices.Equal(a.NodeLabels, b.NodeLabels) && slices.Equal(a.AlertNames, b.AlertNames)
}

// Reconcile makes the silences in Alertmanager match d, on the first Alertmanager that answers.
func (s *Silencer) Reconcile(ctx context.Context, d Desired) error {
	var errs []error
	for _, t := range s.targets {
		err := s.reconcileOn(ctx, t, d)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", t.url, err))
	}
	return errors.Join(errs...)
}

// wanted is one silence to keep.
type wanted struct {
	matchers models.Matchers
	comment  string
}

// silenceKey names a silence by the node label it matches: "node=gke-a3-1".
func silenceKey(label, node string) string { return label + "=" + node }

func (s *Silencer) reconcileOn(ctx context.Context, t target, d Desired) error {
	resp, err := t.client.Silence.GetSilences(amsilence.NewGetSilencesParamsWithContext(ctx))
	s.count("list", err)
	if err != nil {
		return fmt.Errorf("listing silences: %w", err)
	}
	ours := map[string]*models.GettableSilence{}
	var duplicates []*models.GettableSilence
	for _, sil := range resp.Payload {
		key, ok := ownKey(sil)
		if !ok {
			continue
		}
		if prev := ours[key]; prev != nil {
			// Two leaders raced, or two peers before gossip: keep the one that lasts longer.
			if time.Time(*prev.EndsAt).After(time.Time(*sil.EndsAt)) {
				prev, sil = sil, prev
			}
			duplicates = append(duplicates, prev)
		}
		ours[key] = sil
	}

	now := s.now()
	lease := time.Duration(d.Config.Duration)
	want := map[string]wanted{}
	for _, w := range d.Work {
		for _, label := range d.Config.NodeLabels {
			want[silenceKey(label, w.Node)] = wanted{
				matchers: Matchers(label, w.Node, d.Config.AlertNames),
				comment:  Comment(w, lease),
			}
		}
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(want)) {
		w := want[key]
		existing := ours[key]
		delete(ours, key)
		op, id, startsAt := "create", "", now
		if existing != nil {
			if sameMatchers(existing.Matchers, w.matchers) && *existing.Comment == w.comment &&
				time.Time(*existing.EndsAt).Sub(now) > lease/2 {
				continue
			}
			// Same ID and start: Alertmanager updates an active silence in place (it replaces it when the matchers
			// changed).
			op, id, startsAt = "extend", *existing.ID, time.Time(*existing.StartsAt)
		}
		err := s.post(ctx, t, id, w, startsAt, now.Add(lease))
		s.count(op, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s silence %s: %w", op, key, err))
			continue
		}
		s.logger.Debug("silence kept", "silence", key, "operation", op, "until", now.Add(lease))
	}
	for _, key := range slices.Sorted(maps.Keys(ours)) {
		duplicates = append(duplicates, ours[key])
	}
	for _, sil := range duplicates {
		_, err := t.client.Silence.DeleteSilence(amsilence.NewDeleteSilenceParamsWithContext(ctx).WithSilenceID(strfmt.UUID(*sil.ID)))
		s.count("expire", err)
		if err != nil {
			errs = append(errs, fmt.Errorf("expiring silence %s: %w", *sil.ID, err))
			continue
		}
		s.logger.Info("silence expired: the work on the node ended", "id", *sil.ID, "comment", *sil.Comment)
	}
	if len(errs) == 0 {
		s.kept.Set(float64(len(want)))
	}
	return errors.Join(errs...)
}

func (s *Silencer) post(ctx context.Context, t target, id string, w wanted, startsAt, endsAt time.Time) error {
	createdBy, comment := CreatedBy, w.comment
	start, end := strfmt.DateTime(startsAt), strfmt.DateTime(endsAt)
	_, err := t.client.Silence.PostSilences(amsilence.NewPostSilencesParamsWithContext(ctx).WithSilence(&models.PostableSilence{
		ID: id,
		Silence: models.Silence{
			Matchers:  w.matchers,
			StartsAt:  &start,
			EndsAt:    &end,
			CreatedBy: &createdBy,
			Comment:   &comment,
		},
	}))
	return err
}

func (s *Silencer) count(op string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	s.requests.WithLabelValues(op, result).Inc()
}

// ownKey returns the key of a silence this service keeps and that has not expired.
func ownKey(sil *models.GettableSilence) (string, bool) {
	if sil.CreatedBy == nil || *sil.CreatedBy != CreatedBy || sil.Status == nil || sil.Status.State == nil ||
		*sil.Status.State == models.SilenceStatusStateExpired || sil.ID == nil || sil.EndsAt == nil ||
		sil.StartsAt == nil || sil.Comment == nil {
		return "", false
	}
	for _, m := range sil.Matchers {
		if m.Name == nil || m.Value == nil || *m.Name == "alertname" || *m.Name == actionLabel || isTrue(m.IsRegex) || !equal(m) {
			continue
		}
		return silenceKey(*m.Name, *m.Value), true
	}
	return "", false
}

// Matchers are a silence's matchers for the node's alerts carrying label=node: the allowed alert names, or every
// alert but the product's own failure alerts; never an alert that drives automation.
func Matchers(label, node string, alertNames []string) models.Matchers {
	names, equalNames := config.ProtectedAlerts, false
	if len(alertNames) > 0 {
		names, equalNames = alertNames, true
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return models.Matchers{
		matcher(label, node, false, true),
		matcher("alertname", strings.Join(quoted, "|"), true, equalNames),
		matcher(actionLabel, "", false, true),
	}
}

func matcher(name, value string, isRegex, isEqual bool) *models.Matcher {
	return &models.Matcher{Name: &name, Value: &value, IsRegex: &isRegex, IsEqual: &isEqual}
}

// Comment names the work and the maintenance it serves.
func Comment(w Work, lease time.Duration) string {
	maintenance := cmp.Or(w.Maintenance, "(none recorded)")
	return fmt.Sprintf("%s on node %s for maintenance %s: kept by the %s actions service while the work runs, in leases of %s",
		w.Action, w.Node, maintenance, CreatedBy, lease)
}

func sameMatchers(a, b models.Matchers) bool {
	canon := func(ms models.Matchers) []string {
		out := make([]string, 0, len(ms))
		for _, m := range ms {
			if m.Name == nil || m.Value == nil {
				continue
			}
			out = append(out, fmt.Sprintf("%s|%t|%t|%s", *m.Name, isTrue(m.IsRegex), equal(m), *m.Value))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(canon(a), canon(b))
}

func isTrue(b *bool) bool { return b != nil && *b }

// equal reads a matcher's isEqual, which Alertmanager leaves out for older silences (meaning true).
func equal(m *models.Matcher) bool { return m.IsEqual == nil || *m.IsEqual }
