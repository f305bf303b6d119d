package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/keepalive"
)

// Defaults and bounds of Config.
const (
	// DefaultTTL is Config.TTL when it is zero: a crashed leader is
	// replaced within about 2s (the lease's expiry, at which a standby
	// tries again). Safety does not rest on it (a new leader's
	// transactional id fences the old one), so it is short; its cost is
	// the renewals, DefaultRenewInterval apart.
	DefaultTTL = 2 * time.Second
	// MinTTL is the shortest Config.TTL NewElector accepts. Production
	// deployments want seconds; the low floor is for tests.
	MinTTL = 10 * time.Millisecond
	// DefaultRenewInterval is Config.RenewInterval when it is zero, unless
	// TTL/5 is shorter, in which case that is the default.
	DefaultRenewInterval = 300 * time.Millisecond
	// ReleaseTimeout bounds the Release call made when a term ends (with a
	// fresh context, since Run's may be cancelled by then).
	ReleaseTimeout = 2 * time.Second
	// expiryMargin is how long after a held lease's Remaining a standby
	// tries again: the reply's own trip makes it late already, and
	// Redis expires a key on the first access past its deadline.
	expiryMargin = 2 * time.Millisecond
)

// Config configures an Elector. Zero durations take their defaults; Lock
// and Holder are required.
type Config struct {
	// Lock is the lease's storage backend, e.g. NewRedisLock. Required.
	// Every replica of a deployment must use the same lease (same key).
	Lock Lock
	// Holder is this replica's id, unique among the replicas (e.g.
	// hostname-pid). Required. Two replicas with the same Holder never
	// share a tenure (tenures are told apart by epoch), but their logs
	// cannot be told apart.
	Holder string
	// TTL is how long the lease lives without renewal: how long a crashed
	// leader blocks the others. Default 5s, minimum 10ms.
	TTL time.Duration
	// RenewInterval is how often the leader renews the lease. It must be
	// less than TTL/2. Default 1s, or TTL/5 if that is shorter.
	//
	// The leader steps down (cancels lead's context) at s + TTL - margin,
	// where s is when the last successful renewal (or the acquisition)
	// started by the local monotonic clock and margin = max(RenewInterval,
	// TTL/5): strictly before the lease can expire in the backend. With the
	// defaults a leader that cannot reach Redis stops after 1.6s and a
	// standby takes over after at most 2s.
	RenewInterval time.Duration
	// RetryInterval is how often a replica that does not lead tries to
	// acquire the lease, and how long one waits after its term ends before
	// campaigning again. If Lock implements Watcher (RedisLock does), a
	// standby also tries the moment another replica's release is
	// announced, so a graceful handover does not wait for this; and if
	// TryAcquire says how long the holder's lease has left
	// (Record.Remaining; RedisLock does) and that is sooner, it tries
	// the moment the lease expires, so a crashed leader is replaced at
	// its lease's expiry. Polling remains the fallback, for announcements
	// that were missed. Default RenewInterval.
	RetryInterval time.Duration
	// Logger receives acquisitions, losses and releases (keys holder,
	// epoch, reason) and backend errors. Default slog.Default().
	Logger *slog.Logger
	// OnChange, if set, is called with every acquisition, loss and release,
	// synchronously from Run's goroutine (keep it fast): for metrics.
	OnChange func(Event)
}

// EventKind says what happened to leadership.
type EventKind int

const (
	// Acquired: this replica took the lease and is about to call lead.
	Acquired EventKind = iota + 1
	// Lost: leadership could no longer be proven (a renewal was refused,
	// or renewals failed until the step-down deadline); lead's context has
	// just been cancelled.
	Lost
	// Released: this replica gave the lease up (shutdown, or lead
	// returned) after lead returned.
	Released
)

// String returns "acquired", "lost" or "released".
func (k EventKind) String() string {
	switch k {
	case Acquired:
		return "acquired"
	case Lost:
		return "lost"
	case Released:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one leadership change of an Elector, passed to Config.OnChange.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Record is the tenure acquired, lost or released.
	Record Record
	// Reason explains it, e.g. "lease was free", "deadline passed",
	// "released on shutdown", "lead returned".
	Reason string
}

// Elector campaigns for a lease and runs a function while it holds it.
// Create it with NewElector; it is safe for concurrent use, but Run may be
// running at most once at a time.
type Elector struct {
	lock          Lock
	holder        string
	ttl           time.Duration
	renewInterval time.Duration
	retryInterval time.Duration
	keep          keepalive.Policy // TTL and RenewInterval: when a term steps down
	log           *slog.Logger
	onChange      func(Event)

	running atomic.Bool

	mu      sync.Mutex
	current Record
	leadCtx context.Context // of the current term; nil when not leading
}

// DefaultRenewFor is the default renew interval for a lease of ttl:
// DefaultRenewInterval, or ttl/5 if that is shorter.
func DefaultRenewFor(ttl time.Duration) time.Duration { return min(DefaultRenewInterval, ttl/5) }

// configError is a *configerr.Error about field of Config.
func configError(field string, value any, reason string, related ...string) error {
	return &configerr.Error{Op: "lease", Field: field, Value: value, Reason: reason, Related: related}
}

// NewElector validates cfg, applies its defaults and returns an Elector.
// A setting it refuses is a *configerr.Error naming the field, its value
// and the fix.
func NewElector(cfg Config) (*Elector, error) {
	if cfg.Lock == nil || isNilPointer(cfg.Lock) {
		return nil, configError("Config.Lock", nil, `is nil: set it to a Lock, e.g. lease.NewRedisLock(client, "kjob:{<deployment>}:producer-lease")`)
	}
	if cfg.Holder == "" {
		return nil, configError("Config.Holder", nil, "is empty: set a unique id per replica, e.g. hostname-pid")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < MinTTL {
		return nil, configError("Config.TTL", cfg.TTL, fmt.Sprintf("is too short: use at least %v, or 0 for the default %v", MinTTL, DefaultTTL))
	}
	if cfg.RenewInterval < 0 {
		return nil, configError("Config.RenewInterval", cfg.RenewInterval, "is negative: use a positive duration below TTL/2, or 0 for the default")
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = DefaultRenewFor(cfg.TTL)
	}
	if cfg.RenewInterval >= cfg.TTL/2 {
		return nil, configError("Config.RenewInterval", cfg.RenewInterval, fmt.Sprintf("must be less than Config.TTL/2 = %v (Config.TTL = %v): lower RenewInterval or raise TTL",
			cfg.TTL/2, cfg.TTL), "Config.TTL")
	}
	if cfg.RetryInterval < 0 {
		return nil, configError("Config.RetryInterval", cfg.RetryInterval, "is negative: use a positive duration, or 0 for the default (RenewInterval)")
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = cfg.RenewInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	keep, err := keepalive.NewPolicy(cfg.TTL, cfg.RenewInterval)
	if err != nil { // cannot happen: validated above
		return nil, &configerr.Error{Op: "lease", Field: "Config.TTL", Value: cfg.TTL,
			Reason: "with Config.RenewInterval: " + err.Error(), Related: []string{"Config.RenewInterval"}, Err: err}
	}
	return &Elector{
		lock:          cfg.Lock,
		holder:        cfg.Holder,
		ttl:           cfg.TTL,
		renewInterval: cfg.RenewInterval,
		retryInterval: cfg.RetryInterval,
		keep:          keep,
		log:           cfg.Logger,
		onChange:      cfg.OnChange,
	}, nil
}

// Current returns the record this elector holds and true while it leads:
// from acquisition until lead's context is done. For status pages
// only: act on lead's context, never on this.
func (e *Elector) Current() (Record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leadCtx == nil || e.leadCtx.Err() != nil {
		return Record{}, false
	}
	return e.current, true
}

// setCurrent records the current term; leadCtx nil means none.
func (e *Elector) setCurrent(rec Record, leadCtx context.Context) {
	e.mu.Lock()
	e.current, e.leadCtx = rec, leadCtx
	e.mu.Unlock()
}

// Run campaigns until ctx is done. Each time this replica becomes leader it
// calls lead with a context that is cancelled as soon as leadership can no
// longer be proven, and waits for lead to return before campaigning again.
//
// Leadership ends, and lead's context is cancelled, when:
//   - ctx is cancelled (shutdown): Run waits for lead to return, then
//     releases the lease with a fresh context (ReleaseTimeout) so a standby
//     takes over at once, and returns ctx.Err();
//   - a renewal is refused (the lease was deleted or taken): at once, with
//     context.Cause(leadCtx) wrapping ErrLost;
//   - renewals keep failing (backend unreachable or hung) until the
//     step-down deadline (see Config.RenewInterval), which comes strictly
//     before the lease can expire in the backend; the cause wraps ErrLost;
//   - lead returns by itself (its error, if any, is logged): the lease is
//     released and campaigning continues after RetryInterval (or at once
//     when another replica's release is announced, see Watcher).
//
// lead must return promptly once its context is done: the lease is not
// renewed after that, so a standby may start leading while a lead that
// ignores its context is still running. Publishing safety rests on Kafka
// transactions, not on this.
//
// A panic in lead is not recovered.
//
// If the Lock implements Watcher, Run also watches for releases announced
// by other replicas and tries to acquire at once when it hears one.
//
// Run owns every goroutine it starts (the watch included) and returns only
// when all have exited, which can take as long as the Lock's calls in
// flight (bounded by the Redis client's timeouts). It returns ctx.Err() on shutdown, and
// another error only for misuse (nil lead, concurrent Run).
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	if lead == nil {
		return errors.New("lease: Run: lead is nil: pass the function to run while leading")
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("lease: Run: already running: an Elector campaigns once at a time; create one Elector per campaign")
	}
	defer e.running.Store(false)

	// With a Lock that announces releases, a goroutine watches for them
	// and wakes the loop below.
	var wake chan struct{}
	if w, ok := e.lock.(Watcher); ok {
		wake = make(chan struct{}, 1)
		wctx, stopWatch := context.WithCancel(ctx)
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			e.watch(wctx, w, wake)
		}()
		defer func() { stopWatch(); <-watchDone }()
	}

	var (
		observed Record // last holder seen while following
		lastErr  string // last backend error logged while following
		// unreachable is when this replica's unbroken run of calls to
		// the lease store that got no answer began (its renewals as the
		// last leader, then its attempts to acquire); zero once the store
		// answers. A tenure won right after such a run carries its length
		// in lead's context (UnreachableBefore).
		unreachable time.Time
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, e.keep.Proof())
		rec, ok, err := e.lock.TryAcquire(actx, e.holder, e.ttl)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if unreachable.IsZero() {
				unreachable = start
			}
			if msg := err.Error(); msg != lastErr {
				e.log.Warn("lease: cannot acquire; retrying", "holder", e.holder, "err", err, "retry_in", e.retryInterval)
				lastErr = msg
			}
		case ok:
			lastErr = ""
			if ctx.Err() != nil {
				// Won the race against shutdown: give the lease straight back.
				_ = e.releaseCall(ctx, rec)
				return ctx.Err()
			}
			if took := time.Since(start); took >= e.keep.Proof() {
				// The step-down deadline passed while the call was in
				// flight: the lease proves nothing any more.
				e.log.Warn("lease acquired too late to lead; releasing it", "holder", rec.Holder, "epoch", rec.Epoch,
					"reason", fmt.Sprintf("acquisition took %v, step-down deadline is %v", took.Round(time.Millisecond), e.keep.Proof()))
				_ = e.releaseCall(ctx, rec)
				if unreachable.IsZero() {
					unreachable = start // an answer too late to use is none
				}
				break
			}
			reason := "lease was free"
			if observed.Holder != "" {
				reason = fmt.Sprintf("took over from %s (epoch %d)", observed.Holder, observed.Epoch)
			}
			observed = Record{}
			unreachable = e.term(ctx, rec, start, reason, unreachable, lead)
			// Announcements heard while leading are stale; our own
			// release is filtered out by holder in watch.
			select {
			case <-wake:
			default:
			}
		default:
			lastErr, unreachable = "", time.Time{}
			if !rec.sameTenure(observed) {
				e.log.Info("lease held by another replica", "holder", rec.Holder, "epoch", rec.Epoch, "self", e.holder)
				observed = rec
			}
		}
		wait := e.retryInterval
		if !ok && err == nil && rec.Remaining > 0 && rec.Remaining < wait {
			// The holder's lease runs out before the next retry: try the
			// moment it does, so a crashed leader is replaced at its
			// lease's expiry, not up to a RetryInterval later (the
			// producer failover row of docs/performance.md). A holder
			// that renewed meanwhile only costs this one call.
			wait = rec.Remaining + expiryMargin
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		case <-wake: // a release was announced: try at once
			e.log.Debug("lease: release announced; trying to acquire", "holder", e.holder)
		}
	}
}

// Backoff between attempts to (re)start a Watcher's watch.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 30 * time.Second
)

// watch runs w.WatchReleases until ctx is done, restarting it with a
// backoff when it fails, and sends on wake (without blocking) for every
// release announced by another holder.
func (e *Elector) watch(ctx context.Context, w Watcher, wake chan<- struct{}) {
	b := backoff.Backoff{Min: watchBackoffMin, Max: watchBackoffMax}
	lastErr := ""
	for {
		started := time.Now()
		err := w.WatchReleases(ctx, func(rec Record) {
			if rec.Holder == e.holder {
				return // our own release
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > watchBackoffMax {
			b.Reset() // it ran fine for a while
		}
		delay := b.Next()
		if msg := err.Error(); msg != lastErr {
			e.log.Warn("lease: cannot watch for releases; standbys poll every retry interval meanwhile",
				"holder", e.holder, "err", err, "retry_interval", e.retryInterval, "retry_watch_in", delay)
			lastErr = msg
		}
		if clock.Sleep(ctx, delay) != nil {
			return
		}
	}
}

// term runs one tenure: it starts lead, renews the lease until leadership
// ends, cancels lead's context, waits for lead (and any renewal in flight)
// to return, and releases the lease when that is useful. unreachable, if
// not zero, is when the run of unanswered calls to the store that preceded
// the acquisition began (see UnreachableBefore). term returns when the run
// of unanswered renewals that ended the tenure began, or zero if the
// tenure did not end that way.
func (e *Elector) term(ctx context.Context, rec Record, start time.Time, reason string, unreachable time.Time, lead func(context.Context) error) (unanswered time.Time) {
	// A call that started at s and succeeded proves the lease until s+TTL;
	// the keepalive is Done a margin before that unless a renewal proved
	// it again.
	ka := e.keep.Start(start, nil)
	defer ka.Stop()

	leadCtx, cancelLead := context.WithCancelCause(ctx)
	defer cancelLead(nil)
	renewCtx, cancelRenew := context.WithCancel(ctx)
	defer cancelRenew()

	e.setCurrent(rec, leadCtx)
	e.log.Info("lease acquired", "holder", rec.Holder, "epoch", rec.Epoch, "reason", reason)
	e.emit(Event{Kind: Acquired, Record: rec, Reason: reason})

	leadDone := make(chan error, 1)
	lctx := context.Context(leadCtx)
	if !unreachable.IsZero() {
		d := time.Since(unreachable)
		e.log.Info("lease acquired after the lease store was unreachable", "holder", rec.Holder, "epoch", rec.Epoch,
			"unreachable_for", d.Round(time.Millisecond))
		lctx = context.WithValue(leadCtx, unreachableKey{}, d)
	}
	go func() { leadDone <- lead(lctx) }()

	ticker := time.NewTicker(e.renewInterval)
	defer ticker.Stop()
	renewDone := make(chan error, 1)
	var (
		renewing     bool      // a renewal is in flight
		renewStart   time.Time // when it started
		lastRenewErr error     // of the last renewal, if it failed
		failingSince time.Time // start of the first of the renewals failing since the last success
	)

	var (
		kind          EventKind
		why           string
		release       bool
		leadErr       error
		leadExited    bool
		leadCancelled bool // lead's ctx was done when lead returned
	)
loop:
	for {
		select {
		case <-ctx.Done():
			kind, why, release = Released, "released on shutdown", true
			break loop
		case leadErr = <-leadDone:
			leadExited = true
			leadCancelled = leadCtx.Err() != nil
			kind, why, release = Released, "lead returned", true
			switch {
			case ctx.Err() != nil: // lead saw the shutdown first
				why = "released on shutdown"
			case leadErr != nil:
				why = "lead returned: " + leadErr.Error()
			}
			break loop
		case <-ka.Done():
			why = "deadline passed"
			if failingSince.IsZero() {
				failingSince = time.Now()
				if renewing {
					failingSince = renewStart // it hangs
				}
			}
			switch {
			case renewing:
				why += fmt.Sprintf(" (a renewal started %v ago has not returned)", time.Since(renewStart).Round(time.Millisecond))
			case lastRenewErr != nil:
				why += " (last renew error: " + lastRenewErr.Error() + ")"
			}
			// Releasing is only a courtesy here (the lease is ours only
			// if the backend was slow, not gone), but it lets a standby in
			// before the TTL runs out.
			kind, release = Lost, true
			break loop
		case <-ticker.C:
			if renewing {
				continue // the previous renewal is still in flight
			}
			renewing, renewStart = true, time.Now()
			go func(start time.Time) {
				// An answer after the deadline proves nothing.
				rctx, cancel := context.WithDeadline(renewCtx, ka.Deadline())
				defer cancel()
				err := e.lock.Renew(rctx, rec, e.ttl)
				if err == nil {
					ka.Prove(start) // now, not when the loop gets to it
				}
				renewDone <- err
			}(renewStart)
		case err := <-renewDone:
			renewing = false
			switch {
			case err == nil:
				lastRenewErr, failingSince = nil, time.Time{}
			case errors.Is(err, ErrLost):
				kind, why = Lost, "renew failed: "+err.Error()
				break loop
			default:
				lastRenewErr = err
				if failingSince.IsZero() {
					failingSince = renewStart
				}
				e.log.Warn("lease renew failed; retrying until the step-down deadline",
					"holder", rec.Holder, "epoch", rec.Epoch, "err", err, "deadline_in", time.Until(ka.Deadline()).Round(time.Millisecond))
			}
		}
	}

	// Step down: from here on nothing relies on the lease.
	e.setCurrent(Record{}, nil)
	if kind == Lost {
		cancelLead(fmt.Errorf("%w: %s", ErrLost, why))
		e.log.Warn("lease lost", "holder", rec.Holder, "epoch", rec.Epoch, "reason", why)
		e.emit(Event{Kind: Lost, Record: rec, Reason: why})
	} else {
		cancelLead(nil) // on shutdown leadCtx already carries ctx's cause
	}
	cancelRenew()
	if renewing {
		<-renewDone
	}
	if !leadExited {
		leadErr, leadCancelled = <-leadDone, true
	}
	switch {
	case leadErr == nil:
	case leadCancelled && errors.Is(leadErr, context.Canceled): // expected
		e.log.Debug("lease: lead returned after its context was cancelled", "holder", rec.Holder, "epoch", rec.Epoch, "err", leadErr)
	default:
		e.log.Warn("lease: lead returned an error", "holder", rec.Holder, "epoch", rec.Epoch, "err", leadErr)
	}
	if kind == Lost {
		unanswered = failingSince
	}
	if !release {
		return unanswered
	}
	if kind == Lost {
		if err := e.releaseCall(ctx, rec); err != nil {
			e.log.Debug("lease: courtesy release after loss failed", "holder", rec.Holder, "epoch", rec.Epoch, "err", err)
		}
		return unanswered
	}
	e.release(ctx, rec, why)
	return unanswered
}

// unreachableKey is the context key of UnreachableBefore's value.
type unreachableKey struct{}

// UnreachableBefore returns, from the context an Elector passed to lead,
// how long this replica had been unable to reach the lease store, without
// a break, when it won the lease: its renewals as the previous leader
// failing until it stepped down, then its attempts to acquire failing,
// until the store answered again (a Redis outage, restart or failover).
// It returns 0 when the store answered this replica's last call before
// the acquisition (a first start, a graceful handover, a crashed leader's
// lease running out), and for any other context.
//
// While the store is unreachable no replica can prove leadership, so no
// replica publishes: the windows that fell due then were missed because
// of the store, not because every replica was down. The producer
// (internal/exec/producer) publishes them after the outage, within its retry
// horizon, as it does windows its own failed transactions held back.
// The value is a lower bound of the leaderless time: a replica that
// started during the outage knows only its own part of it.
func UnreachableBefore(ctx context.Context) time.Duration {
	d, _ := ctx.Value(unreachableKey{}).(time.Duration)
	return d
}

// release gives rec up, then logs and reports it as Released for reason.
func (e *Elector) release(ctx context.Context, rec Record, reason string) {
	if err := e.releaseCall(ctx, rec); err != nil {
		reason += " (release failed, the lease expires within TTL: " + err.Error() + ")"
		e.log.Warn("lease released", "holder", rec.Holder, "epoch", rec.Epoch, "reason", reason)
	} else {
		e.log.Info("lease released", "holder", rec.Holder, "epoch", rec.Epoch, "reason", reason)
	}
	e.emit(Event{Kind: Released, Record: rec, Reason: reason})
}

// releaseCall releases rec with a fresh context: ctx's values, not its
// cancellation, bounded by ReleaseTimeout.
func (e *Elector) releaseCall(ctx context.Context, rec Record) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	return e.lock.Release(ctx, rec)
}

func (e *Elector) emit(ev Event) {
	if e.onChange != nil {
		e.onChange(ev)
	}
}
