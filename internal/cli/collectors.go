package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/collector/workloads"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// defaultSyncTimeout bounds the first read of the cluster when the command sets none.
const defaultSyncTimeout = time.Minute

// syncTimeoutError says the workloads collector did not read the cluster within the timeout.
type syncTimeoutError struct{ timeout time.Duration }

func (e *syncTimeoutError) Error() string { return "not read within " + e.timeout.String() }

// startWorkloads runs the workloads collector, the one status and audit read through its Go methods, and waits for
// its first sync, at most timeout (defaultSyncTimeout when 0). stop ends its watches and waits for them. When the
// sync does not come in time the collector is stopped and the error is a *syncTimeoutError, or ctx's error when ctx
// ended first.
func startWorkloads(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, meta metadata.Interface,
	cfg readiness.Config, timeout time.Duration) (col *workloads.Collector, stop func(), err error) {
	// Its self-monitoring series go to a registry nobody scrapes.
	col, err = workloads.New(logger, client, meta, cfg, prometheus.NewRegistry())
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { col.Run(runCtx); close(done) }()
	stop = func() { cancel(); <-done }
	if timeout <= 0 {
		timeout = defaultSyncTimeout
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return col.HasSynced(), nil }); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, &syncTimeoutError{timeout: timeout}
	}
	return col, stop, nil
}
