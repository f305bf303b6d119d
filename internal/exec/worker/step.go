package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// step is where every window changes: it steps wn's rules with e
// (internal/window: Rules.Step, a pure function) and carries out the
// actions they return, in order. Each action is one call of the shell:
// a slot, a claim or settlement queued for the next batched store call,
// a handler started, a dead letter, a timer, a report, the commit point.
func (l *loop) step(wn *win, e machine.Event) {
	var buf []machine.Action
	if n := len(l.acts); n > 0 {
		buf, l.acts = l.acts[n-1], l.acts[:n-1]
	}
	held := wn.m.State() == machine.Held
	acts := l.rules.StepAppend(buf, &wn.m, e)
	if now := wn.m.State() == machine.Held; now != held {
		if now {
			l.held++
		} else {
			l.held--
		}
	}
	for i, a := range acts {
		switch a := a.(type) {
		case machine.WantSlot:
			l.ready.Push(&wn.item, l.w.maxConcurrent(wn.msg))
			l.slots.Want(l.ready.Startable())
		case machine.WithdrawSlot:
			l.ready.Remove(&wn.item)
			if !l.halted {
				l.slots.Want(l.ready.Startable())
			}
		case machine.ReleaseSlot:
			// A success is completed next: the slot goes to the lane's
			// next window if its claim can ride on the completion.
			if i+1 < len(acts) && completes(acts[i+1]) && l.chainNext(wn) {
				continue
			}
			l.putSlot(wn)
		case machine.Claim:
			l.claimQ = append(l.claimQ, wn)
		case machine.Unclaim:
			l.queue(nil, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpUnclaim, Token: a.Token})
		case machine.Start:
			l.start(wn)
		case machine.Cancel:
			// A fence or a step-down cancelled the handler already, on
			// the goroutine that found it (attempt.go); a supersede is the
			// loop's own news.
			if a.Cause == machine.CauseSuperseded && wn.att != nil {
				wn.att.supersede()
			}
		case machine.Watch, machine.Abandon, machine.Extend:
			// The running attempt's timing is the shell's (attempt.go):
			// its keepalive and the partition's watchdog keep the
			// deadlines Start gave, and the extend tick proves every
			// running claim; what they did comes back as events when the
			// attempt ends.
		case machine.Settle:
			st := dedupe.Settlement{ID: wn.msg.ID, Op: a.Op, Token: a.Token, Reason: a.Reason}
			if a.Op == dedupe.OpComplete && wn.next != nil {
				st.Next, st.Owner = wn.next.msg.ID, l.w.cfg.WorkerID
			}
			l.queue(wn, st)
		case machine.DeadLetter:
			l.logLetter(wn, e, a)
			l.letters = append(l.letters, letter{wn: wn, reason: a.Reason, attempts: a.Attempts})
		case machine.Wait:
			if wn.m.State() == machine.Held {
				l.untilStartPush(startWait{wn: wn, seq: a.Seq, at: time.Now().Add(a.D)}) // one timer for all: the herd's row
				continue
			}
			l.wait(wn, a.D, a.Seq)
		case machine.StopWait:
			l.stopWait(wn)
		case machine.Report:
			l.report(wn, a)
		case machine.Finish:
			l.finish(wn)
		}
	}
	clear(acts) // keep no reports' errors alive
	l.acts = append(l.acts, acts[:0])
	if wn.m.State().Final() {
		l.live.remove(wn)
	}
}

// completes reports whether a is the completion of a successful attempt.
func completes(a machine.Action) bool {
	s, ok := a.(machine.Settle)
	return ok && s.Op == dedupe.OpComplete
}

// report reports an outcome of wn to Config.OnExecuted and the jobs' run
// history, and logs it.
func (l *loop) report(wn *win, r machine.Report) {
	err := l.reportErr(wn, r)
	l.logReport(wn, r, err)
	if r.Cause == machine.CauseInvalid {
		// Not a window of ours: no run of one of our jobs.
		now := l.w.cfg.Now()
		e := Execution{Partition: wn.rec.Partition, Offset: wn.rec.Offset, Outcome: OutcomeDeadLettered, Err: err, Started: now, Finished: now}
		if wn.msg != nil {
			e.WindowID, e.Job = wn.msg.ID, wn.msg.Job
		}
		l.w.executed(e)
		return
	}
	outcome := string(r.Outcome)
	e := Execution{WindowID: wn.msg.ID, Job: wn.msg.Job, Partition: wn.rec.Partition, Offset: wn.rec.Offset,
		ScheduledAt: wn.msg.ScheduledAt, PublishedAt: wn.msg.PublishedAt, Outcome: outcome, Err: err}
	if wn.claim.token != 0 {
		e.Attempt, e.Token = wn.claim.attempt, wn.claim.token
	}
	if r.OfAttempt {
		e.Started, e.Finished = wn.ran.started, wn.ran.finished
	} else {
		now := l.w.cfg.Now()
		e.Started, e.Finished = now, now
	}
	l.w.executed(e)
	if r.Outcome == machine.OutcomeSkippedReplay && wn.skip() != nil {
		wn.skip().settled.Add(1) // SeekSkipping counts what the loop skipped for it
	}
	if r.Outcome == machine.OutcomeSkippedDone { // a redelivery, not a settlement
		return
	}
	run := dedupe.Run{WindowID: e.WindowID, Job: e.Job, Trigger: string(wn.msg.Trigger), Outcome: outcome, WindowStart: wn.msg.Window.Start,
		Started: e.Started, Finished: e.Finished, Attempt: e.Attempt, Token: e.Token, Worker: l.w.cfg.WorkerID,
		ScheduleVersion: wn.msg.ScheduleVersion}
	if err != nil {
		run.Error = handler.Cut(err.Error(), dedupe.MaxRunErrorBytes)
	}
	if len(l.runs) == 0 {
		l.runsSince = time.Now()
		if l.runs == nil {
			l.runs = l.spare.runsOf(max(8, l.lastRuns))
		}
	}
	l.runs = append(l.runs, run)
}

// reportErr is the error an outcome is reported with (Execution.Err, the
// run's error): the handler's, or the worker's sentinel for what the rules
// decided, wrapped with its reason.
func (l *loop) reportErr(wn *win, r machine.Report) error {
	switch r.Outcome {
	case machine.OutcomeDone, machine.OutcomeSkippedDone:
		return nil
	case machine.OutcomeSkipped, machine.OutcomeSuperseded, machine.OutcomeSkippedReplay:
		return errors.New(r.Reason)
	case machine.OutcomeFenced:
		if wn.answer() != nil { // its completion was refused
			return wn.answer()
		}
	case machine.OutcomeFailed:
		if r.Reason != "" { // its completion got no answer
			return fmt.Errorf("complete: %w", wn.answer())
		}
	case machine.OutcomeDeadLettered:
		switch r.Cause {
		case machine.CauseHorizon:
			return fmt.Errorf("%w: %s", ErrBeyondHorizon, r.Reason)
		case machine.CauseExhausted:
			return fmt.Errorf("%w: %s", ErrAttemptsExhausted, r.Reason)
		case machine.CauseInvalid:
			return wn.bad()
		case machine.CauseRefused:
			return r.Err
		}
	}
	if r.Outcome == machine.OutcomeSteppedDown && wn.ran.err == nil {
		return fmt.Errorf("%w: the claim was taken %v ago, not started (it proves the window ours for %v after the claim call started)",
			ErrClaimUnproven, wn.ran.notStarted.Round(time.Millisecond), l.w.claims.Proof())
	}
	if wn.ran.err != nil {
		return wn.ran.err // the attempt's, as the shell saw it end
	}
	return r.Err
}

// logReport logs an outcome that is news: each once, with the window's
// attributes.
func (l *loop) logReport(wn *win, r machine.Report, err error) {
	switch r.Outcome {
	case machine.OutcomeDone:
		if l.w.log.Enabled(l.ctx, slog.LevelDebug) {
			l.logger(wn).Debug("window done", "duration", wn.ran.finished.Sub(wn.ran.started), "lateness", wn.ran.started.Sub(wn.msg.ScheduledAt))
		}
	case machine.OutcomeFenced:
		if wn.answer() != nil {
			l.logger(wn).Warn("handler succeeded but the window is not ours to complete (a zombie attempt: another attempt got there)", "err", err)
		} else {
			l.logger(wn).Warn("claim taken over while the handler ran; discarding the attempt's result", "err", err)
		}
	case machine.OutcomeSteppedDown:
		l.logger(wn).Warn("attempt stepped down: its claim could not be proven; discarding its result and claiming the window again once the store answers", "err", err)
	case machine.OutcomeAbandoned:
		l.logger(wn).Error("handler ignored cancellation; abandoning it (its goroutine keeps running)", "grace", l.w.cfg.Grace)
	case machine.OutcomeFailed:
		switch {
		case r.Reason != "":
			l.logger(wn).Warn("handler succeeded but completing the window failed before the partition's context ended; the next owner decides", "err", wn.answer())
		case l.stopped:
			l.logger(wn).Warn("attempt interrupted: partition revoked or lost; releasing the window for its next owner", "err", err)
		default:
			l.logger(wn).Warn("attempt failed; retrying after backoff", append(handler.ErrorAttrs(err), "retry_in", wn.m.RetryIn(), "max_attempts", wn.msg.Policy.MaxAttempts)...)
		}
	case machine.OutcomeSkipped, machine.OutcomeSuperseded:
		status := dedupe.StatusSkipped
		if r.Outcome == machine.OutcomeSuperseded {
			status = dedupe.StatusSuperseded
		}
		l.logger(wn).Info("window skipped", "status", status, "reason", r.Reason)
	case machine.OutcomeSkippedReplay:
		l.logger(wn).Info("window skipped", "status", dedupe.ReplaySkipLabel, "reason", r.Reason)
	}
}

// logLetter logs why wn is dead-lettered, as it is decided.
func (l *loop) logLetter(wn *win, e machine.Event, a machine.DeadLetter) {
	if wn.bad() != nil {
		return // logged as it arrived (poison)
	}
	if !endsAttempt(e) || wn.ran.err == nil {
		// Not run: beyond the horizon, attempts used up, or an id the
		// store refuses; the reason says which.
		l.logger(wn).Error("dead-lettering window instead of running it: " + a.Reason)
		return
	}
	why := "permanent failure"
	if !errors.Is(wn.ran.err, handler.ErrPermanent) {
		why = fmt.Sprintf("attempt %d of %d failed", wn.claim.attempt, wn.msg.Policy.MaxAttempts)
	}
	l.logger(wn).Error("dead-lettering window: "+why, handler.ErrorAttrs(wn.ran.err)...)
}

// endsAttempt reports whether e ends a running attempt: its handler
// returned, or a timer abandoned it.
func endsAttempt(e machine.Event) bool {
	switch e.(type) {
	case machine.Returned, *machine.Returned, machine.TimerFired:
		return true
	}
	return false
}
