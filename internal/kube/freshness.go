package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// DefaultFailureGrace is how long a watch may fail before its collector reports failure: long enough for an API
// server restart or a rolling upgrade, short enough that series nobody refreshes are flagged.
const DefaultFailureGrace = time.Minute

// Freshness is the one model of whether watched data is current, for every informer and reflector of a process.
// A failed list or watch call, or a watch that ends in an error (a 410 Gone inside the stream included), starts a
// failure; only data ends it: the watch's last synced resource version moving, which a completed list, an event or
// a bookmark does. A call that merely succeeds proves nothing (a watch can be accepted and then stay silent, or
// be told in its first frame that its version is gone), and client-go's wait before a relist, up to 30 s after
// repeated errors, stays a failure meanwhile. A failure longer than the grace is reported by Err.
type Freshness struct {
	errors *prometheus.CounterVec
	grace  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	watches []*Watched
}

// NewFreshness counts watch errors in gke_disruption_watch_errors_total{resource}, registered with reg (or the one
// already registered there, so collectors of one process share it).
func NewFreshness(reg prometheus.Registerer, grace time.Duration) (*Freshness, error) {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: nodeview.Namespace,
		Name:      "watch_errors_total",
		Help:      "Failed list or watch requests and broken watches of the Kubernetes API, by resource.",
	}, []string{"resource"})
	if err := reg.Register(errs); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			return nil, err
		}
		if errs, ok = are.ExistingCollector.(*prometheus.CounterVec); !ok {
			return nil, err
		}
	}
	return &Freshness{errors: errs, grace: grace, now: time.Now}, nil
}

// SetClock replaces the clock (tests).
func (f *Freshness) SetClock(now func() time.Time) { f.now = now }

// Watched is the freshness of one watched resource.
type Watched struct {
	f          *Freshness
	resource   string
	errors     prometheus.Counter
	lastSynced func() string // the reflector's last synced resource version; nil until Track

	failingSince time.Time // zero while fresh
	failedAt     string    // the last synced version when the failure started
	lastErr      error
	callErr      error // the last failed call's error, which the informer hands its error handler too
}

// Watch adds a resource (the label value of watch_errors_total). Give its reflector or informer to Track.
func (f *Freshness) Watch(resource string) *Watched {
	w := &Watched{f: f, resource: resource, errors: f.errors.WithLabelValues(resource)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches = append(f.watches, w)
	return w
}

// Track reads data progress from lastSynced: a reflector's or informer's LastSyncResourceVersion.
func (w *Watched) Track(lastSynced func() string) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.lastSynced = lastSynced
}

// fail counts err and starts a failure, unless one is running already.
func (w *Watched) fail(err error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.failLocked(err)
}

func (w *Watched) failLocked(err error) {
	w.errors.Inc()
	w.lastErr = err
	if w.failingSince.IsZero() || w.movedLocked() {
		w.failingSince = w.f.now()
		if w.lastSynced != nil {
			w.failedAt = w.lastSynced()
		}
	}
}

// failCall is fail for the error of a list or watch call.
func (w *Watched) failCall(err error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.callErr = err
	w.failLocked(err)
}

// routine reports whether err ends a watch as every watch ends now and then: the server closing it at its timeout.
func routine(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

// ErrorHandler is the informer's watch error handler: what breaks a running watch, including a 410 Gone.
func (w *Watched) ErrorHandler(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if !routine(err) && (w.callErr == nil || !errors.Is(err, w.callErr)) {
		w.failLocked(err)
	}
}

// ListWatch wraps lw so that failed calls and error frames inside a watch count as failures. It is for reflectors,
// which take no error handler; an informer with ErrorHandler needs only the wrapping of its calls, as it would
// count an error frame twice otherwise.
func (w *Watched) ListWatch(lw cache.ListerWatcherWithContext, withFrames bool) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := lw.ListWithContext(ctx, opts)
			if err != nil {
				w.failCall(err)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			stream, err := lw.WatchWithContext(ctx, opts)
			if err != nil {
				w.failCall(err)
				return stream, err
			}
			if !withFrames {
				return stream, nil
			}
			return watch.Filter(stream, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error {
					w.fail(fmt.Errorf("watch ended: %w", apierrors.FromObject(e.Object)))
				}
				return e, true
			}), nil
		},
	}
}

// movedLocked reports whether data arrived since the failure started.
func (w *Watched) movedLocked() bool { return w.lastSynced != nil && w.lastSynced() != w.failedAt }

// errLocked is the watch's failure if it has lasted longer than the grace, nil otherwise; a failure the data
// has moved past since is over.
func (w *Watched) errLocked(now time.Time) error {
	if w.failingSince.IsZero() {
		return nil
	}
	if w.movedLocked() {
		w.failingSince, w.lastErr = time.Time{}, nil
		return nil
	}
	if now.Sub(w.failingSince) <= w.f.grace {
		return nil
	}
	return fmt.Errorf("%s list/watch failing since %s: %w", w.resource, w.failingSince.UTC().Format(time.RFC3339), w.lastErr)
}

// Err reports the watches failing for longer than the grace.
func (f *Freshness) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var errs []error
	for _, w := range f.watches {
		if err := w.errLocked(now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
