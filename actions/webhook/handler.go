package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// Path is where Alertmanager posts.
const Path = "/webhook"

// DefaultMaxRequestBytes bounds a request body: about 2,000 alerts with their labels and annotations.
const DefaultMaxRequestBytes = 4 << 20

// ErrNotLeader is returned by a Sink on a replica that does not act; the request is answered 503 so Alertmanager
// retries and reaches the leader.
var ErrNotLeader = errors.New("this replica is not the leader; retry")

// Sink takes triggers for asynchronous work. Submit must be quick: Alertmanager waits for the reply. ctx is the
// request's: it ends when the sender gives up.
type Sink interface {
	Submit(ctx context.Context, triggers []Trigger) error
}

// DefaultUsers are the web-config users allowed to post when none are named.
var DefaultUsers = []string{"alertmanager"}

// Handler serves POST /webhook.
type Handler struct {
	logger   *slog.Logger
	sink     Sink
	maxBytes int64
	users    map[string]bool
	requests *prometheus.CounterVec
	// cluster is the cluster this service acts on; "" accepts alerts of any cluster.
	cluster string
}

// ClusterLabel is the alert label that names the cluster an alert is about where one Alertmanager serves several.
const ClusterLabel = "cluster"

// SetCluster makes the handler refuse (400) alerts whose cluster label names another cluster than name: a node of
// the same name in another cluster is not ours to act on. Call it before serving; "" accepts every cluster.
func (h *Handler) SetCluster(name string) { h.cluster = name }

// NewHandler builds the handler; gke_disruption_webhook_requests_total registers with reg. users are the basic-auth
// users of the web config allowed to post (nil: DefaultUsers); any other authenticated user is refused with 403.
func NewHandler(logger *slog.Logger, sink Sink, maxBytes int64, users []string, reg prometheus.Registerer) (*Handler, error) {
	if users == nil {
		users = DefaultUsers
	}
	h := &Handler{
		logger:   logger,
		sink:     sink,
		maxBytes: maxBytes,
		users:    map[string]bool{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: nodeview.Namespace,
			Name:      "webhook_requests_total",
			Help:      "Alertmanager webhook requests by HTTP status code (requests refused by the web config, 401, are not seen here).",
		}, []string{"code"}),
	}
	for _, u := range users {
		h.users[u] = true
	}
	for _, code := range []int{http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		h.requests.WithLabelValues(strconv.Itoa(code))
	}
	if err := reg.Register(h.requests); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	code, results, msg := h.handle(w, r)
	h.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	if code != http.StatusOK {
		h.logger.Debug("webhook request refused", "code", code, "reason", msg, "remote", r.RemoteAddr)
		if code == http.StatusServiceUnavailable {
			// A follower: close the connection, so Alertmanager's retry opens a new one that the Service can route
			// to the leader rather than reusing the kept-alive one to this replica.
			w.Header().Set("Connection", "close")
		}
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := json.NewEncoder(w).Encode(results); err != nil {
		h.logger.Debug("writing webhook reply", "err", err)
	}
}

// handle returns the status code, and the per-alert results on 200 or the error text otherwise.
func (h *Handler) handle(w http.ResponseWriter, r *http.Request) (int, []Result, string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return http.StatusMethodNotAllowed, nil, "only POST is allowed"
	}
	// The web config has already authenticated basic-auth users; only the named ones may ask for actions.
	if user, _, ok := r.BasicAuth(); ok && !h.users[user] {
		return http.StatusForbidden, nil, "user " + strconv.Quote(user) + " may not post alerts (--webhook.users)"
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return http.StatusUnsupportedMediaType, nil, "Content-Type must be application/json"
	}
	if r.ContentLength > h.maxBytes {
		return http.StatusRequestEntityTooLarge, nil, "request body larger than " + strconv.FormatInt(h.maxBytes, 10) + " bytes"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			return http.StatusRequestEntityTooLarge, nil, "request body larger than " + strconv.FormatInt(h.maxBytes, 10) + " bytes"
		}
		return http.StatusBadRequest, nil, "reading request body: " + err.Error()
	}
	msg, err := Decode(body)
	if err != nil {
		return http.StatusBadRequest, nil, err.Error()
	}

	if h.cluster != "" {
		for _, a := range msg.Alerts {
			if c := a.Labels[ClusterLabel]; c != "" && c != h.cluster {
				return http.StatusBadRequest, nil, fmt.Sprintf("alert %s is for cluster %q; this service acts on cluster %q only: route each cluster's alerts to its own actions service",
					a.Labels["alertname"], c, h.cluster)
			}
		}
	}

	results := make([]Result, 0, len(msg.Alerts))
	var triggers []Trigger
	for _, a := range msg.Alerts {
		trigger, pass, res := Classify(a)
		if pass {
			triggers = append(triggers, trigger)
		}
		results = append(results, res)
	}
	if len(triggers) > 0 {
		if err := h.sink.Submit(r.Context(), triggers); err != nil {
			if errors.Is(err, ErrNotLeader) {
				return http.StatusServiceUnavailable, nil, err.Error()
			}
			h.logger.Error("queueing webhook triggers", "err", err)
			return http.StatusInternalServerError, nil, "queueing work: " + err.Error()
		}
	}
	h.logger.Debug("webhook request accepted", "receiver", msg.Receiver, "group_key", msg.GroupKey, "alerts", len(msg.Alerts), "triggers", len(triggers))
	return http.StatusOK, results, ""
}
