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

// Lock is the storage backend of a lease, e.g. RedisLock. (A Kubernetes
// Lease is supported one level up: pkg/lease/kubelease provides a whole
// elector, built on client-go's leader election, that producer.Config.Elector
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
}

// sameTenure reports whether r and o identify the same tenure.
func (r Record) sameTenure(o Record) bool { return r.Holder == o.Holder && r.Epoch == o.Epoch }
