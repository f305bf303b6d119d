package worker

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// The shadow (issue 24, step 1 of docs/design/window-lifecycle.md's
// wiring plan): each window the loop tracks also carries a machine.Window,
// stepped with the events the loop sees; at the end of each turn of the
// loop, the machine's state and actions are compared with what the loop
// did, and a difference panics. It proves the rules against the loop's
// tests and the chaos suite before anything depends on them.
//
// It is off in production (every hook is behind shadowOn, a branch on a
// package variable): the worker's tests turn it on in TestMain, and the
// chaos suite (another package, other processes) with the environment
// variable KJOB_WINDOW_SHADOW=1, read once at start.
var shadowOn = os.Getenv("KJOB_WINDOW_SHADOW") == "1"

// shadow is one window's machine and what was done for it in this turn.
type shadow struct {
	m   machine.Window
	off time.Duration // machine time = real time + off (set with the window's claim)
	seq uint64        // the Seq of the machine's last Wait
	// retry is the backoff the loop drew for its retry (failed); the
	// machine is given the same jitter.
	retry time.Duration

	waitsWant, waitsGot []time.Duration // the Waits' durations this turn

	want  []string // the machine's actions this turn (the compared kinds)
	got   []string // the loop's actions this turn
	dirty bool
	done  bool     // the loop finished it (stDone means Done, not Left)
	trail []string // the last events and actions, for the report
}

// shadowLoop is a loop's shadow state.
type shadowLoop struct {
	rules machine.Rules
	live  map[*win]struct{} // windows whose machine is not final (Halted, Stopped)
	dirty []*win
}

func (l *loop) shInit() {
	w := l.w
	l.sh = &shadowLoop{
		rules: machine.Rules{Proof: w.claims.Proof(), Grace: w.cfg.Grace, Retention: w.cfg.Store.Retention(), BusyMin: busyMin, BusyMax: busyMax},
		live:  map[*win]struct{}{},
	}
}

// shArrived gives wn, just decoded, its machine.
func (l *loop) shArrived(wn *win) {
	born := wn.msg.PublishedAt
	if wn.rec.Timestamp.After(born) {
		born = wn.rec.Timestamp
	}
	p := wn.msg.Policy
	wn.sh = &shadow{}
	l.sh.live[wn] = struct{}{}
	l.shStep(wn, machine.Arrived{Spec: machine.Spec{ID: wn.msg.ID, Job: wn.msg.Job, MaxAttempts: p.MaxAttempts,
		Backoff: time.Duration(p.Backoff), MaxBackoff: time.Duration(p.MaxBackoff), Timeout: time.Duration(p.Timeout), Born: born}})
}

// shStep steps wn's machine with e and notes the actions it returns.
func (l *loop) shStep(wn *win, e machine.Event) {
	s := wn.sh
	if s == nil {
		return
	}
	m, acts := l.sh.rules.Step(s.m, e)
	s.m = m
	s.note(fmt.Sprintf("event %T%+v -> %s", e, e, m.State()))
	for _, a := range acts {
		if w, ok := a.(machine.Wait); ok {
			s.seq = w.Seq
			s.waitsWant = append(s.waitsWant, w.D)
		}
		if k := actionKey(a); k != "" {
			s.want = append(s.want, k)
			s.note("  want " + k)
		}
	}
	l.shDirty(wn)
}

// shDid notes that the loop did action k for wn.
func (l *loop) shDid(wn *win, k string) {
	s := wn.sh
	if s == nil {
		return
	}
	s.got = append(s.got, k)
	s.note("  did  " + k)
	l.shDirty(wn)
}

// shWait notes that the loop waits d for wn.
func (l *loop) shWait(wn *win, d time.Duration) {
	if wn.sh == nil {
		return
	}
	wn.sh.waitsGot = append(wn.sh.waitsGot, d)
	l.shDid(wn, "wait")
}

// sameWaits reports whether the loop's waits are the machine's, within
// the rounding of the jitter carried over as a fraction.
func sameWaits(want, got []time.Duration) bool {
	if len(want) != len(got) {
		return false
	}
	slices.Sort(want)
	slices.Sort(got)
	for i := range want {
		if d := want[i] - got[i]; d > time.Microsecond || d < -time.Microsecond {
			return false
		}
	}
	return true
}

func (l *loop) shDirty(wn *win) {
	if !wn.sh.dirty {
		wn.sh.dirty = true
		l.sh.dirty = append(l.sh.dirty, wn)
	}
}

func (s *shadow) note(line string) {
	if len(s.trail) == 48 {
		s.trail = s.trail[1:]
	}
	s.trail = append(s.trail, line)
}

// actionKey names an action as the comparison sees it; "" for the kinds
// not compared (Cancel, Watch, Abandon, Extend, StopWait: the watchdog's
// and the timers' inner workings, see the design doc's "Shadow run").
func actionKey(a machine.Action) string {
	switch a := a.(type) {
	case machine.WantSlot:
		return "want-slot"
	case machine.WithdrawSlot:
		return "withdraw-slot"
	case machine.ReleaseSlot:
		return "release-slot"
	case machine.Claim:
		return "claim"
	case machine.Unclaim:
		return fmt.Sprintf("unclaim %d", a.Token)
	case machine.Start:
		return fmt.Sprintf("start %d/%d", a.Token, a.Attempt)
	case machine.Settle:
		return fmt.Sprintf("settle %s %d", a.Op, a.Token)
	case machine.DeadLetter:
		return fmt.Sprintf("dead-letter %d", a.Attempts)
	case machine.Wait:
		return "wait"
	case machine.Report:
		return fmt.Sprintf("report %s of-attempt=%v", a.Outcome, a.OfAttempt)
	case machine.Finish:
		return "finish"
	}
	return ""
}

// shCheck compares, for every window touched in this turn, the machine's
// state and actions with the loop's, and panics on a difference.
func (l *loop) shCheck() {
	for _, wn := range l.sh.dirty {
		s := wn.sh
		s.dirty = false
		slices.Sort(s.want)
		slices.Sort(s.got)
		if !slices.Equal(s.want, s.got) || !sameWaits(s.waitsWant, s.waitsGot) || !shStateMatch(wn.state, s.m.State(), s.done, l.halted) {
			panic(fmt.Sprintf("window shadow: the rules and the loop differ for window %s (offset %d): loop state %s, machine %s; loop did %q (waits %v), machine wants %q (waits %v); halted=%v stopped=%v\ntrail:\n%s",
				wn.msg.ID, wn.rec.Offset, wn.state, s.m.State(), s.got, s.waitsGot, s.want, s.waitsWant, l.halted, l.stopped, strings.Join(s.trail, "\n")))
		}
		s.want, s.got, s.waitsWant, s.waitsGot = s.want[:0], s.got[:0], s.waitsWant[:0], s.waitsGot[:0]
		if s.m.State().Final() {
			delete(l.sh.live, wn)
		}
	}
	l.sh.dirty = l.sh.dirty[:0]
}

// shStateMatch reports whether the loop's state st matches the machine's
// m. stDone is Done once finished and Left otherwise; in a halted
// partition, a window the loop leaves in stNew, stChaining or stWaiting
// (it never looks at it again) is Left.
func shStateMatch(st winState, m machine.State, finished, halted bool) bool {
	if halted && m == machine.Left && (st == stNew || st == stChaining || st == stWaiting) {
		return true
	}
	switch st {
	case stNew:
		return m == machine.New
	case stReady:
		return m == machine.Ready
	case stClaiming:
		return m == machine.Claiming
	case stRunning:
		return m == machine.Running
	case stSettling:
		return m == machine.Settling
	case stWaiting:
		return m == machine.Waiting
	case stChaining:
		return m == machine.Ahead
	case stDone:
		if finished {
			return m == machine.Done
		}
		return m == machine.Left
	}
	return false
}

func (s winState) String() string {
	names := [...]string{"stNew", "stReady", "stClaiming", "stRunning", "stSettling", "stWaiting", "stChaining", "stDone"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("winState(%d)", uint8(s))
}

// shClaimEvent maps a claim (of a claim call, or a predecessor's
// completion) to its event. now is the real time the claim is handled
// at; the machine's clock is Config.Now (which the horizon reads), and
// the claim's proof is carried over as an age.
func (l *loop) shClaimEvent(wn *win, c dedupe.Claim, proven, now time.Time) machine.Event {
	switch c.Outcome {
	case dedupe.Claimed:
		mnow := l.w.cfg.Now()
		wn.sh.off = mnow.Sub(now)
		return machine.Claimed{Token: c.Token, Attempt: c.Attempt, ProvenAt: proven.Add(wn.sh.off), Now: mnow}
	case dedupe.AlreadyDone:
		return machine.AlreadyDone{}
	}
	return machine.Busy{Retry: c.Retry}
}

// shClaimed steps wn with its claim call's answer c, after claimedOne
// handled it. A started attempt's real start is the one its timeout
// counts from (deadlineFor's millisecond).
func (l *loop) shClaimed(wn *win, c dedupe.Claim, proven time.Time) {
	if wn.sh == nil {
		return
	}
	now := time.Now()
	if a := wn.att; a != nil && a.timeout != nil {
		now = monoBase.Add(time.Duration(a.timeout.at) - time.Duration(wn.msg.Policy.Timeout))
	}
	l.shStep(wn, l.shClaimEvent(wn, c, proven, now))
}

// mtime returns the real time t on wn's machine clock.
func (wn *win) mtime(t time.Time) time.Time {
	if wn.sh == nil {
		return t
	}
	return t.Add(wn.sh.off)
}

// shEnded steps the machine of a's window with how its attempt ended, as
// the loop saw it: the fence, step-down or abandonment the watchdog and
// the extend calls decided on their goroutines (at the times they
// recorded), then the handler's return. It runs after the loop handled
// the end (attemptEnded), so as to know the retry's backoff it drew.
func (l *loop) shEnded(a *attempt, res result) {
	wn := a.wn
	if wn.sh == nil {
		return
	}
	proof := l.sh.rules.Proof
	d := a.claim.Deadline()
	l.shStep(wn, machine.Extended{At: wn.mtime(d.Add(-proof))})
	switch {
	case res.fenced:
		at := time.Now()
		if c := a.cancelled.Load(); c != 0 {
			at = monoBase.Add(time.Duration(c))
		}
		l.shStep(wn, machine.Fenced{Now: wn.mtime(at)})
	case res.unproven:
		l.shStep(wn, machine.TimerFired{Now: wn.mtime(d)})
	}
	now := time.Now()
	// The jitter of the retry's backoff the loop drew (failed), if any.
	var jitter float64
	if r := wn.sh.retry; r != 0 {
		wn.sh.retry = 0
		p := wn.msg.Policy
		full := backoff.Exponential(time.Duration(p.Backoff), time.Duration(p.MaxBackoff), wn.claim.Attempt, backoff.None)
		if half := full / 2; full > half {
			jitter = float64(r-half) / float64(full-half)
		}
	}
	if res.abandoned {
		// 2ms: deadlineFor rounds the loop's timeout down to the
		// millisecond, and a chained window's machine counts it from its
		// claim's answer.
		l.shStep(wn, machine.TimerFired{Now: wn.mtime(now).Add(2 * time.Millisecond), Jitter: jitter})
		return
	}
	ret := machine.Returned{Err: res.err, Now: wn.mtime(now), Jitter: jitter}
	if res.err != nil && !res.abandoned && !res.fenced && !res.unproven && !(res.superseded && !res.fenced && !res.unproven) &&
		(l.stopped || l.ctx.Err() != nil) {
		if !l.stopped {
			// The loop reads the partition's context before its own
			// turn sees it end: the same Stopped, seen earlier.
			l.shStep(wn, machine.Stopped{Now: wn.mtime(now)})
		}
		if sk, ok := l.w.replaySkips.lookup(l.n, wn.rec.Offset); ok {
			ret.ReplaySkip = sk.reason
		}
	}
	l.shStep(wn, ret)
}

// shAnswer maps a settlement's answer to its event.
func shAnswer(err error) machine.Settled {
	switch {
	case err == nil:
		return machine.Settled{Answer: machine.Accepted}
	case errors.Is(err, dedupe.ErrAlreadyDone):
		return machine.Settled{Answer: machine.WasDone}
	case errors.Is(err, dedupe.ErrFenced):
		return machine.Settled{Answer: machine.NotOurs}
	case errors.Is(err, dedupe.ErrBusy):
		return machine.Settled{Answer: machine.ClaimLive}
	}
	return machine.Settled{Answer: machine.NoAnswer}
}

// shBroadcast steps every live window with e (Halted, Stopped).
func (l *loop) shBroadcast(e func(*win) machine.Event) {
	for wn := range l.sh.live {
		l.shStep(wn, e(wn))
	}
}
