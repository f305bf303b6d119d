package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// gates is a handler whose runs of chosen windows block until the test
// opens their gate (or their context ends); every other run returns at
// once. It records each run's start, end and cancellation cause.
type gates struct {
	mu      sync.Mutex
	gate    map[string]chan struct{} // window id -> closed to let its runs return
	ignore  map[string]bool          // windows whose runs ignore cancellation until their gate opens
	runs    []gateRun
	running int
	most    int // the most runs at once
	started chan string
}

type gateRun struct {
	id         string
	token      int64
	start, end time.Time
	cause      error
}

func newGates() *gates {
	return &gates{gate: map[string]chan struct{}{}, ignore: map[string]bool{}, started: make(chan string, 1000)}
}

// hold makes the runs of window id block until open(id).
func (g *gates) hold(id string) {
	g.mu.Lock()
	g.gate[id] = make(chan struct{})
	g.mu.Unlock()
}

func (g *gates) open(id string) {
	g.mu.Lock()
	close(g.gate[id])
	g.mu.Unlock()
}

func (g *gates) HandleJob(ctx context.Context, j *handler.Job) error {
	g.mu.Lock()
	gate, ignore := g.gate[j.ID()], g.ignore[j.ID()]
	i := len(g.runs)
	g.runs = append(g.runs, gateRun{id: j.ID(), token: j.FencingToken(), start: time.Now()})
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	g.started <- j.ID()
	var err error
	if gate != nil {
		if ignore {
			<-gate
			err = context.Cause(ctx)
		} else {
			select {
			case <-gate:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	}
	g.mu.Lock()
	g.runs[i].end = time.Now()
	g.runs[i].cause = context.Cause(ctx)
	g.running--
	g.mu.Unlock()
	return err
}

// of returns the runs of window id.
func (g *gates) of(id string) []gateRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gateRun
	for _, r := range g.runs {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

func (g *gates) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// started waits until window id's handler has started.
func (g *gates) waitStarted(t *testing.T, id string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() bool { return len(g.of(id)) > 0 }, "window %s starts", id)
}

func overlapPolicy(o jobmsg.Overlap) jobmsg.Policy {
	p := defaultPolicy
	p.Overlap = o
	return p
}

// A slow job does not hold up another job on the same partition: the fast
// job's windows run and settle while the slow window still runs, and the
// commit point waits for the slow one.
func TestSlowJobDoesNotBlockOtherJobs(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	slow := window("slow", "g", 0, defaultPolicy)
	g.hold(slow.ID)
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(slow)
	g.waitStarted(t, slow.ID)
	var fast []*jobmsg.Message
	for i := range 20 {
		fast = append(fast, window("fast", "g", i, defaultPolicy))
	}
	e.publish(fast...)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == len(fast) }, "the fast job's windows are done while the slow one runs (have %d)", x.count(OutcomeDone))
	if got := e.committed()[0]; got != 0 {
		t.Fatalf("committed offset %d while the first record (the slow window) is unsettled; want 0", got)
	}
	g.open(slow.ID)
	testenv.Eventually(t, 20*time.Second, func() bool { return e.committed()[0] == int64(1+len(fast)) }, "everything committed once the slow window is done")
	// The fast job's windows ran in order, one at a time (queue).
	var prevEnd time.Time
	for _, m := range fast {
		r := g.of(m.ID)
		if len(r) != 1 {
			t.Fatalf("window %s ran %d times", m.ID, len(r))
		}
		if r[0].start.Before(prevEnd) {
			t.Errorf("window %s started before the previous one of its job ended", m.ID)
		}
		prevEnd = r[0].end
	}
}

// Windows started in one turn share a runner (runner.go); a handler that
// blocks on it holds up no other window: the ones that ran before it are
// done while it still runs, and the ones queued behind it move to
// goroutines of their own, wherever it is in the runner's queue.
func TestResultsNotHeldBehindABlockedHandler(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocked int // of the 11 windows, in the order they are published and started
	}{{"middle", 5}, {"last", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, 30*time.Second)
			g := newGates()
			pol := defaultPolicy
			pol.Timeout = jobmsg.Duration(time.Minute) // the blocked handler runs until opened, past the wait below
			var ms []*jobmsg.Message
			for i := range 11 {
				ms = append(ms, window(fmt.Sprintf("j%02d", i), "g", 0, pol))
			}
			blocked := ms[tc.blocked]
			g.hold(blocked.ID)
			mux := handler.NewMux()
			mux.Handle("g", g)
			x := &execs{}
			w, _ := start(t, e.config("w1", mux, x))
			testenv.Eventually(t, 30*time.Second, func() bool { return len(w.Assigned()) == 1 }, "partition not assigned")
			e.publish(ms...)
			g.waitStarted(t, blocked.ID)
			testenv.Eventually(t, 10*time.Second, func() bool { return x.count(OutcomeDone) == len(ms)-1 }, "the other windows are done while %s runs (have %v)", blocked.ID, x.all())
			g.open(blocked.ID)
			testenv.Eventually(t, 10*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "every window done once the blocked one returns")
		})
	}
}

// Concurrency bounds the windows running at once across the worker.
func TestConcurrencyBoundsRunningWindows(t *testing.T) {
	e := newEnv(t, 2, 30*time.Second)
	g := newGates()
	var ms []*jobmsg.Message
	for i := range 12 {
		m := window(fmt.Sprintf("job-%d", i), "g", 0, defaultPolicy)
		g.hold(m.ID)
		ms = append(ms, m)
	}
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Concurrency = 3
	start(t, cfg)
	e.publish(ms...)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(g.started) == 3 }, "3 windows start")
	time.Sleep(300 * time.Millisecond) // nothing to wait on: proving that a 4th does NOT start
	if n := len(g.started); n != 3 {
		t.Fatalf("%d windows started with Concurrency 3", n)
	}
	for _, m := range ms {
		g.open(m.ID)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "all windows done")
	if most := g.mostAtOnce(); most != 3 {
		t.Errorf("at most %d windows ran at once, want exactly 3", most)
	}
}

// Free slots go to the partitions in turn: a partition with a long backlog
// does not starve another.
func TestSlotsAreSharedAcrossPartitions(t *testing.T) {
	e := newEnv(t, 2, 30*time.Second)
	mux := handler.NewMux()
	mux.HandleFunc("slow", func(ctx context.Context, _ *handler.Job) error {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	// 300 windows of 300 jobs, all keyed to partition 0, then 10 for
	// partition 1: with 2 slots, partition 1's windows must not wait for
	// partition 0's backlog (300 x 20ms / 2 = 3s).
	var backlog, other []*jobmsg.Message
	for i := 0; len(backlog) < 300 || len(other) < 10; i++ {
		m := window(fmt.Sprintf("job-%d", i), "slow", 0, defaultPolicy)
		switch p := e.partitionOf(m.Job); {
		case p == 0 && len(backlog) < 300:
			backlog = append(backlog, m)
		case p == 1 && len(other) < 10:
			other = append(other, m)
		}
	}
	e.publish(backlog...)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Concurrency = 2
	start(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) >= 20 }, "the backlog is being worked off")
	e.publish(other...)
	testenv.Eventually(t, 20*time.Second, func() bool {
		for _, m := range other {
			if len(x.of(m.ID)) == 0 {
				return false
			}
		}
		return true
	}, "partition 1's windows run")
	if left := len(backlog) + len(other) - x.count(OutcomeDone); left < 50 {
		t.Errorf("partition 1's windows ran only when %d of the backlog were left; want them interleaved with it", left)
	}
}

// Under skip, a window that arrives while the job's previous window runs is
// not run: it is settled as skipped, with its reason, and reported.
func TestOverlapSkip(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	pol := overlapPolicy(jobmsg.OverlapSkip)
	ms := []*jobmsg.Message{window("j", "g", 0, pol), window("j", "g", 1, pol), window("j", "g", 2, pol)}
	g.hold(ms[0].ID)
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(ms[0])
	g.waitStarted(t, ms[0].ID)
	e.publish(ms[1], ms[2])
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeSkipped) == 2 }, "two windows skipped")
	g.open(ms[0].ID)
	later := window("j", "g", 3, pol)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 1 }, "the running window completes")
	e.publish(later)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 2 }, "a window arriving after it runs")
	ctx := context.Background()
	for _, m := range ms[1:] {
		if n := len(g.of(m.ID)); n != 0 {
			t.Errorf("skipped window %s ran %d times", m.ID, n)
		}
		st, err := e.store.State(ctx, m.ID)
		if err != nil || st.Status != dedupe.StatusSkipped || st.LastError == "" {
			t.Errorf("skipped window %s: state %+v, %v; want skipped with a reason", m.ID, st, err)
		}
		es := x.of(m.ID)
		if len(es) != 1 || es[0].Outcome != OutcomeSkipped || es[0].Err == nil {
			t.Errorf("skipped window %s: executions %+v", m.ID, es)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 4 }, "all four committed")
}

// Under latest, while a window runs only the newest waiting one is kept:
// the older waiting ones are skipped, with their reason.
func TestOverlapLatest(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	pol := overlapPolicy(jobmsg.OverlapLatest)
	var ms []*jobmsg.Message
	for i := range 4 {
		ms = append(ms, window("j", "g", i, pol))
	}
	g.hold(ms[0].ID)
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(ms[0])
	g.waitStarted(t, ms[0].ID)
	e.publish(ms[1:]...)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeSkipped) == 2 }, "the two older waiting windows skipped")
	if n := len(g.of(ms[3].ID)); n != 0 {
		t.Fatalf("the newest window ran while the first one still runs")
	}
	g.open(ms[0].ID)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 2 }, "the first and the newest window done")
	if r0, r3 := g.of(ms[0].ID), g.of(ms[3].ID); len(r3) != 1 || r3[0].start.Before(r0[0].end) {
		t.Errorf("the newest window started before the running one ended")
	}
	for _, m := range ms[1:3] {
		if st, _ := e.store.State(context.Background(), m.ID); st.Status != dedupe.StatusSkipped {
			t.Errorf("window %s: status %q, want skipped", m.ID, st.Status)
		}
	}
}

// Under replace, a newer window cancels the running one with cause
// ErrSuperseded; the cancelled window is settled as superseded and not
// retried, and the newer one runs once it has returned.
func TestOverlapReplace(t *testing.T) {
	for _, ignores := range []bool{false, true} {
		t.Run(fmt.Sprintf("handler ignores cancellation=%v", ignores), func(t *testing.T) {
			e := newEnv(t, 1, 30*time.Second)
			g := newGates()
			pol := overlapPolicy(jobmsg.OverlapReplace)
			old, newer := window("j", "g", 0, pol), window("j", "g", 1, pol)
			g.hold(old.ID)
			g.ignore[old.ID] = ignores
			t.Cleanup(func() {
				if ignores {
					g.open(old.ID) // lets the abandoned goroutine end before goleak looks
				}
			})
			mux := handler.NewMux()
			mux.Handle("g", g)
			x := &execs{}
			cfg := e.config("w1", mux, x)
			cfg.Grace = 300 * time.Millisecond
			start(t, cfg)
			e.publish(old)
			g.waitStarted(t, old.ID)
			e.publish(newer)
			testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 1 && len(x.of(newer.ID)) == 1 }, "the newer window runs")
			es := x.of(old.ID)
			if got := outcomes(es); !slices.Equal(got, []string{OutcomeSuperseded}) {
				t.Fatalf("replaced window: outcomes %v, want [superseded]", got)
			}
			if !ignores {
				r := g.of(old.ID)
				if len(r) != 1 || !errors.Is(r[0].cause, ErrSuperseded) {
					t.Errorf("replaced window's runs %+v; want one, cancelled with cause ErrSuperseded", r)
				}
				if rn := g.of(newer.ID); rn[0].start.Before(r[0].end) {
					t.Errorf("the newer window started before the replaced one returned")
				}
			}
			st, err := e.store.State(context.Background(), old.ID)
			if err != nil || st.Status != dedupe.StatusSuperseded || st.LastError == "" {
				t.Errorf("replaced window: state %+v, %v; want superseded with a reason", st, err)
			}
			if n := len(g.of(old.ID)); n != 1 {
				t.Errorf("replaced window ran %d times, want once (not retried)", n)
			}
			testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 2 }, "both committed")
		})
	}
}

// Under allow, a job's windows run at once, each exactly once.
func TestOverlapAllow(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	pol := overlapPolicy(jobmsg.OverlapAllow)
	var ms []*jobmsg.Message
	for i := range 5 {
		m := window("j", "g", i, pol)
		g.hold(m.ID)
		ms = append(ms, m)
	}
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(ms...)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(g.started) == 5 }, "all five windows of the job run at once")
	for _, m := range ms {
		g.open(m.ID)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 5 }, "all five done")
	for _, m := range ms {
		if n := len(g.of(m.ID)); n != 1 {
			t.Errorf("window %s ran %d times", m.ID, n)
		}
	}
}

// A failing window backs off in its own lane, and a window waiting for
// another worker's live claim waits in its own lane: other jobs on the
// partition keep running meanwhile.
func TestRetriesAndBusyWaitsBlockOnlyTheirJob(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	ctx := context.Background()
	busy := window("busy", "ok", 0, defaultPolicy)
	other, err := e.store.Claim(ctx, busy.ID, "other-worker")
	if err != nil || other.Outcome != dedupe.Claimed {
		t.Fatalf("claim by other-worker: %+v, %v", other, err)
	}
	slowRetry := defaultPolicy
	slowRetry.Backoff, slowRetry.MaxBackoff = jobmsg.Duration(time.Hour), jobmsg.Duration(time.Hour)
	failing := window("failing", "fail", 0, slowRetry)
	mux := handler.NewMux()
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })
	mux.HandleFunc("fail", func(context.Context, *handler.Job) error { return errors.New("down") })
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(busy, failing)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(failing.ID)) == 1 }, "the failing window's first attempt")
	var fine []*jobmsg.Message
	for i := range 10 {
		fine = append(fine, window("fine", "ok", i, defaultPolicy))
	}
	e.publish(fine...)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == len(fine) }, "the other job's windows run while one window backs off and one waits")
	if es := x.of(busy.ID); len(es) != 0 {
		t.Errorf("the busy window has executions %+v while another worker holds it", es)
	}
	if got := e.committed()[0]; got != 0 {
		t.Errorf("committed offset %d past an unsettled window", got)
	}
}

// The claims of all of a partition's running windows are extended in one
// store call per interval, not one call per window.
func TestClaimsOfRunningWindowsAreExtendedTogether(t *testing.T) {
	e := newEnv(t, 1, 3*time.Second)
	g := newGates()
	var ms []*jobmsg.Message
	for i := range 50 {
		m := window(fmt.Sprintf("job-%d", i), "g", 0, defaultPolicy)
		g.hold(m.ID)
		ms = append(ms, m)
	}
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.ClaimExtendInterval = 100 * time.Millisecond
	start(t, cfg)
	e.publish(ms...)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(g.started) == len(ms) }, "all 50 windows run")
	calls0 := e.store.extendCalls.Load()
	t0 := time.Now()
	time.Sleep(time.Second) // the period over which extend calls are counted
	calls, took := e.store.extendCalls.Load()-calls0, time.Since(t0)
	if max := int64(took/cfg.ClaimExtendInterval) + 2; calls > max || calls == 0 {
		t.Errorf("%d extend calls in %v for 50 running windows; want one per %v interval (at most %d)", calls, took.Round(time.Millisecond), cfg.ClaimExtendInterval, max)
	}
	// Each running claim was proven within the last interval or two.
	for _, m := range ms {
		r := g.of(m.ID)
		if age := time.Since(e.store.proof(m.ID, r[0].token)); age > 3*cfg.ClaimExtendInterval {
			t.Errorf("claim of %s last proven %v ago", m.ID, age.Round(time.Millisecond))
		}
	}
	for _, m := range ms {
		g.open(m.ID)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "all done")
}

// An online seek (kjobctl replay through the control topic) while windows
// are in flight: the running windows get Grace to finish and are recorded
// done, the records from the target on are delivered again, and the done
// ones are skipped.
func TestSeekWithWindowsInFlight(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	var ms []*jobmsg.Message
	for i := range 6 {
		ms = append(ms, window(fmt.Sprintf("job-%d", i), "g", 0, defaultPolicy))
	}
	g.hold(ms[4].ID)
	g.hold(ms[5].ID)
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	w, _ := start(t, e.config("w1", mux, x))
	e.publish(ms...)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 4 && len(g.started) == 6 }, "4 windows done, 2 running")
	seeked := make(chan error, 1)
	go func() { seeked <- w.Seek(context.Background(), 0, 2) }()
	time.Sleep(100 * time.Millisecond) // the seek waits for the in-flight windows: let it start waiting
	g.open(ms[4].ID)
	g.open(ms[5].ID)
	if err := testenv.Recv(t, seeked, 20*time.Second, "the seek returns"); err != nil {
		t.Fatalf("seek: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeSkippedDone) == 4 }, "records 2..5 delivered again and skipped as done")
	for _, m := range ms {
		if n := len(g.of(m.ID)); n != 1 {
			t.Errorf("window %s ran %d times, want once", m.ID, n)
		}
	}
	if got := x.count(OutcomeDone); got != 6 {
		t.Errorf("%d windows done, want 6 (the two in flight finished within the grace)", got)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 6 }, "all committed after the replay")
}

// The completion of a window claims the next window of its queue lane in
// the same store call, on the same slot; if the completion is refused
// (another attempt took the window over), the next window is not claimed:
// it waits until the first is settled, then runs as attempt 1.
func TestRefusedCompletionClaimsNothing(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	ctx := context.Background()
	first, second := window("j", "h", 0, defaultPolicy), window("j", "h", 1, defaultPolicy)
	var mu sync.Mutex
	var order []string
	var other dedupe.Claim
	mux := handler.NewMux()
	mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
		mu.Lock()
		order = append(order, fmt.Sprintf("%s/%d", j.ID(), j.Attempt()))
		n := len(order)
		mu.Unlock()
		if n == 1 {
			// Taken over while it runs (no extend happens in between):
			// its completion is refused.
			if err := e.store.Forget(ctx, j.ID()); err != nil {
				return err
			}
			var err error
			if other, err = e.store.Claim(ctx, j.ID(), "other-worker"); err != nil || other.Outcome != dedupe.Claimed {
				return fmt.Errorf("takeover: %+v %v", other, err)
			}
		}
		return nil
	})
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.ClaimExtendInterval = 5 * time.Second
	start(t, cfg)
	e.publish(first, second)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(first.ID)) == 1 }, "the first window's completion is refused")
	if got := x.of(first.ID)[0].Outcome; got != OutcomeFenced {
		t.Fatalf("first window: %s, want fenced", got)
	}
	if n := len(x.of(second.ID)); n != 0 {
		t.Fatalf("the second window settled (%v) before the first", x.of(second.ID))
	}
	if st, err := e.store.State(ctx, second.ID); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("the second window after the first's refused completion: %+v %v; want never claimed", st, err)
	}
	if err := e.store.Release(ctx, first.ID, other.Token, "other worker gave up"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 2 }, "both windows done")
	mu.Lock()
	defer mu.Unlock()
	want := []string{first.ID + "/1", first.ID + "/2", second.ID + "/1"}
	if !slices.Equal(order, want) {
		t.Errorf("runs %v, want %v (the second after the first's re-run, as attempt 1)", order, want)
	}
}

// Every settlement is recorded in its job's run history (with the next
// settle call, or on its own within an extend interval): a retried
// window's failed attempt and its success, and a skipped window; a
// redelivered window skipped as done is not a settlement and is not
// recorded. Each run carries its window's schedule version (0 when the
// record has none).
func TestSettlementsAreRecordedInTheRunHistory(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	var fails sync.Map
	mux := handler.NewMux()
	mux.Handle("g", g)
	mux.HandleFunc("flaky", func(_ context.Context, j *handler.Job) error {
		if _, failed := fails.LoadOrStore(j.ID(), true); !failed {
			return errors.New("first attempt fails")
		}
		return nil
	})
	skipPol := overlapPolicy(jobmsg.OverlapSkip)
	held, skipped := window("skipper", "g", 0, skipPol), window("skipper", "g", 1, skipPol)
	g.hold(held.ID)
	flaky := window("flaky", "flaky", 0, defaultPolicy)
	flaky.ScheduleVersion, skipped.ScheduleVersion = 7, 3
	x := &execs{}
	start(t, e.config("w1", mux, x))
	e.publish(held, flaky)
	g.waitStarted(t, held.ID)
	e.publish(skipped)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeSkipped) == 1 && x.count(OutcomeDone) == 1 }, "the skip and the retried window settle")
	g.open(held.ID)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 2 }, "the held window completes")

	ctx := context.Background()
	runs := func(job string) []dedupe.Run {
		rs, err := e.store.Runs(ctx, job, dedupe.RunQuery{})
		if err != nil {
			t.Fatalf("runs of %s: %v", job, err)
		}
		return rs
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(runs("flaky")) == 2 && len(runs("skipper")) == 2 }, "the history holds every settlement")
	fr := runs("flaky") // newest first; the test's clock is frozen, so by token
	slices.SortFunc(fr, func(a, b dedupe.Run) int { return int(b.Token - a.Token) })
	if fr[0].Outcome != dedupe.RunDone || fr[1].Outcome != dedupe.RunFailed || fr[0].Attempt != 2 || fr[1].Attempt != 1 ||
		fr[0].Token <= fr[1].Token || fr[1].Error != "first attempt fails" || fr[0].Worker != "w1" || fr[0].Trigger != "schedule" ||
		fr[0].ScheduleVersion != 7 || fr[1].ScheduleVersion != 7 {
		t.Errorf("flaky's history %+v; want done (attempt 2) after failed (attempt 1, its error), higher token, worker w1, schedule version 7", fr)
	}
	sr := runs("skipper")
	outcomes := []string{sr[0].Outcome, sr[1].Outcome}
	slices.Sort(outcomes)
	if !slices.Equal(outcomes, []string{dedupe.RunDone, dedupe.RunSkipped}) {
		t.Errorf("skipper's history %+v; want one done and one skipped", sr)
	}
	for _, r := range sr {
		if r.Outcome == dedupe.RunSkipped && (r.WindowID != skipped.ID || r.Error == "" || r.Attempt != 0 || r.ScheduleVersion != 3) {
			t.Errorf("skipped run %+v; want window %s, its reason, no attempt, schedule version 3", r, skipped.ID)
		}
		if r.Outcome == dedupe.RunDone && r.ScheduleVersion != 0 {
			t.Errorf("run %+v of a record without a schedule version; want version 0", r)
		}
	}
}
