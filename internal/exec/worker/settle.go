package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// op is a settlement queued for the partition's next settle call, and what
// to do with its answer on the loop (nil, a dedupe sentinel, or the
// context's error when the store could not be reached before the
// partition's context ended).
type op struct {
	st   dedupe.Settlement
	wn   *win
	res  *result     // the attempt a complete records
	then func(error) // handles the answer; nil for a completion (completed)
}

// queue adds a settlement of wn (nil for none) to the next settle call.
func (l *loop) queue(wn *win, st dedupe.Settlement, res *result, then func(error)) {
	if wn != nil {
		wn.state = stSettling
		if shadowOn {
			l.shDid(wn, fmt.Sprintf("settle %s %d", st.Op, st.Token))
		}
	}
	if l.ops == nil {
		l.ops = make([]op, 0, max(8, l.lastOps))
	}
	l.ops = append(l.ops, op{st: st, wn: wn, res: res, then: then})
}

// settleResult is the settle step: it turns how an attempt ended into the
// window's outcome, reports it, and records it in the store.
func (l *loop) settleResult(wn *win, res result) {
	c := wn.claim
	switch {
	case res.superseded && !res.fenced && !res.unproven:
		// Replaced by a newer window: whatever the handler returned, the
		// window ends as superseded, never retried.
		l.settleHeld(wn, dedupe.OpSupersede, wn.superseded, &res)

	case res.fenced:
		l.logger(wn).Warn("claim taken over while the handler ran; discarding the attempt's result", "err", res.err, "abandoned", res.abandoned)
		l.report(wn, OutcomeFenced, res.err, &res)
		l.reclaim(wn) // Claim reports Busy or AlreadyDone now

	case res.unproven && !res.abandoned:
		// Not completed, not released (the store is unreachable or
		// slow): claiming again waits for the store, and for this claim
		// to expire if it still lives.
		l.logger(wn).Warn("attempt stepped down: its claim could not be proven; discarding its result and claiming the window again once the store answers", "err", res.err)
		l.report(wn, OutcomeSteppedDown, res.err, &res)
		l.reclaim(wn)

	case res.abandoned:
		l.logger(wn).Error("handler ignored cancellation; abandoning it (its goroutine keeps running)", "grace", l.w.cfg.Grace)
		l.report(wn, OutcomeAbandoned, res.err, &res)
		if l.stopped {
			wn.state = stDone // not settled: the next owner re-delivers the window
			return
		}
		l.failed(wn, res.err, false)

	case res.err == nil:
		wn.done = res
		st := dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpComplete, Token: c.Token}
		if wn.next != nil { // chainNext: claim the lane's next window with it
			st.Next, st.Owner = wn.next.msg.ID, l.w.cfg.WorkerID
		}
		l.queue(wn, st, &wn.done, nil) // nil: completed handles the answer

	default:
		if l.stopped || l.ctx.Err() != nil {
			if sk, ok := l.w.replaySkips.lookup(l.n, wn.rec.Offset); ok {
				// An operator's replay moved the partition past it, and
				// said to skip what it moves past: settled, never run again.
				l.settleReplaySkipped(wn, sk, &res)
				return
			}
			// Revoked past its grace, or lost, mid-attempt: give the window
			// back so its next owner can claim it at once.
			l.logger(wn).Warn("attempt interrupted: partition revoked or lost; releasing the window for its next owner", "err", res.err)
			l.report(wn, OutcomeFailed, res.err, &res)
			l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpRelease, Token: c.Token, Reason: "interrupted: partition revoked or lost: " + res.err.Error()}, nil,
				func(error) { wn.state = stDone })
			return
		}
		outcome := OutcomeFailed
		if l.final(wn, res.err) {
			outcome = OutcomeDeadLettered
		}
		l.report(wn, outcome, res.err, &res)
		l.failed(wn, res.err, true)
	}
}

// completed handles the answer to the completion of wn, whose attempt
// succeeded (wn.done): the most common settlement, so it is a method of
// its own rather than a closure allocated per window.
func (l *loop) completed(wn *win, err error) {
	r := &wn.done
	switch {
	case err == nil:
		if l.w.log.Enabled(l.ctx, slog.LevelDebug) {
			l.logger(wn).Debug("window done", "duration", r.finished.Sub(r.started), "lateness", r.started.Sub(wn.msg.ScheduledAt))
		}
		l.report(wn, OutcomeDone, nil, r)
		l.finish(wn)
	case errors.Is(err, dedupe.ErrAlreadyDone), errors.Is(err, dedupe.ErrFenced):
		l.logger(wn).Warn("handler succeeded but the window is not ours to complete (a zombie attempt: another attempt got there)", "err", err)
		l.report(wn, OutcomeFenced, err, r)
		l.reclaim(wn)
	default:
		l.logger(wn).Warn("handler succeeded but completing the window failed before the partition's context ended; the next owner decides", "err", err)
		l.report(wn, OutcomeFailed, fmt.Errorf("complete: %w", err), r)
		wn.state = stDone
	}
}

// final reports whether a failure with cause ends the window: a permanent
// error, or its last attempt.
func (l *loop) final(wn *win, cause error) bool {
	return errors.Is(cause, handler.ErrPermanent) || wn.claim.Attempt >= wn.msg.Policy.MaxAttempts
}

// failed handles a failed (or abandoned) attempt: on a permanent error or
// the last attempt it dead-letters the window; otherwise it releases the
// claim and claims again after the backoff, in the window's own lane.
// reported says whether the dead-lettered outcome was reported already.
func (l *loop) failed(wn *win, cause error, reported bool) {
	c := wn.claim
	log := l.logger(wn)
	if l.final(wn, cause) {
		why := "permanent failure"
		if !errors.Is(cause, handler.ErrPermanent) {
			why = fmt.Sprintf("attempt %d of %d failed", c.Attempt, wn.msg.Policy.MaxAttempts)
		}
		log.Error("dead-lettering window: "+why, handler.ErrorAttrs(cause)...)
		var report error
		if !reported {
			report = cause
		}
		l.deadLetter(wn, cause.Error(), c.Attempt, c.Token, report)
		return
	}
	wait := retryDelay(wn.msg.Policy, c.Attempt)
	if shadowOn && wn.sh != nil {
		wn.sh.retry = wait
	}
	log.Warn("attempt failed; retrying after backoff", append(handler.ErrorAttrs(cause), "retry_in", wait, "max_attempts", wn.msg.Policy.MaxAttempts)...)
	l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpRelease, Token: c.Token, Reason: cause.Error()}, nil, func(err error) {
		switch {
		case err == nil:
		case errors.Is(err, dedupe.ErrFenced), errors.Is(err, dedupe.ErrAlreadyDone):
			log.Warn("release refused: the window is no longer ours", "err", err)
		default:
			log.Warn("cannot release the claim; it expires after the store's claim TTL", "err", err)
			if l.stopped {
				wn.state = stDone
				return
			}
		}
		if wn.superseded != "" {
			l.toReady(wn) // settles it as superseded
			return
		}
		if l.halted {
			// The backoff would end in a partition that starts nothing:
			// the record stays unsettled for the next owner (as the
			// rules' machine has it; the window shadow caught the loop
			// waiting out the backoff here in a chaos run).
			wn.state = stDone
			return
		}
		l.wait(wn, wait, func() { l.toReady(wn) })
	})
}

// reclaim claims the window again at once (after a fence or a step-down).
func (l *loop) reclaim(wn *win) {
	if l.stopped {
		wn.state = stDone
		return
	}
	l.toReady(wn)
}

// tooOld dead-letters a claimed window whose record is beyond the replay
// horizon, instead of running it: its done marker may have expired, so it
// may have run already.
func (l *loop) tooOld(wn *win, age time.Duration) {
	retention := l.w.cfg.Store.Retention()
	reason := fmt.Sprintf("published %s ago, more than the replay horizon (the store's retention, WorkerConfig.Retention = %s): its done marker may have expired, so whether it already ran is unknown; redrive it with kjobctl dlq redrive if it must still run",
		days(age), days(retention))
	l.logger(wn).Error("dead-lettering a window older than the replay horizon instead of running it", "age", age.Round(time.Second), "retention", retention)
	l.deadLetter(wn, reason, wn.claim.Attempt, wn.claim.Token, fmt.Errorf("%w: %s", ErrBeyondHorizon, reason))
}

// ErrAttemptsExhausted is the error (Execution.Err) of a window
// dead-lettered instead of run because its earlier attempts, interrupted
// ones included, used up its max_attempts.
var ErrAttemptsExhausted = errors.New("worker: max_attempts used up")

// exhausted dead-letters wn, claimed, instead of running it when its
// claim's attempt number is past the job's max_attempts: every attempt
// counts, also one interrupted by a revoke, a lost partition or a worker
// that stopped mid-attempt (its claim was released or expired), and one
// stepped down because Redis did not answer (the store counts claims), so a
// window whose attempts keep being interrupted ends dead-lettered rather
// than running for ever.
func (l *loop) exhausted(wn *win) bool {
	c, limit := wn.claim, wn.msg.Policy.MaxAttempts
	if limit <= 0 || c.Attempt <= limit {
		return false
	}
	reason := fmt.Sprintf("max_attempts (%d) used up: this would be attempt %d; the earlier attempts were interrupted (partition revoked or lost, a worker stopped mid-attempt, or a claim that could not be proven while Redis did not answer), and each counts",
		limit, c.Attempt)
	l.logger(wn).Error("dead-lettering window instead of running it: " + reason)
	l.deadLetter(wn, reason, c.Attempt-1, c.Token, fmt.Errorf("%w: %s", ErrAttemptsExhausted, reason))
	return true
}

// deadLetter writes wn's dead letter, then (with a token) settles the
// window as dead in the store, and finishes it. report, if not nil, is
// reported as the dead-lettered outcome's error once the letter is
// written.
func (l *loop) deadLetter(wn *win, reason string, attempts int, token int64, report error) {
	wn.state = stSettling
	if shadowOn {
		l.shDid(wn, fmt.Sprintf("dead-letter %d", attempts))
	}
	l.letters = append(l.letters, letter{rec: wn.rec, reason: reason, attempts: attempts, wn: wn, then: func(err error) {
		switch {
		case err != nil && token != 0:
			// ctx ended before the letter was written: not settled, the
			// next owner re-delivers the window.
			l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpRelease, Token: token, Reason: "interrupted before dead-lettering: " + reason}, nil,
				func(error) { wn.state = stDone })
			return
		case err != nil:
			wn.state = stDone
			return
		}
		if report != nil {
			l.report(wn, OutcomeDeadLettered, report, nil)
		}
		if token == 0 {
			l.finish(wn)
			return
		}
		l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpDeadLetter, Token: token, Reason: reason}, nil, func(err error) {
			if err != nil && !errors.Is(err, dedupe.ErrAlreadyDone) {
				l.logger(wn).Warn("cannot mark the dead-lettered window settled; a redelivered record of it would run again", "err", err)
			}
			l.finish(wn)
		})
	}})
}

// settleIdle settles wn, which holds no claim, without running it: skipped
// (overlap policy skip or latest) or superseded (replace). A live claim on
// it (another worker runs it, or a claim of ours whose attempt stepped
// down) is waited out.
func (l *loop) settleIdle(wn *win, op dedupe.Op, reason string) {
	l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: op, Reason: reason}, nil, func(err error) {
		switch {
		case err == nil:
			l.settledWithout(wn, op, reason, nil)
		case errors.Is(err, dedupe.ErrAlreadyDone):
			l.report(wn, OutcomeSkippedDone, nil, nil)
			l.finish(wn)
		case errors.Is(err, dedupe.ErrBusy), errors.Is(err, dedupe.ErrFenced):
			if l.halted {
				wn.state = stDone
				return
			}
			l.wait(wn, busyMax, func() { l.settleIdle(wn, op, reason) })
		default:
			wn.state = stDone // ctx ended: the next owner decides
		}
	})
}

// settleHeld settles wn, under the claim it holds, without completing it:
// superseded (replace), after an attempt (res) or before one.
func (l *loop) settleHeld(wn *win, op dedupe.Op, reason string, res *result) {
	l.queue(wn, dedupe.Settlement{ID: wn.msg.ID, Op: op, Token: wn.claim.Token, Reason: reason}, res, func(err error) {
		switch {
		case err == nil:
			l.settledWithout(wn, op, reason, res)
		case errors.Is(err, dedupe.ErrAlreadyDone):
			l.report(wn, OutcomeSkippedDone, nil, nil)
			l.finish(wn)
		case errors.Is(err, dedupe.ErrFenced), errors.Is(err, dedupe.ErrBusy):
			l.reclaim(wn) // someone else claimed it: settle it once they are done
		default:
			wn.state = stDone
		}
	})
}

// settledWithout reports and logs a window settled as skipped or
// superseded, and finishes it.
func (l *loop) settledWithout(wn *win, op dedupe.Op, reason string, res *result) {
	outcome, status := OutcomeSkipped, dedupe.StatusSkipped
	if op == dedupe.OpSupersede {
		outcome, status = OutcomeSuperseded, dedupe.StatusSuperseded
	}
	l.logger(wn).Info("window skipped", "status", status, "reason", reason)
	l.report(wn, outcome, errors.New(reason), res)
	l.finish(wn)
}

// doneLogged logs the windows a settle call completed in one line at info
// (the window itself when it was alone); each was logged at debug as it
// was settled.
func (l *loop) doneLogged(batch []op, res []dedupe.Result, err error) {
	if err != nil {
		return
	}
	var first, last *op
	n := 0
	debug := l.w.log.Enabled(l.ctx, slog.LevelDebug)
	for i := range batch {
		o := &batch[i]
		if o.st.Op != dedupe.OpComplete || res[i].Err != nil {
			continue
		}
		n++
		if first == nil {
			first = o
		}
		last = o
	}
	switch {
	case n == 1 && !debug:
		// Logged once per window when windows come one at a time: the
		// window's attributes go with the call, not through l.logger.
		l.log.Info("window done", winAttrs(first.wn, "duration", first.res.finished.Sub(first.res.started), "lateness", first.res.started.Sub(first.wn.msg.ScheduledAt))...)
	case n > 1:
		l.log.Info("windows done", "windows", n, "first_window", first.wn.msg.ID, "last_window", last.wn.msg.ID)
	}
}

// claimBatch calls ClaimBatch until it answers: store errors (Redis down)
// are retried with capped exponential backoff, logged once per outage. It
// returns the claims and when the call that made them started (what a
// Claimed claim is proven from), ctx.Err() if ctx ends first, or a
// non-retryable error (dedupe.ErrInvalidID).
func (w *Worker) claimBatch(ctx context.Context, ids []string) ([]dedupe.Claim, time.Time, error) {
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	for {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		cs, err := w.cfg.Store.ClaimBatch(cctx, ids, w.cfg.WorkerID)
		cancel()
		if err == nil {
			w.storeUp(w.log)
			return cs, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) || errors.Is(err, dedupe.ErrInvalidRun) {
			return nil, time.Time{}, err
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		w.storeFailed(w.log, "claim", err)
		if err := b.Sleep(ctx); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// settleBatch calls Store.Settle until it answers. Its first try runs even
// if ctx is already done (results are worth recording on the way out);
// retries stop when ctx is done, returning ctx.Err(). It also returns when
// the call that answered started: what proves the claims it chained
// (dedupe.Settlement.Next).
func (w *Worker) settleBatch(ctx context.Context, ss []dedupe.Settlement, runs []dedupe.Run) ([]dedupe.Result, time.Time, error) {
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	for {
		start := time.Now()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		res, err := w.cfg.Store.Settle(cctx, ss, runs...)
		cancel()
		if err == nil {
			w.storeUp(w.log)
			return res, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) || errors.Is(err, dedupe.ErrInvalidRun) {
			// Cannot happen with decoded windows; answer each with the
			// error so nothing loops on it.
			res = make([]dedupe.Result, len(ss))
			for i := range res {
				res[i].Err = err
			}
			return res, start, nil
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		w.storeFailed(w.log, "settle", err)
		if err := b.Sleep(ctx); err != nil {
			return nil, time.Time{}, err
		}
	}
}

func (w *Worker) storeFailed(log *slog.Logger, op string, err error) {
	w.stalls.store(err, time.Now())
	if w.storeDown.CompareAndSwap(false, true) {
		log.Error("idempotency store unavailable; not running windows nor committing past them until it answers", "op", op, "err", err)
	}
}

func (w *Worker) storeUp(log *slog.Logger) {
	if w.storeDown.CompareAndSwap(true, false) {
		w.stalls.store(nil, time.Time{})
		log.Info("idempotency store answers again")
	}
}
