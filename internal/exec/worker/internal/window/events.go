package window

import "time"

// Event is something that happened to a window, which the shell turns into
// a value of one of the types below: what a record said, what the lanes
// decided, what a store call, a dead letter or a handler answered, a timer,
// the partition's end.
type Event interface{ event() }

// Arrived: the record was fetched and decoded (Invalid empty), or could not
// be made a window of this deployment (Invalid is why: not a window, a
// signature refused, another namespace's). An invalid record is
// dead-lettered without a claim. A shell may pass an *Arrived instead, as
// a *Returned.
type Arrived struct {
	Spec    *Spec // the shell's, not changed after: the window keeps it
	Invalid string
}

// Admitted: the window's lane started it (lanes.Decision.Start): it is
// active in its lane until Finish.
type Admitted struct{}

// Dropped: the window's lane settles it without running it
// (lanes.Decision.Drop): skipped (overlap policy skip or latest) or
// superseded (replace) by the newer window By.
type Dropped struct {
	By     string
	Policy DropPolicy
}

// DropPolicy is the overlap policy that dropped a window.
type DropPolicy uint8

// The policies that drop windows.
const (
	DropSkip DropPolicy = iota
	DropLatest
	DropReplace
)

// Superseded: a newer window By of the job arrived at Now and the job's
// overlap policy is replace; this window is active (lanes.Decision.Cancel).
type Superseded struct {
	By  string
	Now time.Time
}

// SlotGranted: the window got a slot (lanes.Fair.Pop after a grant) at
// Now. A shell may pass a *SlotGranted instead, as a *Returned.
type SlotGranted struct{ Now time.Time }

// ChainOffered: the completion of the window's predecessor in its queue
// lane is about to claim this window in the same store call
// (dedupe.Settlement.Next); the predecessor's slot now counts as this
// window's. Offer it only to a Chainable window.
type ChainOffered struct{}

// Claimed: a claim call (ClaimBatch, or a predecessor's completion) gave
// the window a claim with a new fencing Token; Attempt counts it. ProvenAt
// is when that call started: the claim is proven from then. Now is when
// the answer is handled. A shell may pass a *Claimed instead, as a
// *Returned: the rules copy it only to keep a claim taken ahead.
type Claimed struct {
	Token    int64
	Attempt  int
	ProvenAt time.Time
	Now      time.Time
}

// AlreadyDone: the claim call found the window settled (done, dead-
// lettered, skipped or superseded).
type AlreadyDone struct{}

// Busy: the claim call found another claim live (another worker's, or one
// of ours whose answer was lost); Retry is its remaining TTL.
type Busy struct{ Retry time.Duration }

// ClaimFailed: the claim call gave no claim: the partition's context ended
// before the store answered (Ended), or the store refused the window's id
// for good (Err).
type ClaimFailed struct {
	Ended bool
	Err   error
}

// AheadRefused: the predecessor's completion did not claim this window
// (the completion was refused, or its call failed).
type AheadRefused struct{}

// Tick: the partition's extend interval passed.
type Tick struct{}

// Extended: an extend call that started at At succeeded for the window's
// claim: it is proven from At (a proof never moves back).
type Extended struct{ At time.Time }

// Fenced: an extend answered at Now found the window's claim taken over
// (or the window settled): the claim is not ours any more.
type Fenced struct{ Now time.Time }

// Returned: the window's handler returned Err at Now. Jitter, in [0, 1],
// places a retry's backoff within its equal-jitter range (the shell draws
// it). ReplaySkip, if set, is the reason of an operator's replay that moves
// the partition past this window with consent to skip it (SeekSkipping);
// the shell sets it only once the partition's context has ended.
//
// A shell may pass a *Returned instead, to spare the allocation of boxing
// one per attempt (the no-op burst's row): the rules read it during the
// step and keep nothing of it.
type Returned struct {
	Err        error
	Now        time.Time
	Jitter     float64
	ReplaySkip string
}

// TimerFired: a timer of the window fired at Now: the Wait numbered Seq
// ended, or (Seq 0, the partition's watchdog) a running attempt's deadline
// may have come. Jitter is as for Returned, for the retry of a handler
// abandoned now.
type TimerFired struct {
	Now    time.Time
	Seq    uint64
	Jitter float64
}

// Settled: the store answered the window's Settle action.
type Settled struct{ Answer Answer }

// Answer is the store's answer to one settlement.
type Answer uint8

// The answers (dedupe.Result.Err).
const (
	Accepted  Answer = iota // nil
	WasDone                 // dedupe.ErrAlreadyDone: settled already
	NotOurs                 // dedupe.ErrFenced: the token is not the window's claim
	ClaimLive               // dedupe.ErrBusy: a token-less skip found a live claim
	NoAnswer                // the store did not answer before the partition's context ended
)

// LetterWritten: the window's dead letter was acknowledged by the broker
// (or refused even in its minimal form: logged, and settled without one).
type LetterWritten struct{}

// LetterFailed: the partition's context ended before the dead letter was
// written.
type LetterFailed struct{}

// Halted: the partition is revoked, seeked or shutting down: start nothing
// new; what runs finishes and settles.
type Halted struct{}

// Stopped: the partition's context ended at Now (lost, or revoked past its
// Grace): nothing more is committed, and running handlers are abandoned
// Grace after Now.
type Stopped struct{ Now time.Time }

func (Arrived) event()       {}
func (Admitted) event()      {}
func (Dropped) event()       {}
func (Superseded) event()    {}
func (SlotGranted) event()   {}
func (ChainOffered) event()  {}
func (Claimed) event()       {}
func (AlreadyDone) event()   {}
func (Busy) event()          {}
func (ClaimFailed) event()   {}
func (AheadRefused) event()  {}
func (Tick) event()          {}
func (Extended) event()      {}
func (Fenced) event()        {}
func (Returned) event()      {}
func (TimerFired) event()    {}
func (Settled) event()       {}
func (LetterWritten) event() {}
func (LetterFailed) event()  {}
func (Halted) event()        {}
func (Stopped) event()       {}
