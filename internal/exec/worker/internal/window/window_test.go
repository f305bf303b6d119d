package window

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
)

// t0 is the scenarios' clock origin; times are shown relative to it.
var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	ms  = time.Millisecond
	sec = time.Second
)

// rules are the worker's defaults: claim TTL 6s, extend interval 2s
// (proof 4s), grace 10s, retention 7 days.
var rules = Rules{Proof: 4 * sec, Grace: 10 * sec, Retention: 7 * 24 * time.Hour, BusyMin: 20 * ms, BusyMax: sec}

// spec is a window published at t0 with 3 attempts, backoff 1s..10s and a
// 30s timeout.
func spec() Spec {
	return Spec{MaxAttempts: 3, Backoff: sec, MaxBackoff: 10 * sec, Timeout: 30 * sec, Born: t0}
}

// sim drives one window through Step the way the partition loop would,
// and records its actions, one line each.
type sim struct {
	t    *testing.T
	w    Window
	acts []string
}

func newSim(t *testing.T) *sim { return &sim{t: t} }

func (s *sim) on(events ...Event) *sim {
	for _, e := range events {
		w, acts := rules.Step(s.w, e)
		s.w = w
		for _, a := range acts {
			s.acts = append(s.acts, show(a, w))
		}
	}
	return s
}

// want checks the actions since the last want, and the state.
func (s *sim) want(state State, acts ...string) {
	s.t.Helper()
	if !slices.Equal(s.acts, acts) || s.w.State() != state {
		s.t.Fatalf("state %v, actions:\n  %s\nwant state %v, actions:\n  %s",
			s.w.State(), strings.Join(s.acts, "\n  "), state, strings.Join(acts, "\n  "))
	}
	s.acts = nil
}

func rel(t time.Time) string { return "+" + t.Sub(t0).String() }

// show writes action a as a line; w is the window as the step that
// returned a left it (Start's fields are the window's).
func show(a Action, w Window) string {
	switch a := a.(type) {
	case WantSlot:
		return "want-slot"
	case WithdrawSlot:
		return "withdraw-slot"
	case ReleaseSlot:
		return "release-slot"
	case Claim:
		return "claim"
	case Unclaim:
		return fmt.Sprintf("unclaim token=%d", a.Token)
	case Start:
		return fmt.Sprintf("start token=%d attempt=%d timeout=%s stepdown=%s", w.Token(), w.Attempt(), rel(w.TimeoutAt()), rel(w.StepDownAt(rules)))
	case Extend:
		return fmt.Sprintf("extend token=%d", a.Token)
	case Cancel:
		return "cancel " + a.Cause.String()
	case Watch:
		return "watch " + rel(a.At)
	case Abandon:
		return "abandon"
	case Settle:
		s := fmt.Sprintf("settle %s token=%d", a.Op, a.Token)
		if a.Reason != "" {
			s += ": " + a.Reason
		}
		return s
	case DeadLetter:
		return fmt.Sprintf("dead-letter attempts=%d: %s", a.Attempts, a.Reason)
	case Wait:
		return fmt.Sprintf("wait %v", a.D)
	case StopWait:
		return "stop-wait"
	case Report:
		s := "report " + string(a.Outcome)
		if a.OfAttempt {
			s += " (attempt)"
		}
		if a.Cause != CauseNone {
			s += " cause=" + a.Cause.String()
		}
		if a.Err != nil {
			s += " err=" + a.Err.Error()
		}
		return s
	case Finish:
		return "finish"
	}
	return fmt.Sprintf("%T", a)
}

// claimed is a claim answer for token (attempt) taken by a call that started
// at proven and answered at now.
func claimed(token int64, attempt int, proven, now time.Duration) Claimed {
	return Claimed{Token: token, Attempt: attempt, ProvenAt: at(proven), Now: at(now)}
}

// running brings a window to its first attempt's start at +10ms (token 7),
// and checks the way there.
func running(t *testing.T) *sim {
	s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{})
	s.want(Ready, "want-slot")
	s.on(SlotGranted{})
	s.want(Claiming, "claim")
	s.on(claimed(7, 1, 0, 10*ms))
	s.want(Running, "start token=7 attempt=1 timeout=+30.01s stepdown=+4s")
	return s
}

var errBoom = errors.New("boom")

// The fault table of docs/guarantees.md, one scenario per outcome the
// worker sees. The producer's rows (leader stopped, killed, paused, Kafka
// errors) reach the worker as a window published once, maybe late with
// trigger=catchup: the happy path.
func TestFaultTable(t *testing.T) {
	t.Run("happy path: run once, complete, commit", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Now: at(50 * ms)})
		s.want(Settling, "release-slot", "settle complete token=7")
		s.on(Settled{Answer: Accepted})
		s.want(Done, "report done (attempt)", "finish")
	})

	t.Run("worker stopped gracefully: the in-flight handler finishes within grace and completes", func(t *testing.T) {
		s := running(t)
		s.on(Halted{})
		s.want(Running)
		s.on(Returned{Now: at(2 * sec)}, Settled{Answer: Accepted})
		s.want(Done, "release-slot", "settle complete token=7", "report done (attempt)", "finish")
	})

	t.Run("worker stopped gracefully: windows not started are left to the next owner", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, Halted{})
		s.want(Left, "want-slot", "withdraw-slot")
		s = newSim(t).on(Arrived{Spec: ptr(spec())}, Halted{})
		s.want(Left)
	})

	t.Run("worker killed mid-handler: the next owner waits out the live claim, then runs with a higher token", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, Busy{Retry: 3 * sec})
		s.want(Waiting, "want-slot", "claim", "release-slot", "wait 1s")
		s.on(TimerFired{Now: at(sec), Seq: 1})
		s.want(Ready, "want-slot")
		s.on(SlotGranted{}, claimed(9, 2, sec, sec+5*ms))
		s.want(Running, "claim", "start token=9 attempt=2 timeout=+31.005s stepdown=+5s")
	})

	t.Run("worker killed: windows settled above the commit point are skipped as done", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, AlreadyDone{})
		s.want(Done, "want-slot", "claim", "release-slot", "report skipped-done", "finish")
	})

	t.Run("zombie worker: an extend finds the claim taken over; the handler is cancelled and its result discarded", func(t *testing.T) {
		s := running(t)
		s.on(Fenced{Now: at(2 * sec)})
		s.want(Running, "cancel fenced", "watch +12s")
		s.on(Returned{Err: context.Canceled, Now: at(2*sec + ms)})
		s.want(Ready, "release-slot", "report fenced (attempt) cause=fenced", "want-slot")
		s.on(SlotGranted{}, AlreadyDone{})
		s.want(Done, "claim", "release-slot", "report skipped-done", "finish")
	})

	t.Run("zombie worker: its completion is refused", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Now: at(sec)}, Settled{Answer: NotOurs})
		s.want(Ready, "release-slot", "settle complete token=7", "report fenced (attempt) cause=fenced", "want-slot")
	})

	t.Run("worker cut from Redis: the handler is cancelled before its claim can expire, then claimed again", func(t *testing.T) {
		s := running(t)
		s.on(Tick{}, Extended{At: at(2 * sec)})
		s.want(Running, "extend token=7")
		// The watchdog fires at the old deadline: the extend moved it.
		s.on(TimerFired{Now: at(4 * sec)})
		s.want(Running, "watch +6s")
		s.on(Tick{}) // this extend never answers
		s.want(Running, "extend token=7")
		s.on(TimerFired{Now: at(6 * sec)})
		s.want(Running, "cancel unproven", "watch +16s")
		s.on(Tick{})
		s.want(Running) // a stepped-down claim is not extended
		s.on(Returned{Err: context.Canceled, Now: at(6*sec + ms)})
		s.want(Ready, "release-slot", "report stepped-down (attempt) cause=unproven", "want-slot")
	})

	t.Run("worker cut from Redis: a claim answered too late is not started", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(7, 1, 0, 4*sec))
		s.want(Ready, "want-slot", "claim", "release-slot", "report stepped-down (attempt) cause=unproven", "want-slot")
	})

	t.Run("Redis down until the partition's context ends: nothing runs, nothing is committed", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, Stopped{Now: at(30 * sec)}, ClaimFailed{Ended: true})
		s.want(Left, "want-slot", "claim", "release-slot")
	})

	t.Run("redis-server restart: the store answers again and the window runs with a token of the new epoch", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(1<<32+1, 1, sec, sec))
		s.want(Running, "want-slot", "claim", "start token=4294967297 attempt=1 timeout=+31s stepdown=+5s")
	})

	t.Run("broker restart or a failed offset commit: the redelivered record is skipped as done", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, AlreadyDone{})
		s.want(Done, "want-slot", "claim", "release-slot", "report skipped-done", "finish")
	})

	t.Run("handler exceeds its timeout and returns: failed, retried after the backoff", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Err: context.DeadlineExceeded, Now: at(30 * sec), Jitter: 1})
		s.want(Settling, "release-slot", "report failed (attempt) err=context deadline exceeded", "settle release token=7: context deadline exceeded")
		s.on(Settled{Answer: Accepted})
		s.want(Waiting, "wait 1s")
		s.on(TimerFired{Now: at(31 * sec), Seq: 1})
		s.want(Ready, "want-slot")
	})

	t.Run("handler ignores its timeout and its claim's step-down: abandoned after grace, a failed attempt", func(t *testing.T) {
		s := running(t)
		s.on(Tick{}, Extended{At: at(2 * sec)}, TimerFired{Now: at(30 * sec)})
		s.want(Running, "extend token=7", "cancel unproven", "watch +40s")
		// Extends stop with the step-down; Grace after the timeout the
		// handler is abandoned, and counts as a failed attempt.
		s.on(TimerFired{Now: at(40*sec + 10*ms), Jitter: 0})
		s.want(Settling, "abandon", "release-slot", "report abandoned (attempt) cause=abandoned err=abandoned after timeout: handler ignored cancellation for 10s",
			"settle release token=7: abandoned after timeout: handler ignored cancellation for 10s")
	})

	t.Run("handler ignores its timeout while its claim is proven: abandoned, released, retried", func(t *testing.T) {
		s := running(t)
		for i := time.Duration(1); i <= 20; i++ {
			s.on(Extended{At: at(2 * i * sec)})
		}
		s.on(TimerFired{Now: at(40*sec + 10*ms)})
		s.want(Settling, "abandon", "release-slot", "report abandoned (attempt) cause=abandoned err=abandoned after timeout: handler ignored cancellation for 10s",
			"settle release token=7: abandoned after timeout: handler ignored cancellation for 10s")
		s.on(Settled{Answer: Accepted})
		s.want(Waiting, "wait 500ms")
	})

	t.Run("overlap replace: the running window is cancelled and settled as superseded", func(t *testing.T) {
		s := running(t)
		s.on(Superseded{By: "j@2", Now: at(sec)})
		s.want(Running, "cancel superseded", "watch +4s")
		s.on(Returned{Err: context.Canceled, Now: at(sec + ms)})
		s.want(Settling, "release-slot", "settle supersede token=7: superseded by newer window j@2 (overlap policy replace)")
		s.on(Settled{Answer: Accepted})
		s.want(Done, "report superseded (attempt) cause=superseded", "finish")
	})

	t.Run("overlap replace: a handler that succeeds anyway still ends superseded", func(t *testing.T) {
		s := running(t)
		s.on(Superseded{By: "j@2", Now: at(sec)}, Returned{Now: at(sec + ms)})
		s.want(Settling, "cancel superseded", "watch +4s", "release-slot", "settle supersede token=7: superseded by newer window j@2 (overlap policy replace)")
	})

	t.Run("poison record: dead-lettered unclaimed, then committed", func(t *testing.T) {
		s := newSim(t).on(Arrived{Invalid: "undecodable record: not JSON"})
		s.want(Settling, "dead-letter attempts=0: undecodable record: not JSON")
		s.on(LetterWritten{})
		s.want(Done, "report dead-lettered cause=invalid", "finish")
	})

	t.Run("poison record: the partition ends before its letter is written", func(t *testing.T) {
		s := newSim(t).on(Arrived{Invalid: "undecodable record: not JSON"}, LetterFailed{})
		s.want(Left, "dead-letter attempts=0: undecodable record: not JSON")
	})

	t.Run("unknown handler: a permanent error dead-letters at once", func(t *testing.T) {
		s := running(t)
		err := fmt.Errorf("no handler %q: %w", "x", handler.ErrPermanent)
		s.on(Returned{Err: err, Now: at(sec)})
		s.want(Settling, "release-slot", "report dead-lettered (attempt) err="+err.Error(), "dead-letter attempts=1: "+err.Error())
		s.on(LetterWritten{})
		s.want(Settling, "settle dead-letter token=7: "+err.Error())
		s.on(Settled{Answer: Accepted})
		s.want(Done, "finish")
	})
}

// Retries, backoff and max_attempts.
func TestRetries(t *testing.T) {
	t.Run("backoff doubles per attempt within its equal-jitter range", func(t *testing.T) {
		for _, c := range []struct {
			attempt int
			jitter  float64
			want    time.Duration
		}{
			{1, 0, 500 * ms}, {1, 1, sec}, {2, 0, sec}, {2, 0.5, 1500 * ms}, {3, 1, 4 * sec}, {5, 1, 10 * sec}, {9, 0, 5 * sec},
		} {
			if got := retryDelay(spec(), c.attempt, c.jitter); got != c.want {
				t.Errorf("retryDelay(attempt %d, jitter %v) = %v, want %v", c.attempt, c.jitter, got, c.want)
			}
		}
	})

	t.Run("the last attempt fails: dead-lettered, reported once", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(30, 3, 0, 0))
		s.want(Running, "want-slot", "claim", "start token=30 attempt=3 timeout=+30s stepdown=+4s")
		s.on(Returned{Err: errBoom, Now: at(sec)}, LetterWritten{}, Settled{Answer: Accepted})
		s.want(Done, "release-slot", "report dead-lettered (attempt) err=boom", "dead-letter attempts=3: boom", "settle dead-letter token=30: boom", "finish")
	})

	t.Run("the last attempt is abandoned: reported abandoned, then dead-lettered once the letter is written", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(30, 3, 0, 0))
		s.acts = nil
		for i := time.Duration(1); i <= 20; i++ {
			s.on(Extended{At: at(2 * i * sec)})
		}
		s.on(TimerFired{Now: at(40 * sec)}, LetterWritten{})
		s.want(Settling, "abandon", "release-slot", "report abandoned (attempt) cause=abandoned err=abandoned after timeout: handler ignored cancellation for 10s",
			"dead-letter attempts=3: abandoned after timeout: handler ignored cancellation for 10s",
			"report dead-lettered err=abandoned after timeout: handler ignored cancellation for 10s",
			"settle dead-letter token=30: abandoned after timeout: handler ignored cancellation for 10s")
	})

	t.Run("attempts used up by interruptions: dead-lettered without running", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(40, 4, 0, 0))
		s.want(Settling, "want-slot", "claim", "release-slot",
			"dead-letter attempts=3: max_attempts (3) used up: this would be attempt 4; the earlier attempts were interrupted (partition revoked or lost, a worker stopped mid-attempt, or a claim that could not be proven while Redis did not answer), and each counts")
		s.on(LetterWritten{})
		if s.acts[0] != "report dead-lettered cause=exhausted" || s.acts[1] != "settle dead-letter token=40: "+s.w.set.reason {
			t.Fatalf("after the letter: %q", s.acts)
		}
	})

	t.Run("a release the store refuses as not ours still retries after the backoff", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Err: errBoom, Now: at(sec), Jitter: 0}, Settled{Answer: NotOurs})
		s.want(Waiting, "release-slot", "report failed (attempt) err=boom", "settle release token=7: boom", "wait 500ms")
	})

	t.Run("a stale timer of a stopped wait changes nothing", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, Busy{Retry: 5 * ms})
		s.want(Waiting, "want-slot", "claim", "release-slot", "wait 20ms")
		s.on(TimerFired{Now: at(sec), Seq: 7})
		s.want(Waiting)
	})
}

// The replay horizon.
func TestBeyondHorizon(t *testing.T) {
	sp := spec()
	sp.Born = t0.Add(-8 * 24 * time.Hour)
	s := newSim(t).on(Arrived{Spec: &sp}, Admitted{}, SlotGranted{}, claimed(7, 1, 0, 0), LetterWritten{}, Settled{Answer: Accepted})
	want := "published 8d ago, more than the replay horizon (the store's retention, WorkerConfig.Retention = 7d): its done marker may have expired, so whether it already ran is unknown; redrive it with kjobctl dlq redrive if it must still run"
	s.want(Done, "want-slot", "claim", "release-slot", "dead-letter attempts=1: "+want, "report dead-lettered cause=horizon", "settle dead-letter token=7: "+want, "finish")
}

// The partition's end mid-attempt.
func TestPartitionEnds(t *testing.T) {
	t.Run("lost mid-attempt: the failed attempt's claim is released for the next owner", func(t *testing.T) {
		s := running(t)
		s.on(Stopped{Now: at(sec)})
		s.want(Running, "watch +4s") // the step-down comes before the abandonment
		s.on(Returned{Err: context.Canceled, Now: at(sec + ms)}, Settled{Answer: NoAnswer})
		s.want(Left, "release-slot", "report failed (attempt) err=context canceled", "settle release token=7: interrupted: partition revoked or lost: context canceled")
	})

	t.Run("lost mid-attempt, the handler ignores it: abandoned and left, not released", func(t *testing.T) {
		s := running(t)
		for i := time.Duration(1); i <= 5; i++ {
			s.on(Extended{At: at(2 * i * sec)})
		}
		s.on(Stopped{Now: at(sec)}, TimerFired{Now: at(11 * sec)})
		s.want(Left, "watch +11s", "abandon", "release-slot", "report abandoned (attempt) cause=abandoned err=abandoned after timeout: handler ignored cancellation for 10s")
	})

	t.Run("an operator's replay moved past it: settled as skipped under its claim", func(t *testing.T) {
		s := running(t)
		s.on(Stopped{Now: at(sec)}, Returned{Err: context.Canceled, Now: at(sec), ReplaySkip: "replay r1"}, Settled{Answer: Accepted})
		s.want(Done, "watch +4s", "release-slot", "settle skip token=7: replay r1", "report skipped-replay (attempt) cause=replay", "finish")
	})

	t.Run("an operator's replay moved past it, but the window is not ours to skip: left for the replay", func(t *testing.T) {
		s := running(t)
		s.on(Stopped{Now: at(sec)}, Returned{Err: context.Canceled, Now: at(sec), ReplaySkip: "replay r1"}, Settled{Answer: NotOurs})
		s.want(Left, "watch +4s", "release-slot", "settle skip token=7: replay r1")
	})

	t.Run("lost during a retry's release that the store does not answer: left, the claim expires", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Err: errBoom, Now: at(sec)}, Stopped{Now: at(sec + ms)}, Settled{Answer: NoAnswer})
		s.want(Left, "release-slot", "report failed (attempt) err=boom", "settle release token=7: boom")
	})

	t.Run("lost while a superseded window's settlement gets no answer: left", func(t *testing.T) {
		s := running(t)
		s.on(Superseded{By: "j@2", Now: at(sec)}, Returned{Err: context.Canceled, Now: at(sec + ms)}, Stopped{Now: at(2 * sec)}, Settled{Answer: NoAnswer})
		s.want(Left, "cancel superseded", "watch +4s", "release-slot", "settle supersede token=7: superseded by newer window j@2 (overlap policy replace)")
	})

	t.Run("halted while claiming: a claim that comes back is given back unstarted", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, Halted{}, claimed(7, 1, 0, 0))
		s.want(Left, "want-slot", "claim", "release-slot", "unclaim token=7")
	})

	t.Run("halted during a retry's backoff: left", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Err: errBoom, Now: at(sec)}, Halted{}, Settled{Answer: Accepted})
		s.want(Left, "release-slot", "report failed (attempt) err=boom", "settle release token=7: boom")
	})
}

// Overlap policies: what the lanes decide, as the window sees it.
func TestOverlap(t *testing.T) {
	t.Run("skip: dropped while another window of the job runs", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Dropped{By: "j@0", Policy: DropSkip}, Settled{Answer: Accepted})
		s.want(Done, "settle skip token=0: window j@0 of the job was still running (overlap policy skip)", "report skipped cause=policy", "finish")
	})

	t.Run("latest: dropped for a newer window; a live claim on it is waited out", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Dropped{By: "j@3", Policy: DropLatest}, Settled{Answer: ClaimLive})
		reason := "a newer window j@3 arrived while it waited (overlap policy latest keeps only the newest)"
		s.want(Waiting, "settle skip token=0: "+reason, "wait 1s")
		s.on(TimerFired{Now: at(sec), Seq: 1}, Settled{Answer: WasDone})
		s.want(Done, "settle skip token=0: "+reason, "report skipped-done", "finish")
	})

	t.Run("replace: dropped before it started", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Dropped{By: "j@2", Policy: DropReplace}, Settled{Answer: Accepted})
		s.want(Done, "settle supersede token=0: superseded by window j@2 before it started (overlap policy replace)", "report superseded cause=policy", "finish")
	})

	t.Run("replace: superseded while waiting for a slot", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, Superseded{By: "j@2", Now: at(ms)})
		s.want(Settling, "want-slot", "withdraw-slot", "settle supersede token=0: superseded by newer window j@2 (overlap policy replace)")
	})

	t.Run("replace: superseded while claiming; the claim is settled as superseded", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, Superseded{By: "j@2", Now: at(ms)}, claimed(7, 1, 0, 0))
		s.want(Settling, "want-slot", "claim", "release-slot", "settle supersede token=7: superseded by newer window j@2 (overlap policy replace)")
	})

	t.Run("replace: superseded during a retry's backoff", func(t *testing.T) {
		s := running(t)
		s.on(Returned{Err: errBoom, Now: at(sec)}, Settled{Answer: Accepted}, Superseded{By: "j@2", Now: at(1200 * ms)})
		s.want(Settling, "release-slot", "report failed (attempt) err=boom", "settle release token=7: boom", "wait 500ms", "stop-wait",
			"settle supersede token=0: superseded by newer window j@2 (overlap policy replace)")
	})

	t.Run("replace after the timeout: the attempt is not superseded, it fails and then settles as superseded", func(t *testing.T) {
		s := running(t)
		s.on(Superseded{By: "j@2", Now: at(31 * sec)}, Returned{Err: context.DeadlineExceeded, Now: at(31 * sec)}, Settled{Answer: Accepted})
		s.want(Settling, "cancel superseded", "watch +4s", "release-slot", "report failed (attempt) err=context deadline exceeded",
			"settle release token=7: context deadline exceeded", "settle supersede token=0: superseded by newer window j@2 (overlap policy replace)")
	})
}

// Chaining: a queue lane's next window claimed by its predecessor's
// completion, as the next window sees it.
func TestAhead(t *testing.T) {
	t.Run("claimed ahead, then admitted: runs at once on the slot it holds", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, claimed(8, 1, 0, 0))
		s.want(Ahead)
		s.on(Admitted{})
		s.want(Running, "start token=8 attempt=1 timeout=+30s stepdown=+4s")
	})

	t.Run("the completion was refused: the slot goes back, the window waits in its lane", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, AheadRefused{}, Admitted{})
		s.want(Ready, "release-slot", "want-slot")
	})

	t.Run("dropped with its claim ahead: the claim and slot are given back, then it is skipped", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, claimed(8, 1, 0, 0), Dropped{By: "j@0", Policy: DropSkip})
		s.want(Settling, "unclaim token=8", "release-slot", "settle skip token=0: window j@0 of the job was still running (overlap policy skip)")
	})

	t.Run("dropped while its claim ahead is in flight: the answer gives it back", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, Dropped{By: "j@0", Policy: DropSkip}, Settled{Answer: Accepted})
		s.want(Done, "settle skip token=0: window j@0 of the job was still running (overlap policy skip)", "report skipped cause=policy", "finish")
		s.on(claimed(8, 1, 0, 0))
		s.want(Done, "release-slot", "unclaim token=8")
	})

	t.Run("halted with its claim ahead: given back", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, claimed(8, 1, 0, 0), Halted{})
		s.want(Left, "unclaim token=8", "release-slot")
	})

	t.Run("a claim ahead that found the window done: skipped as done when admitted", func(t *testing.T) {
		s := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, AlreadyDone{}, Admitted{})
		s.want(Done, "release-slot", "report skipped-done", "finish")
	})
}

func ptr[T any](v T) *T { return &v }

// A shell may pass *Arrived and *Returned (no allocation for boxing them):
// the rules decide the same as for the values, and keep nothing of the
// event, so the shell may reuse it.
func TestPointerEvents(t *testing.T) {
	for _, err := range []error{nil, errors.New("boom")} {
		byValue := newSim(t).on(Arrived{Spec: ptr(spec())}, Admitted{}, SlotGranted{}, claimed(7, 1, 0, 10*ms),
			Returned{Err: err, Now: at(sec), Jitter: 0.5})
		arrived := &Arrived{Spec: ptr(spec())}
		c := ptr(claimed(7, 1, 0, 10*ms))
		ret := &Returned{Err: err, Now: at(sec), Jitter: 0.5}
		byPointer := newSim(t).on(arrived, Admitted{}, SlotGranted{}, c, ret)
		*arrived, *c, *ret = Arrived{}, Claimed{}, Returned{} // reused by the shell: nothing of them was kept
		byValue.on(Settled{Answer: Accepted})
		byPointer.on(Settled{Answer: Accepted})
		if !slices.Equal(byValue.acts, byPointer.acts) || byValue.w.State() != byPointer.w.State() {
			t.Fatalf("err %v: by value: %v %q; by pointer: %v %q", err, byValue.w.State(), byValue.acts, byPointer.w.State(), byPointer.acts)
		}
		if len(byValue.acts) < 5 {
			t.Fatalf("err %v: the history did not reach its settlement: %q", err, byValue.acts)
		}
	}
	// A claim taken ahead is kept until the lane admits the window: the
	// rules copy a *Claimed, which the shell reuses meanwhile.
	byValue := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, claimed(7, 1, 0, 10*ms), Admitted{})
	c := ptr(claimed(7, 1, 0, 10*ms))
	byPointer := newSim(t).on(Arrived{Spec: ptr(spec())}, ChainOffered{}, c)
	*c = Claimed{}
	byPointer.on(Admitted{})
	if !slices.Equal(byValue.acts, byPointer.acts) || byValue.w.State() != byPointer.w.State() || byPointer.w.State() != Running {
		t.Fatalf("ahead: by value: %v %q; by pointer: %v %q", byValue.w.State(), byValue.acts, byPointer.w.State(), byPointer.acts)
	}
}
