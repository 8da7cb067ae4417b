// Package actions is the Alertmanager webhook receiver that acts on nodes: the webhook (package webhook) takes
// alerts, the executor (package executor) decides with the policy (package policy) and acts. Replicas elect a leader
// on a Lease; only the leader takes work, followers answer 503 so Alertmanager retries and reaches the leader.
package actions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/executor"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/silence"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
)

// Leader election defaults (client-go's usual values).
const (
	DefaultLeaseName     = "gke-disruption-exporter-actions"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// EventComponent is the source of the events the service writes about nodes (docs/install.md selects them by it).
const EventComponent = "gke-disruption-exporter-actions"

// Options configure the service.
type Options struct {
	Config *config.Config
	DryRun bool
	Client kubernetes.Interface
	// LeaseClient renews the Lease. Give it a client of its own: client-go's rate limiter is per client, and on a busy
	// API server renewals queued behind node writes would cost the Lease. Nil: Client.
	LeaseClient kubernetes.Interface
	// Identity names this replica: the Lease holder and the claimed-by and cordoned-by annotations.
	Identity string
	// Self is this replica's pod, never evicted.
	Self types.NamespacedName
	// LeaseNamespace holds the Lease (POD_NAMESPACE, else default); LeaseName defaults to DefaultLeaseName.
	LeaseNamespace string
	LeaseName      string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	// MaxRequestBytes bounds webhook bodies (default webhook.DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// WebhookUsers are the web-config users allowed to post (nil: webhook.DefaultUsers).
	WebhookUsers []string
	// Cluster is the cluster this service acts on: alerts labelled with another are refused. "" accepts all.
	Cluster string
	// RequeueInterval is how often waiting work is evaluated again without a node change.
	RequeueInterval time.Duration
	// Silencer, when set, keeps Alertmanager silences for the nodes with work while this replica leads.
	Silencer   *silence.Silencer
	Registerer prometheus.Registerer
	// GKE is the cluster in the GKE API, for the policy keys that need it; nil without one.
	GKE executor.GKE
	// Calendar is the cluster's maintenance window and exclusions, for policy windows from the cluster; nil: read
	// through GKE at most once a minute.
	Calendar executor.Calendar
}

// Service is one replica.
type Service struct {
	logger      *slog.Logger
	opts        Options
	executor    *executor.Executor
	webhook     *webhook.Handler
	broadcaster record.EventBroadcaster
	fence       *leaseFence
	cfg         atomic.Pointer[config.Config]
}

// New builds the service; Run runs it and Webhook serves Alertmanager.
func New(logger *slog.Logger, opts Options) (*Service, error) {
	if opts.Identity == "" {
		return nil, fmt.Errorf("no replica identity")
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = metav1.NamespaceDefault
	}
	if opts.LeaseName == "" {
		opts.LeaseName = DefaultLeaseName
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = webhook.DefaultMaxRequestBytes
	}
	broadcaster := record.NewBroadcaster()
	fence := &leaseFence{}
	exec, err := executor.New(logger, executor.Options{
		Config:          opts.Config,
		DryRun:          opts.DryRun,
		Client:          opts.Client,
		Recorder:        broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: opts.Identity}),
		Identity:        opts.Identity,
		Owner:           opts.LeaseNamespace + "/" + opts.LeaseName,
		Self:            opts.Self,
		RequeueInterval: opts.RequeueInterval,
		Registerer:      opts.Registerer,
		Fence:           fence.held,
		GKE:             opts.GKE,
		Calendar:        opts.Calendar,
	})
	if err != nil {
		return nil, err
	}
	hook, err := webhook.NewHandler(logger, exec, opts.MaxRequestBytes, opts.WebhookUsers, opts.Registerer)
	if err != nil {
		return nil, err
	}
	hook.SetCluster(opts.Cluster)
	s := &Service{logger: logger, opts: opts, executor: exec, webhook: hook, broadcaster: broadcaster, fence: fence}
	s.cfg.Store(opts.Config)
	return s, nil
}

// Webhook is the handler for webhook.Path.
func (s *Service) Webhook() http.Handler { return s.webhook }

// HasSynced reports whether the node list has been read.
func (s *Service) HasSynced() bool { return s.executor.HasSynced() }

// Leading reports whether this replica is the leader and takes work.
func (s *Service) Leading() bool { return s.executor.Leading() }

// Ready is readiness: only the leader, with its node list read and current, takes alerts; a follower is not ready,
// so the Service sends Alertmanager to the leader. A node watch failing for longer than the collectors' grace
// makes the leader unready too: it would decide on a stale cache.
func (s *Service) Ready() bool {
	return s.executor.HasSynced() && s.executor.Fresh() == nil && s.executor.Leading()
}

// SetConfig replaces the policy (a reload); running work carries on under it.
func (s *Service) SetConfig(cfg *config.Config) error {
	if err := s.executor.SetConfig(cfg); err != nil {
		return err
	}
	s.cfg.Store(cfg)
	return nil
}

// silences is what the silencer keeps: the nodes with work, under the policy's silences section; nothing may be
// written in dry run.
func (s *Service) silences() (silence.Desired, bool) {
	cfg := s.cfg.Load()
	if s.opts.DryRun || cfg.DryRun {
		return silence.Desired{}, false
	}
	return silence.Desired{Work: silence.Wanted(s.executor.Nodes()), Config: cfg.Silences}, true
}

// Run watches nodes and campaigns for leadership until ctx ends; while leading it acts.
func (s *Service) Run(ctx context.Context) error {
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.opts.Client.CoreV1().Events("")})
	defer s.broadcaster.Shutdown()
	informerDone := make(chan struct{})
	go func() { s.executor.Run(ctx); close(informerDone) }()
	defer func() { <-informerDone }()

	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: s.opts.LeaseNamespace, Name: s.opts.LeaseName},
			Client:     s.leaseClient().CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: s.opts.Identity},
		},
		fence:    s.fence,
		validity: s.opts.RenewDeadline,
	}
	s.logger.Info("campaigning for leadership", "lease", s.opts.LeaseNamespace+"/"+s.opts.LeaseName, "identity", s.opts.Identity)
	for ctx.Err() == nil {
		if err := s.campaign(ctx, lock); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) leaseClient() kubernetes.Interface {
	if s.opts.LeaseClient != nil {
		return s.opts.LeaseClient
	}
	return s.opts.Client
}

// campaign runs one leader election round: it waits for the Lease, leads until the Lease is lost or ctx ends, and
// returns only after the term's work has stopped, so a replica never acts while campaigning again.
func (s *Service) campaign(ctx context.Context, lock resourcelock.Interface) error {
	var (
		mu   sync.Mutex
		over bool
		term chan struct{}
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: s.opts.LeaseDuration,
		RenewDeadline: s.opts.RenewDeadline,
		RetryPeriod:   s.opts.RetryPeriod,
		// The Lease is released below, once this term's work has stopped, never before.
		ReleaseOnCancel: false,
		Name:            s.opts.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			// The elector starts this in a goroutine and does not wait for it.
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				term = make(chan struct{})
				defer close(term)
				mu.Unlock()
				s.logger.Info("became leader", "identity", s.opts.Identity)
				var silencing sync.WaitGroup
				if s.opts.Silencer != nil {
					silencing.Go(func() { s.opts.Silencer.Run(leadCtx, s.silences) })
				}
				if err := s.executor.Lead(leadCtx); err != nil && leadCtx.Err() == nil {
					s.logger.Error("leading", "err", err)
				}
				silencing.Wait()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx)
	s.fence.revoke()
	mu.Lock()
	over = true
	t := term
	mu.Unlock()
	if t != nil {
		<-t
		s.logger.Info("no longer leader", "identity", s.opts.Identity)
	}
	if ctx.Err() != nil {
		s.release(lock)
	}
	return nil
}

// release gives up the Lease if this replica still holds it, so the other takes over at once on shutdown. It runs
// only after the term's work has stopped.
func (s *Service) release(lock resourcelock.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil || record.HolderIdentity != s.opts.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    record.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
	if err != nil {
		s.logger.Warn("releasing the Lease", "err", err)
		return
	}
	s.logger.Info("released the Lease", "identity", s.opts.Identity)
}
