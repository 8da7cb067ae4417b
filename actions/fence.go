package actions

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseFence knows, by this replica's own clock, until when it surely holds the Lease: a renewal sent at t keeps
// the Lease at least until t + the lease duration on the other replicas' clocks, since they wait that long after
// they last saw it change. The fence trusts it only until t + the renew deadline; the rest of the lease duration is
// the margin for clock rates and for the time the write takes. A replica that was paused (SIGSTOP, a stalled VM)
// finds its fence expired on waking, before its leader election has noticed anything, so it writes nothing.
type leaseFence struct {
	mu    sync.Mutex
	until time.Time
}

// held reports whether the Lease is surely still ours.
func (f *leaseFence) held() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.until)
}

func (f *leaseFence) extend(until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(f.until) {
		f.until = until
	}
}

func (f *leaseFence) revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = time.Time{}
}

// fencedLock is the Lease lock of leader election, timing each of this replica's successful acquisitions and
// renewals for the fence.
type fencedLock struct {
	resourcelock.Interface
	fence    *leaseFence
	validity time.Duration
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Create(ctx, ler) })
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Update(ctx, ler) })
}

// write times the write from before it is sent: the Lease is ours from no earlier than that.
func (l *fencedLock) write(ler resourcelock.LeaderElectionRecord, do func() error) error {
	if ler.HolderIdentity != l.Identity() {
		l.fence.revoke() // a release
		return do()
	}
	sent := time.Now()
	if err := do(); err != nil {
		return err
	}
	l.fence.extend(sent.Add(l.validity))
	return nil
}
