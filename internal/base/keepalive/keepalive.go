// Package keepalive keeps something proven (a lease, a claim) and steps
// down strictly before it can expire unless it is proven again. It is the
// one primitive behind the producer's lease elector (internal/store/lease) and the
// worker's claim on a running handler (internal/exec/worker), modelled on etcd's
// concurrency.Session: a lease kept alive, Done when it cannot be.
//
// What is kept alive lives for a TTL in its backend (Redis) after each call
// that renews it succeeds. Only the local monotonic clock is trusted: a
// call that started at s and succeeded proves it until s + TTL, whatever
// the backend's clock says and however long the answer took. A Keepalive
// expires at s + TTL - margin, margin = max(RenewInterval, TTL/5), where s
// is the start of the last call that proved it (Prove): strictly before
// the backend can let it go, so the owner stops relying on it first.
//
// A Keepalive started with Policy.Start has one runtime timer (about 0.9µs
// and three small allocations to start and stop); one embedded in its
// owner and driven by a timer the owner already has (Init and Check) has
// none and allocates nothing. It never starts a goroutine. Prove is a lock-free
// compare-and-swap, safe from any goroutine, and never moves the proof
// back. Expiry is final: a proof that arrives after the deadline has
// passed does not revive it.
package keepalive

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrExpired is Keepalive.Err after its step-down deadline passed without
// a new proof.
var ErrExpired = errors.New("keepalive: expired (not proven again before its step-down deadline)")

// ErrStopped is Keepalive.Err after Stop.
var ErrStopped = errors.New("keepalive: stopped")

// Margin is how long before what is kept alive can expire a Keepalive
// steps down: max(renewInterval, ttl/5). It leaves a renewal interval, and
// at least a fifth of the TTL, for timers that fire late and for the
// owner to stop what it does.
func Margin(ttl, renewInterval time.Duration) time.Duration {
	return max(renewInterval, ttl/5)
}

// Policy is how long what is kept alive lives and how often it is renewed.
// Build it with NewPolicy; the zero Policy is not usable.
type Policy struct {
	ttl, interval, margin time.Duration
}

// NewPolicy validates ttl (how long the backend keeps what a successful
// call renewed) and renewInterval (how often the owner renews it), which
// must be positive and less than ttl/2.
func NewPolicy(ttl, renewInterval time.Duration) (Policy, error) {
	switch {
	case ttl <= 0:
		return Policy{}, fmt.Errorf("keepalive: TTL = %v is not positive: use how long the backend keeps what a renewal proved", ttl)
	case renewInterval <= 0:
		return Policy{}, fmt.Errorf("keepalive: renew interval = %v is not positive: use a duration below TTL/2 = %v", renewInterval, ttl/2)
	case renewInterval >= ttl/2:
		return Policy{}, fmt.Errorf("keepalive: renew interval = %v must be less than TTL/2 = %v (TTL %v): lower the interval or raise the TTL", renewInterval, ttl/2, ttl)
	}
	return Policy{ttl: ttl, interval: renewInterval, margin: Margin(ttl, renewInterval)}, nil
}

// TTL is how long the backend keeps what a successful call renewed.
func (p Policy) TTL() time.Duration { return p.ttl }

// RenewInterval is how often the owner renews.
func (p Policy) RenewInterval() time.Duration { return p.interval }

// Margin is max(RenewInterval, TTL/5): how long before the TTL runs out a
// Keepalive steps down.
func (p Policy) Margin() time.Duration { return p.margin }

// Proof is how long a successful call proves what it renewed, from the
// call's start: TTL - Margin. A call that takes this long or longer proves
// nothing by the time it answers.
func (p Policy) Proof() time.Duration { return p.ttl - p.margin }

// Expiry describes how a Keepalive expired; it is passed to the onExpire
// function.
type Expiry struct {
	// Proven is when the call that last proved it started.
	Proven time.Time
	// Deadline is Proven + Policy.Proof(): when it was due to step down.
	Deadline time.Time
	// At is when it expired: at or a little after Deadline (how late its
	// timer fired), and before Proven + TTL unless the process was paused
	// longer than the margin.
	At time.Time
}

// Unproven is how long no call had proven it when it expired: At - Proven.
func (x Expiry) Unproven() time.Duration { return x.At.Sub(x.Proven) }

// base is the origin of the monotonic nanoseconds a Keepalive stores, so
// that proofs fit an atomic int64.
var base = time.Now()

func nanos(t time.Time) int64 { return int64(t.Sub(base)) }

func timeOf(ns int64) time.Time { return base.Add(time.Duration(ns)) }

const (
	live int32 = iota
	expired
	stopped
)

// closed is Done's channel of a Keepalive that ended before anyone asked.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Keepalive is one thing kept proven: live until its step-down deadline
// (Policy.Proof after the start of the last call that proved it) passes
// without a new proof, or until Stop. Create it with Policy.Start, or
// embed it and call Init. Its methods are safe for concurrent use.
type Keepalive struct {
	proof    int64        // Policy.Proof, in nanoseconds
	proven   atomic.Int64 // nanos of the start of the call that last proved it
	state    atomic.Int32 // live, expired or stopped
	onExpire func(Expiry)

	mu       sync.Mutex
	timer    *time.Timer   // Start's; nil for Init
	done     chan struct{} // made by the first Done before release
	released bool          // release ran: Done is closed
}

// Start returns a Keepalive proven by a call that started at proven, with
// a timer of its own: at its step-down deadline, unless proven again, it
// expires, calls onExpire (if not nil) on the timer's goroutine and then
// closes Done. onExpire must not block: it runs strictly before what is
// kept alive can expire, and whatever it cancels should be cancelled
// then. If the deadline has passed already, it expires at once. Stop it
// when it is no longer needed, to release its timer.
func (p Policy) Start(proven time.Time, onExpire func(Expiry)) *Keepalive {
	k := &Keepalive{}
	k.Init(p, proven, onExpire)
	k.mu.Lock()
	k.timer = time.AfterFunc(time.Until(k.Deadline()), k.fire)
	k.mu.Unlock()
	return k
}

// Init readies the zero Keepalive k, proven by a call that started at
// proven, without a timer: for an owner that already runs a timer of its
// own (say, for other deadlines of the same thing) and keeps one timer
// per instance. The owner arms that timer for Deadline and calls Check
// when it fires, and again for the new Deadline while Check reports k
// live; Check runs onExpire (if not nil) on the calling goroutine when the
// deadline has passed. Init must be called once, before any other method.
func (k *Keepalive) Init(p Policy, proven time.Time, onExpire func(Expiry)) {
	if p.ttl <= 0 {
		panic("keepalive: Init with a zero Policy: build it with NewPolicy")
	}
	k.proof = int64(p.Proof())
	k.proven.Store(nanos(proven))
	k.onExpire = onExpire
}

// Prove records that a call that started at start (by this process's
// monotonic clock, e.g. a time.Now() taken before the call) succeeded in
// renewing what k keeps alive, which moves the step-down deadline to
// start + Policy.Proof() unless a later start proved it already: the
// proof never moves back. It reports whether k is still live; a proof
// that arrives after k expired or stopped changes nothing.
func (k *Keepalive) Prove(start time.Time) bool {
	s := nanos(start)
	for {
		old := k.proven.Load()
		if s <= old || k.proven.CompareAndSwap(old, s) {
			break
		}
	}
	return k.state.Load() == live
}

// Proven returns when the call that last proved k started.
func (k *Keepalive) Proven() time.Time { return timeOf(k.proven.Load()) }

// Deadline returns when k steps down unless proven again: Policy.Proof()
// after the start of the last call that proved it. A renewal call should
// not outlive it (use it as the call's context deadline): an answer after
// it proves nothing.
func (k *Keepalive) Deadline() time.Time { return timeOf(k.proven.Load() + k.proof) }

// Check expires k if its deadline is at or before now, running onExpire
// on the calling goroutine, and reports whether k is still live (neither
// expired nor stopped). Policy.Start's timer calls it; so does the owner
// of a Keepalive readied by Init.
func (k *Keepalive) Check(now time.Time) bool {
	if k.state.Load() != live {
		return false
	}
	p := k.proven.Load()
	if nanos(now) < p+k.proof {
		return true
	}
	// A Prove racing with this may be lost: k then steps down although
	// the call that proved it answered at its deadline. That is the safe
	// side.
	if !k.state.CompareAndSwap(live, expired) {
		return false
	}
	// onExpire runs before Done is closed, so whoever sees Done closed
	// also sees what onExpire did (say, a handler's context cancelled).
	if k.onExpire != nil {
		k.onExpire(Expiry{Proven: timeOf(p), Deadline: timeOf(p + k.proof), At: now})
	}
	k.release()
	return false
}

// fire is Start's timer function: it checks k and, while it is live (it
// was proven since the timer was set), waits for the new deadline.
func (k *Keepalive) fire() {
	if !k.Check(time.Now()) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state.Load() == live { // else Stop ran meanwhile and stopped the timer
		k.timer.Reset(time.Until(k.Deadline()))
	}
}

// Stop ends k without expiring it: onExpire will not run, Done is closed
// and Err is ErrStopped, and Start's timer is released. It reports
// whether it stopped k; false means k had expired (onExpire ran, or is
// running) or was stopped already.
func (k *Keepalive) Stop() bool { return k.end(stopped) }

// end moves k from live to state s, closes Done and stops the timer; it
// reports whether k was live.
func (k *Keepalive) end(s int32) bool {
	if !k.state.CompareAndSwap(live, s) {
		return false
	}
	k.release()
	return true
}

// release closes Done and stops the timer of a k that has just ended.
func (k *Keepalive) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.released = true
	if k.done != nil {
		close(k.done)
	}
	if k.timer != nil {
		k.timer.Stop()
	}
}

// Done returns a channel that is closed when k expires or is stopped.
// With Init, it is closed only when Check (or Stop) is called: by the
// owner's timer.
func (k *Keepalive) Done() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done == nil {
		if k.released {
			return closed
		}
		k.done = make(chan struct{})
	}
	return k.done
}

// Err returns nil while k is live, ErrExpired once it expired and
// ErrStopped once it was stopped.
func (k *Keepalive) Err() error {
	switch k.state.Load() {
	case expired:
		return ErrExpired
	case stopped:
		return ErrStopped
	}
	return nil
}
