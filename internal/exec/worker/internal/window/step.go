package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// ErrAbandoned is the error of an attempt whose handler ignored its
// cancelled context for Grace.
var ErrAbandoned = errors.New("abandoned after timeout: handler ignored cancellation")

// Step returns the window after event e, and what the shell must do, in
// order. It reads no clock and does no I/O. An event that does not apply to
// the window's state (a stale timer, a handler returning after it was
// abandoned) changes nothing and returns no action.
//
// Step is a method of Rules, the worker-wide settings, so that a window
// carries only its own state and the shell calls rules.Step(w, e).
func (r Rules) Step(w Window, e Event) (Window, []Action) {
	acts := r.StepAppend(nil, &w, e)
	return w, acts
}

// StepAppend is Step for a shell that keeps its windows and a buffer of
// actions: it changes *w in place and appends the actions to acts, so
// that a window's step costs no copy of the window and, with a reused
// buffer, no allocation for its actions. The rules are Step's.
func (r Rules) StepAppend(acts []Action, w *Window, e Event) []Action {
	s := stepper{r: r, w: w, acts: acts}
	s.on(e)
	return s.acts
}

type stepper struct {
	r    Rules
	w    *Window
	acts []Action
}

func (s *stepper) do(a ...Action) { s.acts = append(s.acts, a...) }

// ctxCause is the first cause a running handler's context was done with:
// only a supersede that came first makes the attempt superseded.
type ctxCause uint8

const (
	ctxLive ctxCause = iota
	ctxTimeout
	ctxUnproven
	ctxFenced
	ctxSuperseded
	ctxStopped
)

func (s *stepper) on(e Event) {
	w := s.w
	// A claim taken ahead whose window was dropped meanwhile is given back
	// whatever the window has become.
	if w.unchain {
		switch e := e.(type) {
		case Claimed:
			w.unchain = false
			s.do(ReleaseSlot{}, Unclaim{Token: e.Token})
			w.slot = false
			return
		case *Claimed:
			w.unchain = false
			s.do(ReleaseSlot{}, Unclaim{Token: e.Token})
			w.slot = false
			return
		case AlreadyDone, Busy, AheadRefused:
			w.unchain = false
			s.do(ReleaseSlot{})
			w.slot = false
			return
		}
	}
	if w.state.Final() {
		return
	}
	switch e := e.(type) {
	case Arrived:
		s.arrived(e)
	case *Arrived:
		s.arrived(*e)
	case Admitted:
		s.admitted()
	case Dropped:
		s.dropped(e)
	case Superseded:
		s.superseded(e)
	case SlotGranted:
		s.slotGranted(e.Now)
	case *SlotGranted:
		s.slotGranted(e.Now)
	case ChainOffered:
		if w.Chainable() {
			w.state, w.slot = Ahead, true
		}
	case Claimed, *Claimed, AlreadyDone, Busy, AheadRefused:
		s.claimAnswer(e)
	case ClaimFailed:
		if w.state != Claiming {
			return
		}
		s.releaseSlot()
		if e.Ended || w.halted {
			w.state = Left
			return
		}
		// The ids are invalid, which a decoded window's cannot be:
		// dead-letter rather than loop.
		reason := "store refused the window: " + errString(e.Err)
		s.deadLetter(reason, 0, 0, &Report{Outcome: OutcomeDeadLettered, Err: e.Err, Cause: CauseRefused, Reason: reason})
	case Tick:
		if w.Extendable() {
			s.do(Extend{Token: w.token})
		}
	case Extended:
		if w.Extendable() && e.At.After(w.proven) {
			w.proven = e.At
		}
	case Fenced:
		if w.state == Held {
			s.lostHeld()
			return
		}
		if w.Extendable() {
			w.editCancel().fenced = true
			s.cancel(e.Now, ctxFenced)
			s.do(Cancel{Cause: CauseFenced}, Watch{At: w.nextDeadline(s.r)})
		}
	case TimerFired:
		s.timer(e)
	case Returned:
		if w.state == Running {
			s.ended(e.Err, false, e)
		}
	case *Returned:
		if w.state == Running {
			s.ended(e.Err, false, *e)
		}
	case Settled:
		s.settled(e.Answer)
	case LetterWritten, LetterFailed:
		s.letter(e)
	case Halted:
		s.halt()
	case Stopped:
		w.stopped = true
		s.halt()
		if w.state == Running {
			// The handler's context derives from the partition's: it is
			// abandoned Grace after now if it has not returned.
			s.cancel(e.Now, ctxStopped)
			s.do(Watch{At: w.nextDeadline(s.r)})
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}

func (s *stepper) arrived(e Arrived) {
	w := s.w
	if w.state != Fetched {
		return
	}
	w.spec = e.Spec
	if e.Invalid != "" {
		// Not a window of ours: dead-lettered unclaimed, not in a lane.
		s.deadLetter(e.Invalid, 0, 0, &Report{Outcome: OutcomeDeadLettered, Cause: CauseInvalid, Reason: e.Invalid})
		return
	}
	w.state = New
}

func (s *stepper) admitted() {
	w := s.w
	switch {
	case w.state == New:
		s.toReady()
	case w.state == Ahead && w.ahead == nil:
		// Its lane started it before its claim ahead answered; the loop
		// never does that today (the predecessor finishes only after that
		// answer), but the claim's answer then carries on.
		w.admitted = true
	case w.state == Ahead:
		s.toReady()
	}
}

// toReady queues an active window for a slot, unless the partition starts
// nothing more, its claim was taken ahead (it goes on at once, on the slot
// it holds), or a newer window replaced it meanwhile.
func (s *stepper) toReady() {
	w := s.w
	if w.halted {
		s.giveBack()
		w.state = Left
		return
	}
	if w.state == Ahead && w.ahead != nil {
		ahead := w.ahead
		w.ahead = nil
		w.state = Claiming
		s.claimAnswer(ahead)
		return
	}
	if w.superseded != "" {
		s.settleIdle(dedupe.OpSupersede, w.superseded)
		return
	}
	w.state = Ready
	s.do(WantSlot{})
}

// slotGranted gives the window a slot at now: a Ready window claims on
// it; a Held one, whose start came, starts under the claim it holds.
func (s *stepper) slotGranted(now time.Time) {
	w := s.w
	switch {
	case w.state == Ready:
		w.state, w.slot = Claiming, true
		s.do(Claim{})
	case w.state == Held && w.due:
		w.state, w.slot, w.due = Claiming, true, false
		s.claimed(Claimed{Token: w.token, Attempt: w.attempt, ProvenAt: w.proven, Now: now})
	}
}

// hold keeps the claim c of a window whose start has not come (it was
// published ahead): it holds no slot until its start, and starts then,
// once it gets one (slotGranted), under this claim if it is still proven.
// Claiming before the start, and starting at it without a claim's round
// trip, is the herd's row (1,000 jobs due at once: docs/performance.md).
func (s *stepper) hold(c Claimed) {
	w := s.w
	s.releaseSlot()
	w.state, w.due, w.proven, w.cx = Held, false, c.ProvenAt, nil
	w.seq++
	s.do(Wait{D: w.spec.Start.Sub(c.Now), Seq: w.seq})
}

// unhold stops what a Held window waits for: its start, or a slot.
func (s *stepper) unhold() {
	w := s.w
	if w.due {
		w.due = false
		s.do(WithdrawSlot{})
		return
	}
	s.do(StopWait{})
}

// lostHeld: an extend found a Held window's claim taken over (or the
// window settled): it is claimed again, the ordinary way, which waits
// for the other claim or finds the window done.
func (s *stepper) lostHeld() {
	s.unhold()
	s.toReady()
}

// giveBack returns a claim taken ahead, and its slot.
func (s *stepper) giveBack() {
	w := s.w
	if w.state != Ahead {
		return
	}
	if w.ahead == nil { // in flight: its answer gives it back
		w.unchain = true
		return
	}
	if c, ok := w.ahead.(Claimed); ok {
		s.do(Unclaim{Token: c.Token})
	}
	w.ahead = nil
	s.releaseSlot()
}

func (s *stepper) releaseSlot() {
	if s.w.slot {
		s.w.slot = false
		s.do(ReleaseSlot{})
	}
}

func (s *stepper) dropped(e Dropped) {
	w := s.w
	if w.state != New && w.state != Ahead {
		return // only a window its lane has not started is dropped
	}
	s.giveBack() // a policy changed mid-lane
	switch e.Policy {
	case DropReplace:
		s.settleIdle(dedupe.OpSupersede, fmt.Sprintf("superseded by window %s before it started (overlap policy replace)", e.By))
	case DropLatest:
		s.settleIdle(dedupe.OpSkip, fmt.Sprintf("a newer window %s arrived while it waited (overlap policy latest keeps only the newest)", e.By))
	default:
		s.settleIdle(dedupe.OpSkip, fmt.Sprintf("window %s of the job was still running (overlap policy skip)", e.By))
	}
}

// superseded ends the active window because a newer one arrived (replace):
// a running attempt is cancelled; a window waiting for a slot or a timer is
// settled as superseded at once; a claim or settlement in flight picks the
// flag up when it answers.
func (s *stepper) superseded(e Superseded) {
	w := s.w
	switch w.state {
	case Ready, Claiming, Running, Settling, Waiting, Held:
	default:
		return // not active
	}
	w.superseded = "superseded by newer window " + e.By + " (overlap policy replace)"
	switch w.state {
	case Running:
		s.cancel(e.Now, ctxSuperseded)
		s.do(Cancel{Cause: CauseSuperseded}, Watch{At: w.nextDeadline(s.r)})
	case Ready:
		s.do(WithdrawSlot{})
		s.settleIdle(dedupe.OpSupersede, w.superseded)
	case Waiting:
		s.do(StopWait{})
		s.settleIdle(dedupe.OpSupersede, w.superseded)
	case Held:
		s.unhold()
		s.settleHeld(dedupe.OpSupersede, w.superseded, OutcomeSuperseded, CauseSuperseded, false)
	}
}

// cancel records that the running handler's context is done from now,
// with cause c unless it was done already (its timeout passed, or an
// earlier cancel).
func (s *stepper) cancel(now time.Time, c ctxCause) {
	w := s.w
	if cx := w.cancel(); cx.cause != ctxLive && !cx.at.IsZero() {
		return
	}
	cx := w.editCancel()
	if cx.cause == ctxLive {
		cx.cause = c
		if !now.Before(w.timeoutAt) {
			cx.cause = ctxTimeout
		}
	}
	if cx.at.IsZero() {
		cx.at = now
	}
}

// claimAnswer handles the answer to the window's claim: of a claim call
// (Claiming) or of its predecessor's completion (Ahead: kept until its lane
// admits it).
func (s *stepper) claimAnswer(e Event) {
	w := s.w
	switch w.state {
	case Ahead:
		if w.ahead != nil {
			return
		}
		if _, refused := e.(AheadRefused); refused {
			s.releaseSlot()
			w.state = New
			if w.admitted {
				w.admitted = false
				s.toReady()
			}
			return
		}
		// (A halted window is never Ahead: halt gives a claim ahead back
		// and leaves the window, and its answer comes to unchain.)
		if c, ok := e.(*Claimed); ok {
			e = *c // kept: the shell's is reused
		}
		w.ahead = e
		if w.admitted {
			w.admitted = false
			s.toReady()
		}
		return
	case Claiming:
	default:
		return
	}
	switch e := e.(type) {
	case Claimed:
		w.token, w.attempt = e.Token, e.Attempt
		s.claimed(e)
	case *Claimed:
		w.token, w.attempt = e.Token, e.Attempt
		s.claimed(*e)
	case AlreadyDone:
		s.releaseSlot()
		if w.halted {
			w.state = Left
			return
		}
		s.do(Report{Outcome: OutcomeSkippedDone})
		s.finish()
	case Busy:
		s.releaseSlot()
		if w.halted {
			w.state = Left
			return
		}
		s.wait(min(max(e.Retry, s.r.BusyMin), s.r.BusyMax), waitReclaim)
	}
}

// claimed handles a claim the window holds: it runs the window, or ends it
// without running it.
func (s *stepper) claimed(c Claimed) {
	w := s.w
	switch {
	case w.halted:
		// Claimed for a window that will not start here: give it back,
		// so the next owner runs it at once with the same attempt number.
		s.releaseSlot()
		s.do(Unclaim{Token: c.Token})
		w.state = Left
		return
	case w.superseded != "":
		s.releaseSlot()
		s.settleHeld(dedupe.OpSupersede, w.superseded, OutcomeSuperseded, CauseSuperseded, false)
		return
	}
	if age := c.Now.Sub(w.spec.Born); age > s.r.Retention {
		s.releaseSlot()
		reason := fmt.Sprintf("published %s ago, more than the replay horizon (the store's retention, WorkerConfig.Retention = %s): its done marker may have expired, so whether it already ran is unknown; redrive it with kjobctl dlq redrive if it must still run",
			days(age), days(s.r.Retention))
		s.deadLetter(reason, w.attempt, w.token, &Report{Outcome: OutcomeDeadLettered, Cause: CauseHorizon, Reason: reason})
		return
	}
	if limit := w.spec.MaxAttempts; limit > 0 && w.attempt > limit {
		s.releaseSlot()
		reason := fmt.Sprintf("max_attempts (%d) used up: this would be attempt %d; the earlier attempts were interrupted (partition revoked or lost, a worker stopped mid-attempt, or a claim that could not be proven while Redis did not answer), and each counts",
			limit, w.attempt)
		s.deadLetter(reason, w.attempt-1, w.token, &Report{Outcome: OutcomeDeadLettered, Cause: CauseExhausted, Reason: reason})
		return
	}
	if w.spec.Start.After(c.Now) {
		// Published ahead of its start: no attempt starts before it.
		s.hold(c)
		return
	}
	// Start it, unless the claim is no longer proven: then its attempt
	// ends stepped down before it started.
	w.state = Running
	w.proven, w.cx = c.ProvenAt, nil
	w.timeoutAt = c.Now.Add(w.spec.Timeout)
	if age := c.Now.Sub(c.ProvenAt); age >= s.r.Proof {
		w.editCancel().steppedDown = true
		w.timeoutAt = c.Now
		s.ended(nil, false, Returned{Now: c.Now})
		return
	}
	// Start's two deadlines are the attempt's first ones: no Watch with
	// it (the shell's timer follows Start; a Watch comes when one moves).
	s.do(Start{})
}

// timer handles a timer: the end of a Wait, or a deadline of the running
// attempt (the claim's step-down, the handler's abandonment).
func (s *stepper) timer(e TimerFired) {
	w := s.w
	switch w.state {
	case Held:
		if e.Seq != w.seq || w.due {
			return // a stopped wait's, or the watchdog's
		}
		// Its start came: it starts once it has a slot.
		w.due = true
		s.do(WantSlot{})
	case Waiting:
		if e.Seq != w.seq {
			return // a stopped wait's
		}
		switch w.waitFor {
		case waitIdle:
			s.settleIdle(w.set.op, w.set.reason)
		default:
			s.toReady()
		}
	case Running:
		if w.Extendable() && !e.Now.Before(w.stepDownAt(s.r)) {
			// No extend proved the claim in time: cancel the handler
			// strictly before the claim can expire.
			w.editCancel().steppedDown = true
			s.cancel(e.Now, ctxUnproven)
			s.do(Cancel{Cause: CauseUnproven})
		}
		if !e.Now.Before(w.abandonAt(s.r)) {
			s.do(Abandon{})
			s.ended(fmt.Errorf("%w for %v", ErrAbandoned, s.r.Grace), true, Returned{Now: e.Now, Jitter: e.Jitter})
			return
		}
		s.do(Watch{At: w.nextDeadline(s.r)})
	}
}

// ended is the settle step: it turns how an attempt ended into the
// window's outcome. Its slot is given back first (a shell that chains hands
// it to the lane's next window instead).
func (s *stepper) ended(err error, abandoned bool, ret Returned) {
	w := s.w
	s.releaseSlot()
	cx := w.cancel()
	superseded := cx.cause == ctxSuperseded
	switch {
	case superseded && !cx.fenced && !cx.steppedDown:
		// Replaced by a newer window: whatever the handler returned, the
		// window ends as superseded, never retried.
		s.settleHeld(dedupe.OpSupersede, w.superseded, OutcomeSuperseded, CauseSuperseded, true)

	case cx.fenced:
		s.do(Report{Outcome: OutcomeFenced, OfAttempt: true, Cause: CauseFenced})
		s.reclaim() // Claim reports Busy or AlreadyDone now

	case cx.steppedDown && !abandoned:
		// Neither completed nor released: claiming again waits for the
		// store, and for this claim to expire if it still lives.
		s.do(Report{Outcome: OutcomeSteppedDown, OfAttempt: true, Cause: CauseUnproven})
		s.reclaim()

	case abandoned:
		s.do(Report{Outcome: OutcomeAbandoned, OfAttempt: true, Err: err, Cause: CauseAbandoned})
		if w.stopped {
			w.state = Left // not settled: the next owner re-delivers it
			return
		}
		s.failed(err, ret.Jitter, false)

	case err == nil:
		w.state, w.pending = Settling, pendComplete
		s.do(Settle{Op: dedupe.OpComplete, Token: w.token})

	case w.stopped:
		if ret.ReplaySkip != "" {
			// An operator's replay moved the partition past it and said
			// to skip what it moves past: settled, never run again.
			s.settleHeld(dedupe.OpSkip, ret.ReplaySkip, OutcomeSkippedReplay, CauseReplay, true)
			w.pending = pendReplay
			return
		}
		// Revoked past its grace, or lost, mid-attempt: give the window
		// back so its next owner can claim it at once.
		s.do(Report{Outcome: OutcomeFailed, OfAttempt: true, Err: err})
		w.state, w.pending = Settling, pendLeave
		s.do(Settle{Op: dedupe.OpRelease, Token: w.token, Reason: "interrupted: partition revoked or lost: " + err.Error()})

	default:
		outcome := OutcomeFailed
		if s.final(err) {
			outcome = OutcomeDeadLettered
		}
		s.do(Report{Outcome: outcome, OfAttempt: true, Err: err})
		s.failed(err, ret.Jitter, true)
	}
}

// final reports whether a failure with err ends the window: a permanent
// error, or its last attempt.
func (s *stepper) final(err error) bool {
	return errors.Is(err, handler.ErrPermanent) || s.w.attempt >= s.w.spec.MaxAttempts
}

// failed handles a failed (or abandoned) attempt: on a permanent error or
// the last attempt it dead-letters the window; otherwise it releases the
// claim and claims again after the backoff. reported says whether the
// dead-lettered outcome was reported already.
func (s *stepper) failed(err error, jitter float64, reported bool) {
	w := s.w
	if s.final(err) {
		var rep *Report
		if !reported {
			rep = &Report{Outcome: OutcomeDeadLettered, Err: err}
		}
		s.deadLetter(err.Error(), w.attempt, w.token, rep)
		return
	}
	w.retryIn = retryDelay(*w.spec, w.attempt, jitter)
	w.state, w.pending = Settling, pendRelease
	s.do(Settle{Op: dedupe.OpRelease, Token: w.token, Reason: err.Error()})
}

// retryDelay is min(MaxBackoff, Backoff*2^(attempt-1)) with equal jitter:
// jitter 0 gives half of it, 1 all of it.
func retryDelay(sp Spec, attempt int, jitter float64) time.Duration {
	d := backoff.Exponential(sp.Backoff, sp.MaxBackoff, attempt, backoff.None)
	jitter = min(max(jitter, 0), 1)
	half := d / 2
	return half + time.Duration(jitter*float64(d-half))
}

// reclaim claims the window again (after a fence or a step-down), unless
// the partition's context ended.
func (s *stepper) reclaim() {
	if s.w.stopped {
		s.w.state = Left
		return
	}
	s.toReady()
}

func (s *stepper) wait(d time.Duration, then waitFor) {
	w := s.w
	w.state, w.waitFor = Waiting, then
	w.seq++
	s.do(Wait{D: d, Seq: w.seq})
}

func (s *stepper) finish() {
	s.w.state, s.w.pending = Done, pendNone
	s.do(Finish{})
}

// deadLetter writes the window's dead letter, then (with a token) settles
// it as dead in the store, and finishes it. report, if set, is reported
// once the letter is written.
func (s *stepper) deadLetter(reason string, attempts int, token int64, report *Report) {
	w := s.w
	w.state, w.pending = Settling, pendLetter
	w.set = &settleOf{reason: reason, token: token, report: report}
	s.do(DeadLetter{Reason: reason, Attempts: attempts})
}

func (s *stepper) letter(e Event) {
	w := s.w
	if w.state != Settling || w.pending != pendLetter {
		return
	}
	if _, failed := e.(LetterFailed); failed {
		if w.set.token == 0 {
			w.state, w.pending = Left, pendNone
			return
		}
		// Not written before the partition's context ended: not settled;
		// the next owner re-delivers the window.
		w.pending = pendLeave
		s.do(Settle{Op: dedupe.OpRelease, Token: w.set.token, Reason: "interrupted before dead-lettering: " + w.set.reason})
		return
	}
	if w.set.report != nil {
		s.do(*w.set.report)
		w.set = &settleOf{reason: w.set.reason, token: w.set.token} // reported
	}
	if w.set.token == 0 {
		s.finish()
		return
	}
	w.pending = pendDead
	s.do(Settle{Op: dedupe.OpDeadLetter, Token: w.set.token, Reason: w.set.reason})
}

// settleIdle settles the window, which holds no claim, without running it:
// skipped or superseded. A live claim on it is waited out.
func (s *stepper) settleIdle(op dedupe.Op, reason string) {
	w := s.w
	w.state, w.pending, w.set = Settling, pendIdle, &settleOf{op: op, reason: reason}
	s.do(Settle{Op: op, Reason: reason})
}

// settleHeld settles the window under the claim it holds without
// completing it, with outcome (of the attempt that ended, if ofAttempt).
func (s *stepper) settleHeld(op dedupe.Op, reason string, outcome Outcome, cause Cause, ofAttempt bool) {
	w := s.w
	w.state, w.pending = Settling, pendHeld
	w.set = &settleOf{op: op, reason: reason, outcome: outcome, cause: cause, ofAttempt: ofAttempt}
	s.do(Settle{Op: op, Token: w.token, Reason: reason})
}

// reportDone is the report of every window that ran and completed, boxed
// once: returning it allocates nothing (the no-op burst's row).
var reportDone Action = Report{Outcome: OutcomeDone, OfAttempt: true}

// settled handles the store's answer to the window's settlement.
func (s *stepper) settled(a Answer) {
	w := s.w
	if w.state != Settling {
		return
	}
	switch p := w.pending; p {
	case pendComplete:
		switch a {
		case Accepted:
			s.do(reportDone)
			s.finish()
		case WasDone, NotOurs:
			// A zombie attempt: another attempt got there.
			s.do(Report{Outcome: OutcomeFenced, OfAttempt: true, Cause: CauseFenced})
			s.reclaim()
		default:
			s.do(Report{Outcome: OutcomeFailed, OfAttempt: true, Reason: "complete: the store did not answer before the partition's context ended"})
			w.state = Left
		}
	case pendRelease:
		switch a {
		case Accepted, WasDone, NotOurs:
		default:
			// Not released: it expires after the store's claim TTL.
			if w.stopped {
				w.state = Left
				return
			}
		}
		switch {
		case w.superseded != "":
			s.toReady() // settles it as superseded
		case w.halted:
			// The backoff would end in a partition that starts nothing.
			w.state = Left
		default:
			s.wait(w.retryIn, waitReclaim)
		}
	case pendLeave:
		w.state = Left
	case pendDead:
		// Not marked dead (a redelivered record would run again): logged.
		// The letter is written, so the record is settled.
		s.finish()
	case pendIdle:
		switch a {
		case Accepted:
			s.withoutRun(w.set.op, w.set.reason, false)
		case WasDone:
			s.do(Report{Outcome: OutcomeSkippedDone})
			s.finish()
		case ClaimLive, NotOurs:
			if w.halted {
				w.state = Left
				return
			}
			s.wait(s.r.BusyMax, waitIdle)
		default:
			w.state = Left // the next owner decides
		}
	case pendHeld, pendReplay:
		switch a {
		case Accepted:
			s.do(Report{Outcome: w.set.outcome, OfAttempt: w.set.ofAttempt, Cause: w.set.cause, Reason: w.set.reason})
			s.finish()
		case WasDone:
			s.do(Report{Outcome: OutcomeSkippedDone})
			s.finish()
		case NotOurs, ClaimLive:
			if p == pendReplay {
				w.state = Left // the replay settles it after its seek
				return
			}
			s.reclaim() // someone else claimed it: settle it once they are done
		default:
			w.state = Left
		}
	}
}

// withoutRun reports a window settled as skipped or superseded without an
// attempt, and finishes it.
func (s *stepper) withoutRun(op dedupe.Op, reason string, ofAttempt bool) {
	outcome := OutcomeSkipped
	if op == dedupe.OpSupersede {
		outcome = OutcomeSuperseded
	}
	s.do(Report{Outcome: outcome, OfAttempt: ofAttempt, Cause: CausePolicy, Reason: reason})
	s.finish()
}

// halt: the partition starts nothing new. Windows not started are left to
// the next owner; what holds a claim goes on to its answer.
func (s *stepper) halt() {
	w := s.w
	w.halted = true
	switch w.state {
	case Fetched, New:
		w.state = Left
	case Ahead:
		s.giveBack() // or, in flight, its answer gives it back
		w.state = Left
	case Ready:
		s.do(WithdrawSlot{})
		w.state = Left
	case Waiting:
		s.do(StopWait{})
		w.state = Left
	case Held:
		// Claimed for a start that will not come here: give the claim
		// back, so the next owner runs it at once with the same attempt
		// number.
		s.unhold()
		s.do(Unclaim{Token: w.token})
		w.state = Left
	}
}

// days formats d for people: "9d", "9d4h", or d itself below a day.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.Round(time.Second).String()
	}
	n, h := d/day, (d%day)/time.Hour
	if h == 0 {
		return fmt.Sprintf("%dd", n)
	}
	return fmt.Sprintf("%dd%dh", n, h)
}
