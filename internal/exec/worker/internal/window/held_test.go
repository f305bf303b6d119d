package window

import (
	"testing"
	"time"
)

// early is spec() for a window whose start is at start: published ahead
// when it arrives before then.
func early(start time.Duration) *Spec {
	sp := spec()
	sp.Start = at(start)
	return &sp
}

// A window claimed before its start holds its claim, without a slot,
// until its start; then it takes a slot and starts at once under that
// claim, with no second claim: the herd's row.
func TestHeldStartsAtItsStart(t *testing.T) {
	s := newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.want(Held, "want-slot", "claim", "release-slot", "wait 490ms")
	s.on(Extended{At: at(200 * ms)}, TimerFired{Now: at(500 * ms), Seq: s.w.seq})
	s.want(Held, "want-slot")
	s.on(SlotGranted{Now: at(501 * ms)})
	s.want(Running, "start token=7 attempt=1 timeout=+30.501s stepdown=+4.2s")
}

// No attempt starts before its window's start: a slot granted early (a
// clock that went back) holds the claim again.
func TestHeldNeverStartsEarly(t *testing.T) {
	s := newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.on(TimerFired{Now: at(400 * ms), Seq: s.w.seq}, &SlotGranted{Now: at(400 * ms)})
	s.want(Held, "want-slot", "claim", "release-slot", "wait 490ms", "want-slot", "release-slot", "wait 100ms")
	// A claim answered after the start starts at once.
	s = newSim(t).on(Arrived{Spec: early(5 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.want(Running, "want-slot", "claim", "start token=7 attempt=1 timeout=+30.01s stepdown=+4s")
}

// A held claim is given back when the partition halts, before or after
// its start, so the next owner runs the window at once with the same
// attempt number.
func TestHeldGivenBackOnHalt(t *testing.T) {
	s := newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.acts = nil
	s.on(Halted{})
	s.want(Left, "stop-wait", "unclaim token=7")

	s = newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.on(TimerFired{Now: at(500 * ms), Seq: s.w.seq})
	s.acts = nil
	s.on(Stopped{Now: at(600 * ms)})
	s.want(Left, "withdraw-slot", "unclaim token=7")
}

// A held claim taken over (an extend found another token) is claimed
// again the ordinary way; one whose proof lapsed by its start is not run
// under it.
func TestHeldLost(t *testing.T) {
	s := newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.acts = nil
	s.on(Fenced{Now: at(100 * ms)})
	s.want(Ready, "stop-wait", "want-slot")

	s = newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.on(TimerFired{Now: at(500 * ms), Seq: s.w.seq})
	s.acts = nil
	s.on(SlotGranted{Now: at(5 * sec)}) // no extend proved it for Proof (4s)
	s.want(Ready, "release-slot", "report stepped-down (attempt) cause=unproven", "want-slot")
}

// A held window superseded (overlap policy replace) is settled as such
// under its claim, without an attempt.
func TestHeldSuperseded(t *testing.T) {
	s := newSim(t).on(Arrived{Spec: early(500 * ms)}, Admitted{}, SlotGranted{Now: at(0)}, claimed(7, 1, 0, 10*ms))
	s.acts = nil
	s.on(Superseded{By: "j@2", Now: at(100 * ms)}, Settled{Answer: Accepted})
	s.want(Done, "stop-wait", "settle supersede token=7: superseded by newer window j@2 (overlap policy replace)",
		"report superseded cause=superseded", "finish")
}
