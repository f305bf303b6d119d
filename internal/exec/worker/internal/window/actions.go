package window

import (
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
)

// Action is something the shell must do for a window, in the order Step
// returns them.
type Action interface{ action() }

// WantSlot: queue the window for a slot (lanes.Fair.Push, Slots.Want).
type WantSlot struct{}

// WithdrawSlot: take the window out of the slot queue; it holds none.
type WithdrawSlot struct{}

// ReleaseSlot: give back the slot the window holds.
type ReleaseSlot struct{}

// Claim: claim the window for this worker (one id of a ClaimBatch call);
// answer with Claimed, AlreadyDone, Busy or ClaimFailed.
type Claim struct{}

// Unclaim: give back the claim Token, whose attempt never started
// (dedupe.OpUnclaim), so the next claim runs at once with the same attempt
// number. Nothing waits for the answer.
type Unclaim struct{ Token int64 }

// Start: run the handler under the window's claim (Window.Token,
// Window.Attempt), its context bounded by Window.TimeoutAt;
// Window.StepDownAt is when it is cancelled unless the claim is proven
// again (TimerFired then). Its first deadline is the earlier of StepDownAt
// and TimeoutAt + Grace: Start comes without a Watch. Answer with
// Returned. It carries no fields, so that returning it boxes nothing (the
// no-op burst's row): the window, as the step leaves it, has them.
type Start struct{}

// Extend: extend the claim Token (one settlement of the partition's extend
// call); answer with Extended or Fenced, or nothing if the call failed.
type Extend struct{ Token int64 }

// Cancel: cancel the running handler's context with Cause (unproven,
// fenced or superseded).
type Cancel struct{ Cause Cause }

// Watch: a deadline of the running attempt comes At: have a TimerFired
// (Seq 0) delivered by then.
type Watch struct{ At time.Time }

// Abandon: the handler ignored its cancelled context for Grace: stop
// waiting for it (its goroutine is left running) and end its attempt; a
// Returned from it later is ignored.
type Abandon struct{}

// Settle: apply Op to the window in the store (one settlement of a Settle
// call), under the claim Token (0: none, for a skip or supersede of a
// window never claimed). Answer with Settled.
type Settle struct {
	Op     dedupe.Op
	Token  int64
	Reason string
}

// DeadLetter: write the window's record to the dead-letter topic with
// Reason and Attempts. Answer with LetterWritten or LetterFailed.
type DeadLetter struct {
	Reason   string
	Attempts int
}

// Wait: deliver TimerFired{Seq} after D, unless StopWait comes first.
type Wait struct {
	D   time.Duration
	Seq uint64
}

// StopWait: the window's Wait is over before its time.
type StopWait struct{}

// Report: report an outcome (Config.OnExecuted, the run history; a
// skipped-done is not a run). OfAttempt says it is the outcome of the
// attempt that just ended (its start and end times), not of a settlement
// without one. Err is the handler's error, if the outcome is its; Cause
// says why the rules decided it otherwise, and Reason explains.
type Report struct {
	Outcome   Outcome
	OfAttempt bool
	Err       error
	Cause     Cause
	Reason    string
}

// Finish: the window is settled: settle its record for the partition's
// commit point (partition.Owned.Settle) and finish it in its lane
// (lanes.Finish), whose next window may start.
type Finish struct{}

func (WantSlot) action()     {}
func (WithdrawSlot) action() {}
func (ReleaseSlot) action()  {}
func (Claim) action()        {}
func (Unclaim) action()      {}
func (Start) action()        {}
func (Extend) action()       {}
func (Cancel) action()       {}
func (Watch) action()        {}
func (Abandon) action()      {}
func (Settle) action()       {}
func (DeadLetter) action()   {}
func (Wait) action()         {}
func (StopWait) action()     {}
func (Report) action()       {}
func (Finish) action()       {}
