package lease

import (
	"context"
	"errors"
	"time"
)

// Errors callers branch on with errors.Is. Every other error from a Lock
// (an unreachable backend, a cancelled context) means the outcome is
// unknown.
var (
	// ErrLost is returned by Lock.Renew when the record passed in is no
	// longer the lease's current tenure: the lease expired, was released,
	// deleted or taken by someone else. It is also the cause
	// (context.Cause) of a lead context cancelled because leadership could
	// no longer be proven.
	ErrLost = errors.New("lease: lost")
	// ErrNoHolder is returned by Lock.Get when nobody holds the lease.
	ErrNoHolder = errors.New("lease: no holder")
)

// Lock is the storage backend of a lease, e.g. RedisLock; a Lock may also
// implement Watcher to make graceful handovers faster. (A Kubernetes Lease
// is supported one level up: kubelease provides a whole elector,
// built on client-go's leader election, that producer.Config.Elector
// accepts instead of an Elector over a Lock.) Every method must be safe for
// concurrent use. The Elector is the only intended caller; a Lock
// knows nothing about time beyond the ttl it is given.
type Lock interface {
	// TryAcquire takes the lease for holder if it is free, for ttl.
	// It returns the new Record and true if acquired, or false and the
	// current holder's Record if someone else holds it (including another
	// tenure of the same holder name).
	TryAcquire(ctx context.Context, holder string, ttl time.Duration) (Record, bool, error)
	// Renew extends the lease to ttl from now if rec is still the current
	// tenure (compare-and-extend on holder and epoch). It returns an error
	// wrapping ErrLost if it is not.
	Renew(ctx context.Context, rec Record, ttl time.Duration) error
	// Release deletes the lease if rec is still the current tenure
	// (compare-and-delete). Releasing a lease that was already lost is not
	// an error and touches nothing.
	Release(ctx context.Context, rec Record) error
	// Get returns the current holder's Record, or ErrNoHolder if none.
	Get(ctx context.Context) (Record, error)
}

// Watcher is an optional interface of a Lock whose backend can announce the
// end of a tenure as it happens. An Elector whose Lock implements it tries
// to acquire the lease as soon as another replica's release is announced,
// instead of at its next RetryInterval tick, so a graceful handover takes
// one backend round trip rather than up to RetryInterval. Polling every
// RetryInterval stays the fallback: announcements are best effort (a lease
// that expires is not announced, nor is a release made while the watch's
// connection is down), and a backend that refuses the watch (e.g. a Redis
// ACL without the channel) only makes handovers slower. Nothing about
// safety depends on it: a woken standby still has to win TryAcquire.
type Watcher interface {
	// WatchReleases calls released, from the calling goroutine, with the
	// Record of each tenure that Release ends, until ctx is done; it then
	// returns ctx.Err(). It returns another error if it cannot watch or
	// the watch breaks (subscription refused, connection lost); the
	// Elector logs it and calls WatchReleases again after a backoff.
	// released must be fast and must not block.
	WatchReleases(ctx context.Context, released func(Record)) error
}

// Record identifies one tenure of the lease: who holds it and its epoch.
// Two Records are the same tenure when Holder and Epoch are equal.
type Record struct {
	// Holder is the holder's id (Config.Holder of its Elector).
	Holder string
	// Epoch grows with each acquisition of the lease. It is a fencing and
	// observability aid (log it, put it in metrics); publishing safety does
	// not rest on it. See RedisLock for how far its monotonicity goes.
	Epoch int64
	// Acquired is when the tenure began by the backend's clock,
	// informational only: never compare it with the local clock.
	Acquired time.Time
	// Remaining is, in a Record that TryAcquire returns with false, how
	// long the holder's lease had left by the backend's clock when the
	// backend answered; zero if the backend does not say. A standby
	// retries at that moment instead of a RetryInterval later, so a
	// crashed leader is replaced as its lease expires (the producer
	// failover row of docs/performance.md).
	Remaining time.Duration
}

// sameTenure reports whether r and o identify the same tenure.
func (r Record) sameTenure(o Record) bool { return r.Holder == o.Holder && r.Epoch == o.Epoch }
