package window

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// driver plays a shell around one window: it answers only what the
// window asked for (a claim, a settlement, a letter, a wait, a running
// handler), plus the events that may come at any time (lanes, extends,
// timers, the partition's end), in an order choose picks. It checks the
// invariants after every step.
type driver struct {
	t      testing.TB
	choose func(n int) int
	w      Window
	now    time.Time
	trail  []string

	claimReq, aheadReq, settleReq, letterReq, wantSlot bool
	settleOp                                           dedupe.Op
	settleTok                                          int64
	waitSeq                                            uint64
	running                                            bool
	runTok                                             int64
	admitted, dropped, superseded, offered             bool
	nextToken                                          int64
	attempts                                           int

	claimedTokens map[int64]bool // tokens the window was given
	started       map[int64]bool // tokens it started
	finished      int
	doneReports   int
	reports       int
	slot          bool
	succeeded     int64          // the token whose handler returned nil, until its Complete
	start         time.Time      // the window's start (Spec.Start)
	unclaimed     map[int64]bool // tokens given back
}

func newDriver(t testing.TB, choose func(int) int) *driver {
	return &driver{t: t, choose: choose, now: t0, nextToken: 1, claimedTokens: map[int64]bool{}, started: map[int64]bool{}, unclaimed: map[int64]bool{}}
}

func (d *driver) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s\ntrail:\n  %s", fmt.Sprintf(format, args...), strings.Join(d.trail, "\n  "))
}

// events lists what may happen next.
func (d *driver) events() []Event {
	var es []Event
	w := d.w
	add := func(e ...Event) { es = append(es, e...) }
	if w.State() == Fetched {
		// Half of the windows arrive before their start (published ahead),
		// by up to 60s: many steps of the driver's clock.
		early := spec()
		early.Start = d.now.Add(time.Duration(1+d.choose(60000)) * ms)
		return []Event{Arrived{Spec: ptr(spec())}, Arrived{Spec: ptr(early)}, Arrived{Spec: ptr(early)}, Arrived{Invalid: "not JSON"}}
	}
	claim := func() {
		d.nextToken += int64(1 + d.choose(3))
		d.attempts++
		add(Claimed{Token: d.nextToken, Attempt: d.attempts, ProvenAt: d.now.Add(-time.Duration(d.choose(6)) * sec), Now: d.now},
			AlreadyDone{}, Busy{Retry: time.Duration(d.choose(3)) * sec})
	}
	if d.claimReq {
		claim()
		add(ClaimFailed{Ended: true}, ClaimFailed{Err: dedupe.ErrInvalidID})
	}
	if d.aheadReq {
		claim()
		add(AheadRefused{})
	}
	if d.wantSlot {
		add(SlotGranted{Now: d.now}, &SlotGranted{Now: d.now})
	}
	if !d.admitted && !d.dropped && w.State() != Fetched {
		add(Admitted{}, Dropped{By: "j@9", Policy: DropPolicy(d.choose(3))})
		if !d.offered && w.Chainable() {
			add(ChainOffered{})
		}
	}
	if d.admitted && !d.superseded {
		add(Superseded{By: "j@9", Now: d.now})
	}
	if d.settleReq {
		add(Settled{Answer: Answer(d.choose(5))})
	}
	if d.letterReq {
		add(LetterWritten{}, LetterFailed{})
	}
	if d.waitSeq != 0 {
		add(TimerFired{Now: d.now, Seq: d.waitSeq})
	}
	if d.running {
		errs := []error{nil, errBoom, context.Canceled, fmt.Errorf("bad: %w", handler.ErrPermanent)}
		add(Returned{Err: errs[d.choose(len(errs))], Now: d.now, Jitter: 0.5},
			Returned{Now: d.now, ReplaySkip: "replay"})
	}
	add(Tick{}, Extended{At: d.now.Add(-time.Duration(d.choose(2)) * sec)}, Fenced{Now: d.now}, TimerFired{Now: d.now},
		Halted{}, Stopped{Now: d.now})
	return es
}

func (d *driver) step() bool {
	es := d.events()
	e := es[d.choose(len(es))]
	d.now = d.now.Add(time.Duration(d.choose(4000)) * ms)
	before := d.w
	w, acts := rules.Step(d.w, e)
	d.w = w
	line := fmt.Sprintf("%T%+v -> %v:", e, e, w.State())
	for _, a := range acts {
		line += " [" + show(a, w) + "]"
	}
	d.trail = append(d.trail, line)

	// What the event answered is answered.
	if a, ok := e.(Arrived); ok && a.Spec != nil {
		d.start = a.Spec.Start
	}
	switch e := e.(type) {
	case Claimed, AlreadyDone, Busy, ClaimFailed, AheadRefused:
		if before.State() == Claiming || before.State() == Ahead && before.ahead == nil || before.unchain {
			d.claimReq, d.aheadReq = false, false
		}
		if c, ok := e.(Claimed); ok {
			d.claimedTokens[c.Token] = true
		}
	case SlotGranted, *SlotGranted:
		d.wantSlot = false
		if w.HoldsSlot() || before.State() == Held && before.due {
			d.slot = true // taken (a Held window gives it back if its start has not come)
		}
	case ChainOffered:
		d.offered = true
		if w.State() == Ahead {
			d.aheadReq, d.slot = true, true
		}
	case Settled:
		d.settleReq = false
	case LetterWritten, LetterFailed:
		d.letterReq = false
	case TimerFired:
		if e.Seq == d.waitSeq {
			d.waitSeq = 0
		}
	case Returned:
		if before.State() == Running {
			d.running = false
			if e.Err == nil {
				d.succeeded = before.Token()
			}
		}
	case Admitted:
		d.admitted = true
	case Dropped:
		if before.State() == New || before.State() == Ahead {
			d.dropped = true
		}
	case Superseded:
		d.superseded = true
	}

	for _, a := range acts {
		if before.State().Final() {
			switch a.(type) {
			case ReleaseSlot, Unclaim:
			default:
				d.fail("a final window acted: %s", show(a, w))
			}
		}
		switch a := a.(type) {
		case WantSlot:
			if d.slot {
				d.fail("wants a slot while it holds one")
			}
			d.wantSlot = true
		case WithdrawSlot:
			d.wantSlot = false
		case ReleaseSlot:
			if !d.slot {
				d.fail("releases a slot it does not hold")
			}
			d.slot = false
		case Claim:
			if !d.slot {
				d.fail("claims without a slot")
			}
			d.claimReq = true
		case Unclaim:
			if !d.claimedTokens[a.Token] || d.started[a.Token] {
				d.fail("unclaims token %d, not a claim it holds unstarted", a.Token)
			}
			d.unclaimed[a.Token] = true
		case Start:
			tok := w.Token()
			switch {
			case !d.claimedTokens[tok]:
				d.fail("starts under token %d, never claimed", tok)
			case d.started[tok]:
				d.fail("starts token %d twice", tok)
			case d.finished > 0:
				d.fail("starts after it was finished")
			case before.halted:
				d.fail("starts in a halted partition")
			case !d.slot:
				d.fail("starts without a slot")
			case w.Attempt() > spec().MaxAttempts:
				d.fail("starts attempt %d of %d", w.Attempt(), spec().MaxAttempts)
			case d.now.Before(d.start):
				d.fail("starts at %v, %v before its window's start", d.now.Sub(t0), d.start.Sub(d.now))
			}
			d.started[tok], d.running, d.runTok = true, true, tok
		case Extend:
			if (!d.running || a.Token != d.runTok) && before.State() != Held {
				d.fail("extends token %d while not running it nor holding it", a.Token)
			}
		case Abandon:
			d.running = false
		case Settle:
			if d.settleReq {
				d.fail("a second settlement while one is in flight")
			}
			if a.Token != 0 && !d.claimedTokens[a.Token] {
				d.fail("settles under token %d, never claimed", a.Token)
			}
			if a.Op == dedupe.OpComplete && (a.Token != d.succeeded || !d.started[a.Token]) {
				d.fail("completes token %d, whose attempt did not succeed", a.Token)
			}
			d.settleReq, d.settleOp, d.settleTok = true, a.Op, a.Token
		case DeadLetter:
			d.letterReq = true
		case Wait:
			d.waitSeq = a.Seq
		case StopWait:
			d.waitSeq = 0
		case Report:
			d.reports++
			if a.Outcome == OutcomeDone {
				d.doneReports++
				st, ok := e.(Settled)
				if !ok || st.Answer != Accepted || d.settleOp != dedupe.OpComplete {
					d.fail("reports done without an accepted completion")
				}
			}
		case Finish:
			d.finished++
			if d.reports == 0 {
				d.fail("finished without reporting an outcome")
			}
		}
	}
	switch {
	case d.finished > 1:
		d.fail("finished twice")
	case d.doneReports > 1:
		d.fail("completed twice")
	case d.finished == 1 && w.State() != Done:
		d.fail("finished but %v", w.State())
	case w.State() == Done && d.finished == 0:
		d.fail("done without Finish")
	case w.HoldsSlot() != d.slot:
		d.fail("HoldsSlot %v, the shell counts %v", w.HoldsSlot(), d.slot)
	}
	if w.State().Final() && !d.aheadReq && !d.claimReq && d.slot {
		d.fail("ends %v holding a slot", w.State())
	}
	// A claim held until the start is run, settled or given back: a Held
	// window that leaves without its token started gives it back.
	if before.State() == Held && w.State() != Held {
		tok := before.Token()
		switch {
		case d.started[tok] || d.unclaimed[tok]:
		case w.State() == Settling && d.settleTok == tok:
		case w.State() == Waiting || w.State() == Ready || w.State() == Claiming:
			// Fenced (the claim is not ours), or stepped down at its
			// start: claimed again.
		default:
			d.fail("left Held (%v) with claim %d neither run, settled nor given back", w.State(), tok)
		}
	}
	if w.State() == Held && d.now.Before(before.Spec().Start) && !w.due && d.waitSeq == 0 {
		d.fail("held before its start with no wait for it")
	}
	return !w.State().Final() || d.aheadReq || d.claimReq
}

func (d *driver) run(maxSteps int) {
	for i := 0; i < maxSteps && d.step(); i++ {
	}
}

// TestInvariants drives windows through random histories: never two
// completions nor two finishes, a finished window never starts again, a
// settlement or start only under a claim it was given, a slot given back
// exactly once.
func TestInvariants(t *testing.T) {
	for seed := uint64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, 24))
		d := newDriver(t, func(n int) int { return r.IntN(n) })
		d.run(200)
	}
}

// FuzzStep is TestInvariants with the fuzzer choosing the history.
func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("\x00\x05\x03\x07\x01\x09\x02\x02\x04\x08\x06"))
	f.Fuzz(func(t *testing.T, data []byte) {
		i := 0
		d := newDriver(t, func(n int) int {
			if i >= len(data) {
				return 0
			}
			b := data[i]
			i++
			return int(b) % n
		})
		d.run(len(data) + 1)
	})
}
