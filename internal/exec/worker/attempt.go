package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kjob/kjob/internal/base/keepalive"
	"github.com/kjob/kjob/internal/base/stagetrace"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// mono is the monotonic clock of the attempts' timers: nanoseconds since
// the process started. Claim and abandonment deadlines never use the wall
// clock.
var monoBase = time.Now()

func mono() int64 { return int64(time.Since(monoBase)) }

// monoOf returns t (read from time.Now, so with its monotonic reading) on
// the mono clock.
func monoOf(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// errAbandoned is the cause recorded for an abandoned attempt.
var errAbandoned = machine.ErrAbandoned

// attempt is one handler run under a claim. The loop owns it; the claim's
// keepalive is shared with the extend calls and the partition's watchdog,
// which may cancel the handler themselves: stepping down never waits for
// the loop.
//
// Its deadlines are the claim's step-down deadline (its keepalive's
// Deadline: w.claims.Proof() after the start of the last call that proved
// the claim) and the abandonment deadline (Grace after the handler's
// context was done: its timeout, or when it was cancelled). The keepalive
// has no timer of its own: the partition's watchdog drives it (Check).
type attempt struct {
	l  *loop
	wn *win

	// claim is the claim kept proven: extends Prove it, a fence Stops it,
	// and it expires (stepDown) if no call proved it in time.
	claim     keepalive.Keepalive
	cancelled atomic.Int64 // mono() when the handler's context was cancelled early; 0 if not
	fenced    atomic.Bool
	mu        sync.Mutex
	why       error // guarded by mu: the cause the handler was cancelled with (fence, step-down)

	dog        int         // index in the partition's watchdog (guarded by the watchdog)
	stopped    atomic.Bool // stopAttempt ran: the watchdog leaves it alone
	abandoning atomic.Bool // the watchdog handed it to the loop to abandon

	cancel  context.CancelCauseFunc
	timeout *deadline // the context that carries the timeout (at, mono); hctx derives from it
	hctx    context.Context
	end     func(error) // Config.OnAttempt's end, if any
	started time.Time
	ended   bool // the loop handled its result
	// stepDownAt is the step-down deadline at Start: an extend that
	// proved the claim since moved the keepalive's past it.
	stepDownAt time.Time
}

// start runs wn's handler under its claim (the rules' Start action). The
// handler's context is bounded by the window's timeout (Window.TimeoutAt,
// rounded down to the millisecond: deadlineFor) and the partition's
// ownership, and is cancelled with cause ErrClaimUnproven at
// Window.StepDownAt, a margin before the claim could expire, unless an
// extend proved it again (w.claims.Proof() after the start of the last
// successful claim or extend): the claim's keepalive and the partition's
// watchdog keep that deadline on their own goroutine, so stepping down
// never waits for the loop.
func (l *loop) start(wn *win) {
	w := l.w
	a := &attempt{l: l, wn: wn, started: time.Now(), dog: -1}
	if !w.realClock {
		a.started = w.cfg.Now()
	}
	wn.att = a
	wn.ran = ran{started: a.started}
	stagetrace.Stamp(stagetrace.Started, wn.msg.ScheduledAt, a.started)
	l.running[a] = struct{}{}
	stepDownAt := wn.m.StepDownAt(l.rules)
	a.claim.Init(w.claims, stepDownAt.Add(-w.claims.Proof()), a.stepDown)
	a.stepDownAt = stepDownAt
	a.timeout = l.deadlineFor(monoOf(wn.m.TimeoutAt()))
	hctx, cancel := context.WithCancelCause(a.timeout.ctx)
	a.cancel = cancel
	job := l.jobOf(wn)
	if w.cfg.OnAttempt != nil {
		hctx, a.end = w.cfg.OnAttempt(hctx, wn.rec, job.Name(), job.ID(), job.Attempt(), job.FencingToken())
	}
	a.hctx = hctx
	if w.log.Enabled(l.ctx, slog.LevelDebug) {
		l.logger(wn).Debug("running window", "handler", wn.msg.Handler, "lateness", a.started.Sub(wn.msg.ScheduledAt))
	}
	l.dog.watch(a, a.deadline())
	w.running.Add(1)
	w.inFlight.Add(1)
	l.launch = append(l.launch, launch{a: a, ctx: hctx, job: job})
}

// deadline returns the attempt's next deadline (mono): the step-down
// deadline while the claim is still to be proven, and the abandonment
// deadline.
func (a *attempt) deadline() int64 {
	at := a.abandonAt()
	if a.claim.Err() == nil { // neither stepped down nor fenced
		at = min(at, monoOf(a.claim.Deadline()))
	}
	return at
}

// abandonAt is when the handler is abandoned if it has not returned: Grace
// after its context was done (its timeout, or an earlier cancel).
func (a *attempt) abandonAt() int64 {
	done := a.timeout.at // the handler's timeout
	if c := a.cancelled.Load(); c != 0 {
		done = min(done, c)
	}
	return done + int64(a.l.w.cfg.Grace)
}

// stepDown cancels the handler: its claim can no longer be proven. It is
// the claim keepalive's onExpire, run once, on the partition's watchdog.
func (a *attempt) stepDown(x keepalive.Expiry) {
	ttl := a.l.w.cfg.Store.ClaimTTL()
	why := fmt.Sprintf("no extend succeeded for %v", x.Unproven().Round(time.Millisecond))
	err := fmt.Errorf("%w: %s; the claim may expire within %v", ErrClaimUnproven, why, a.l.w.claims.Margin())
	a.l.log.Warn("claim can no longer be proven; cancelling the handler before the claim can expire",
		"window", a.wn.msg.ID, "token", a.wn.claim.token, "reason", why, "claim_ttl", ttl)
	a.cancelWith(err, monoOf(x.At))
}

// cancelWith cancels the handler's context with cause, and starts its
// grace before it is abandoned.
func (a *attempt) cancelWith(cause error, now int64) {
	a.setWhy(cause)
	a.cancel(cause)
	a.noteCancelled(now)
}

// noteCancelled records that the handler's context was cancelled at now
// (mono), so it is abandoned Grace later if it has not returned.
func (a *attempt) noteCancelled(now int64) {
	if a.cancelled.CompareAndSwap(0, now) {
		a.l.dog.poke(a.abandonAt())
	}
}

// fence cancels the handler: an extend found the claim taken over. The
// claim's keepalive stops (no step-down follows), unless it expired
// first: then the handler was cancelled as stepped down already.
func (a *attempt) fence(err error) {
	if !a.claim.Stop() {
		return
	}
	a.fenced.Store(true)
	a.l.log.Warn("claim lost while the handler runs; cancelling it", "window", a.wn.msg.ID, "token", a.wn.claim.token, "err", err)
	a.cancelWith(fmt.Errorf("claim lost: %w", err), mono())
}

// supersede cancels the handler: a newer window of the job replaced it.
func (a *attempt) supersede() {
	a.l.logger(a.wn).Info("cancelling the running window: a newer window of its job replaced it (overlap policy replace)")
	a.cancel(ErrSuperseded)
	a.noteCancelled(mono())
}

func (a *attempt) setWhy(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.why == nil {
		a.why = err
	}
}

func (a *attempt) whyErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.why
}

// returned: the handler returned. took is how long it ran: it decides
// whether the handler's next windows share runners (dispatch).
func (l *loop) returned(in handlerReturned) {
	a := in.a
	if slow := in.took >= quickHandler; slow != l.slow[a.wn.msg.Handler] {
		if slow {
			l.slow[a.wn.msg.Handler] = true
		} else {
			delete(l.slow, a.wn.msg.Handler)
		}
	}
	if a.ended { // abandoned before
		return
	}
	l.attemptOver(a, in.err, in.finished, false)
}

// abandon: the handler's context has been done for Grace without the
// handler returning; its goroutine is left running.
func (l *loop) abandon(a *attempt) {
	if a.ended {
		return
	}
	err := fmt.Errorf("%w for %v after %v", errAbandoned, l.w.cfg.Grace, context.Cause(a.hctx))
	l.attemptOver(a, err, l.w.cfg.Now(), true)
}

// attemptOver ends a's watch and contexts, and tells its window's rules
// how the attempt went: what the extends, the fence and the step-down
// found on their goroutines while it ran (at the times they recorded),
// then its end, the handler's return or its abandonment.
func (l *loop) attemptOver(a *attempt, err error, finished time.Time, abandoned bool) {
	wn := a.wn
	a.ended = true
	a.stopped.Store(true)
	l.dog.unwatch(a)
	fenced, unproven := a.fenced.Load(), errors.Is(a.claim.Err(), keepalive.ErrExpired)
	if (fenced || unproven) && !abandoned {
		err = a.whyErr()
		if err == nil {
			// The handler returned while the step-down (or fence) that
			// flipped the flag was still recording its cause.
			err = ErrClaimUnproven
			if fenced {
				err = fmt.Errorf("claim lost: %w", dedupe.ErrFenced)
			}
		}
	}
	a.cancel(nil)
	l.releaseDeadline(a.timeout)
	if a.end != nil {
		a.end(err)
	}
	l.w.inFlight.Add(-1)
	delete(l.running, a)
	wn.att = nil
	wn.ran = ran{started: a.started, finished: finished, err: err}

	if err != nil && !l.stopped && l.ctx.Err() != nil {
		// The partition's context ended before this turn saw it: the
		// end counts from now, before this attempt's.
		l.stop()
	}
	proof := l.w.claims.Proof()
	d := a.claim.Deadline()
	if d.After(a.stepDownAt) {
		l.step(wn, machine.Extended{At: d.Add(-proof)})
	}
	switch {
	case fenced:
		at := time.Now()
		if c := a.cancelled.Load(); c != 0 {
			at = monoBase.Add(time.Duration(c))
		}
		l.step(wn, machine.Fenced{Now: at})
	case unproven:
		l.step(wn, machine.TimerFired{Now: d})
	}
	now := time.Now()
	if abandoned {
		// The watchdog's deadline is the rules' (AbandonAt) rounded down
		// to the millisecond (deadlineFor).
		l.step(wn, machine.TimerFired{Now: later(now, wn.m.AbandonAt(l.rules)), Jitter: rand.Float64()})
		return
	}
	// One Returned of the loop's, passed by pointer: no allocation per
	// attempt (the rules keep nothing of an event), and no step that this
	// one causes ends an attempt.
	ret := &l.ret
	*ret = machine.Returned{Err: err, Now: now, Jitter: rand.Float64()}
	if err != nil && l.stopped {
		if sk, ok := l.w.replaySkips.lookup(l.n, wn.rec.Offset); ok {
			ret.ReplaySkip, wn.rare().skip = sk.reason, sk
		}
	}
	l.step(wn, ret)
	*ret = machine.Returned{} // keep no handler's error alive
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// extendClaims extends the claims of every running attempt of the
// partition in one store call (one script call on a single server), at
// most one call in flight. Each success proves its claim again from the
// call's start; a claim found taken over cancels its handler. Extends are
// bounded by the store call timeout; the attempts' own step-down timers
// cancel any handler whose claim goes unproven meanwhile.
func (l *loop) extendClaims() {
	l.flushRuns = true // history of a quiet partition: with the next kick
	if l.extend || len(l.running) == 0 && l.held == 0 {
		return
	}
	var atts []*attempt
	var ss []dedupe.Settlement
	for a := range l.running {
		if a.claim.Err() != nil { // fenced or stepped down
			continue
		}
		atts = append(atts, a)
		ss = append(ss, dedupe.Settlement{ID: a.wn.msg.ID, Op: dedupe.OpExtend, Token: a.wn.claim.token})
	}
	// The claims held until their windows' start, after the attempts'
	// (their answers are res[len(atts):]).
	var held []heldClaim
	if l.held > 0 {
		for wn := l.live.head; wn != nil; wn = wn.nextLive {
			if wn.m.State() == machine.Held {
				held = append(held, heldClaim{wn: wn, token: wn.m.Token()})
				ss = append(ss, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpExtend, Token: wn.m.Token()})
			}
		}
	}
	if len(ss) == 0 {
		return
	}
	l.extend = true
	w := l.w
	go func() {
		at := time.Now()
		cctx, cancel := context.WithTimeout(l.ctx, storeCallTimeout)
		res, err := w.cfg.Store.Settle(cctx, ss)
		cancel()
		if err == nil {
			w.storeUp(l.log)
		} else if l.ctx.Err() == nil {
			w.storeFailed(l.log, "extend", err)
			l.log.Warn("cannot extend the claims of the running windows; retrying until their step-down deadlines", "windows", len(atts), "err", err)
		}
		for i, a := range atts {
			switch {
			case err != nil:
			case res[i].Err == nil:
				a.claim.Prove(at)
			case errors.Is(res[i].Err, dedupe.ErrFenced), errors.Is(res[i].Err, dedupe.ErrAlreadyDone):
				a.fence(res[i].Err)
			}
		}
		if len(held) > 0 && err == nil {
			l.inbox.post(heldExtended{claims: held, at: at, res: res[len(atts):]})
		}
		l.inbox.post(extendAnswered{})
	}()
}

// deadline is a context whose deadline is a handler timeout: the handler
// contexts of all the attempts whose timeouts end in the same millisecond
// derive from one (deadlineFor), so a window in flight costs no timer and
// no context of its own for its timeout, and the handler still sees what
// context.WithTimeout would show it: Deadline() reports the timeout, and
// when it passes Err() is context.DeadlineExceeded, as is its cause, in
// the handler's context and in every context the handler derives from it.
type deadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     int64 // mono, a whole millisecond
	refs   int   // attempts not ended whose context derives from ctx
}

// deadlineFor returns the deadline context of an attempt whose timeout
// ends at (mono), rounded down to the millisecond so that attempts started
// together share one: a handler's timeout is at most 1ms shorter than its
// policy's. The caller releases it when the attempt ends
// (releaseDeadline).
func (l *loop) deadlineFor(at int64) *deadline {
	at -= at % int64(time.Millisecond)
	d := l.deadlines[at]
	if d == nil {
		ctx, cancel := context.WithDeadline(l.ctx, monoBase.Add(time.Duration(at)))
		d = &deadline{ctx: ctx, cancel: cancel, at: at}
		l.deadlines[at] = d
	}
	d.refs++
	return d
}

// releaseDeadline is the end of an attempt that took d: the last one
// releases d's timer.
func (l *loop) releaseDeadline(d *deadline) {
	if d.refs--; d.refs == 0 {
		d.cancel()
		delete(l.deadlines, d.at)
	}
}

// heldClaim is the claim of a Held window an extend call carries.
type heldClaim struct {
	wn    *win
	token int64
}

// heldExtended: the extend call that started at at answered res for the
// claims of Held windows (extendClaims).
type heldExtended struct {
	claims []heldClaim
	at     time.Time
	res    []dedupe.Result
}

func (heldExtended) input() {}

// heldExtended steps the Held windows with what the extend call found: a
// claim proven again, or taken over. A window that moved on since (its
// start came and it runs, or the partition halted) ignores it.
func (l *loop) heldExtended(in heldExtended) {
	now := time.Now()
	for i, h := range in.claims {
		if h.wn.m.State() != machine.Held || h.wn.m.Token() != h.token {
			continue
		}
		switch err := in.res[i].Err; {
		case err == nil:
			l.step(h.wn, machine.Extended{At: in.at})
		case errors.Is(err, dedupe.ErrFenced), errors.Is(err, dedupe.ErrAlreadyDone):
			l.logger(h.wn).Warn("the claim held until the window's start was taken over; claiming it again", "err", err)
			l.step(h.wn, machine.Fenced{Now: now})
		}
	}
}
