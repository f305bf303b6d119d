package window

import (
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
)

// State is where a window is in its life; see the package doc.
type State uint8

// The states. The zero value is Fetched.
const (
	Fetched State = iota
	New
	Ahead
	Ready
	Claiming
	Running
	Settling
	Waiting
	Held
	Done
	Left
)

var stateNames = [...]string{"fetched", "new", "ahead", "ready", "claiming", "running", "settling", "waiting", "held", "done", "left"}

// String returns the state's name.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Final reports whether no event moves a window out of s.
func (s State) Final() bool { return s == Done || s == Left }

// Rules are the worker-wide settings the rules need. The zero Rules is not
// usable: set every field.
type Rules struct {
	// Proof is how long a claim or extend call proves the claim from the
	// call's start: ClaimTTL - max(ClaimExtendInterval, ClaimTTL/5)
	// (keepalive.Policy.Proof). A handler is cancelled at the start of the
	// last call that proved its claim + Proof, and not started at all if
	// that moment has passed when its claim comes back.
	Proof time.Duration
	// Grace is how long a handler whose context was cancelled (timeout,
	// step-down, fence, supersede, the partition's end) is waited for
	// before it is abandoned.
	Grace time.Duration
	// Retention is the store's replay horizon: a window whose record is
	// older than that when it is claimed is dead-lettered, not run.
	Retention time.Duration
	// BusyMin and BusyMax bound the wait before a window whose claim is
	// live elsewhere is claimed again (20ms and 1s in the worker); BusyMax
	// is also the wait before a token-less skip or supersede found Busy is
	// tried again.
	BusyMin, BusyMax time.Duration
}

// Spec is what a window's record says that the rules use. It is fixed
// when the window arrives.
type Spec struct {
	// MaxAttempts bounds the attempts (jobmsg.Policy.MaxAttempts, >= 1).
	MaxAttempts int
	// Backoff and MaxBackoff shape the wait before a retry:
	// min(MaxBackoff, Backoff*2^(attempt-1)), with equal jitter.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt's handler.
	Timeout time.Duration
	// Born is when the record was made: the later of its published_at and
	// its Kafka timestamp (a redriven record is young again).
	Born time.Time
	// Start is the window's start (its scheduled_at): no attempt starts
	// before it. A window claimed before it (published ahead: the
	// producer's PublishLead) is Held until it.
	Start time.Time
}

// Window is one window's state. The zero Window is a fetched record;
// Step(w, Arrived{...}) decodes it into its lane. Windows are values:
// Step returns the next one and never changes its argument.
type Window struct {
	spec *Spec // fixed at arrival: shared, never changed; nil before

	// The latest claim: held while token != 0 and the window is
	// Claiming (answered), Running or Settling under it.
	token   int64
	attempt int

	// The running attempt.
	proven    time.Time // start of the last call that proved the claim
	timeoutAt time.Time // the handler's own timeout
	// How its context was done early; nil while it is live (the common
	// case: a window is one pointer smaller for what is rare). Replaced,
	// never changed in place, as set.
	cx *cancelled

	superseded string // why a newer window replaced it (overlap policy replace)

	// What the Settle or DeadLetter in flight carries, for a dead letter,
	// a settlement without completion, or a token-less skip; nil for a
	// completion or a release. Replaced, never changed in place, so a
	// Window copied by Step shares nothing that changes.
	set *settleOf

	retryIn time.Duration // the backoff before the retry, decided when the attempt failed
	seq     uint64        // numbers the Waits; a TimerFired of an older one is stale

	// Chaining (Ahead).
	ahead Event // the answer to the claim taken ahead; nil while in flight

	// The one-byte fields together, so that a window (one per record in
	// flight) has no padding between them.
	state    State
	slot     bool    // holds a slot of the worker's Concurrency
	due      bool    // Held: its start came, it waits for a slot
	halted   bool    // the partition starts nothing new
	stopped  bool    // the partition's context ended
	pending  pending // what the Settle or DeadLetter in flight is for
	waitFor  waitFor
	admitted bool // admitted by its lane while the claim ahead was in flight
	unchain  bool // dropped while its claim ahead was in flight: give it back
}

// cancelled is how a running attempt's context was done before its
// handler returned.
type cancelled struct {
	at          time.Time // when its context was cancelled early; zero if not
	steppedDown bool      // cancelled: its claim could not be proven in time
	fenced      bool      // cancelled: an extend found its claim taken over
	cause       ctxCause  // the first cause its context was done with
}

// cancel returns how the running attempt's context was done early (the
// zero cancelled while it is live).
func (w Window) cancel() cancelled {
	if w.cx == nil {
		return cancelled{}
	}
	return *w.cx
}

// editCancel replaces w's cancelled with a copy to change.
func (w *Window) editCancel() *cancelled {
	c := new(cancelled)
	if w.cx != nil {
		*c = *w.cx
	}
	w.cx = c
	return c
}

type pending uint8

const (
	pendNone     pending = iota
	pendComplete         // OpComplete of a successful attempt
	pendRelease          // OpRelease after a failed attempt (retry)
	pendLeave            // OpRelease on the way out (interrupted): Left whatever the answer
	pendLetter           // the dead letter is being written
	pendDead             // OpDeadLetter after the letter
	pendIdle             // a token-less skip or supersede
	pendHeld             // a skip or supersede under the claim
	pendReplay           // a skip under the claim for an operator's replay
)

// settleOf is what a dead letter or a settlement without completion is
// for.
type settleOf struct {
	// A dead letter in flight: its reason, the token it settles under
	// (0: none), and the report to make once it is written.
	// A token-less skip or supersede (settleIdle), or one under the claim
	// (settleHeld): its op and reason (tried again after a Busy wait),
	// and for the latter its outcome.
	reason    string
	token     int64
	report    *Report
	op        dedupe.Op
	outcome   Outcome
	cause     Cause
	ofAttempt bool // the outcome is an attempt's
}

type waitFor uint8

const (
	waitNone    waitFor = iota
	waitReclaim         // then Ready
	waitIdle            // then the token-less settlement again
)

// Spec returns the window's spec.
func (w Window) Spec() Spec {
	if w.spec == nil {
		return Spec{}
	}
	return *w.spec
}

// State returns the window's state.
func (w Window) State() State { return w.state }

// Token returns the fencing token of the window's latest claim (0 if none).
func (w Window) Token() int64 { return w.token }

// Attempt returns the attempt number of the window's latest claim.
func (w Window) Attempt() int { return w.attempt }

// HoldsSlot reports whether the window holds one of the worker's slots.
func (w Window) HoldsSlot() bool { return w.slot }

// Superseded returns why a newer window of the job replaced this one, or "".
func (w Window) Superseded() string { return w.superseded }

// Chainable reports whether a predecessor's completion may claim this
// window ahead (ChainOffered): it is New and not superseded, and the
// partition starts windows.
func (w Window) Chainable() bool {
	return w.state == New && w.superseded == "" && !w.halted && !w.unchain
}

// Extendable reports whether the window's claim is to be extended: its
// handler runs and the claim is neither stepped down nor fenced, or it
// holds its claim until its start (Held).
func (w Window) Extendable() bool {
	if w.state == Held {
		return true
	}
	cx := w.cancel()
	return w.state == Running && !cx.steppedDown && !cx.fenced
}

// ProvenAt is the start of the last call that proved the window's claim
// (its claim, or an extend since).
func (w Window) ProvenAt() time.Time { return w.proven }

// RetryIn is the backoff before a failed attempt's window is claimed
// again, decided when the attempt failed (the shell logs it with the
// failure).
func (w Window) RetryIn() time.Duration { return w.retryIn }

// AbandonAt is when a running handler is abandoned if it has not returned:
// Grace after its context was done. The shell's watchdog keeps its own
// copy of this deadline on another goroutine; when it fires, the shell
// delivers TimerFired at no earlier than this.
func (w Window) AbandonAt(r Rules) time.Time { return w.abandonAt(r) }

// StepDownAt is when a running attempt is cancelled unless its claim is
// proven again: Proof after the start of the last call that proved it.
func (w Window) StepDownAt(r Rules) time.Time { return w.stepDownAt(r) }

func (w Window) stepDownAt(r Rules) time.Time { return w.proven.Add(r.Proof) }

// TimeoutAt is when the running attempt's handler times out: its claim's
// answer plus the window's timeout.
func (w Window) TimeoutAt() time.Time { return w.timeoutAt }

// abandonAt is when a running handler is abandoned if it has not
// returned: Grace after its context was done (its timeout, or an earlier
// cancel).
func (w Window) abandonAt(r Rules) time.Time {
	done := w.timeoutAt
	if at := w.cancel().at; !at.IsZero() && at.Before(done) {
		done = at
	}
	return done.Add(r.Grace)
}

// nextDeadline is the running attempt's next deadline: its step-down
// while its claim is live, and its abandonment.
func (w Window) nextDeadline(r Rules) time.Time {
	at := w.abandonAt(r)
	if cx := w.cancel(); !cx.steppedDown && !cx.fenced {
		if sd := w.stepDownAt(r); sd.Before(at) {
			at = sd
		}
	}
	return at
}

// Outcome is how a window, or one attempt at it, ended, as the worker
// reports it (worker.Outcome*: the same strings).
type Outcome string

// The outcomes.
const (
	OutcomeDone          Outcome = "done"
	OutcomeFailed        Outcome = "failed"
	OutcomeSkippedDone   Outcome = "skipped-done"
	OutcomeDeadLettered  Outcome = "dead-lettered"
	OutcomeFenced        Outcome = "fenced"
	OutcomeAbandoned     Outcome = "abandoned"
	OutcomeSkipped       Outcome = "skipped"
	OutcomeSuperseded    Outcome = "superseded"
	OutcomeSteppedDown   Outcome = "stepped-down"
	OutcomeSkippedReplay Outcome = "skipped-replay"
)

// Cause says why the rules (not the handler) ended an attempt or a window;
// the shell maps it to the worker's sentinel errors.
type Cause uint8

// The causes.
const (
	CauseNone       Cause = iota
	CauseUnproven         // worker.ErrClaimUnproven
	CauseFenced           // dedupe.ErrFenced: the claim was taken over
	CauseSuperseded       // worker.ErrSuperseded
	CauseAbandoned        // the handler ignored its cancelled context for Grace
	CauseHorizon          // worker.ErrBeyondHorizon
	CauseExhausted        // worker.ErrAttemptsExhausted
	CauseInvalid          // the record is not a valid window of this deployment
	CauseRefused          // the store refused the window's id
	CausePolicy           // skipped or superseded by its overlap policy
	CauseReplay           // an operator's replay moved past it
)

var causeNames = [...]string{"none", "unproven", "fenced", "superseded", "abandoned", "horizon", "exhausted", "invalid", "refused", "policy", "replay"}

// String returns the cause's name.
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}
