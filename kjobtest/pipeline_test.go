package kjobtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

// go-redis retries a failed dial on a goroutine of its own that sleeps
// between tries and ends with the client.
var leakOpts = []goleak.Option{goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakOpts...) }

type reportArgs struct {
	Team    string `json:"team"`
	Retries int    `json:"retries"`
}

// calls counts a handler's calls per window and fails the first ones
// on request.
type calls struct {
	mu   sync.Mutex
	n    map[string]int
	args map[string][]reportArgs
}

func newCalls() *calls { return &calls{n: map[string]int{}, args: map[string][]reportArgs{}} }

func (c *calls) add(id string, a reportArgs) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id]++
	c.args[id] = append(c.args[id], a)
	return c.n[id]
}

func (c *calls) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

var errFlaky = errors.New("mail server busy")

// One pipeline, one job per subtest: a window runs once, a failing one is
// retried with a higher token, a bad payload is dead-lettered at once with
// the field in the reason, and overlap policies apply.
func TestPipeline(t *testing.T) {
	c := newCalls()
	release := make(chan struct{})
	var versions sync.Map // window id -> the ScheduleVersion its handler saw
	mux := kjob.NewMux()
	typed := func(ctx context.Context, j *kjob.Job, a reportArgs) error {
		versions.Store(j.ID(), j.ScheduleVersion())
		n := c.add(j.ID(), a)
		switch j.Name() {
		case "flaky":
			if n == 1 {
				return errFlaky
			}
		case "always-fails":
			return errFlaky
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case "panics":
			panic("boom")
		}
		return nil
	}
	mux.Handle("report", kjob.Typed(typed))
	p := kjobtest.StartPipeline(t, mux, kjobtest.PipelineOptions{})

	t.Run("runs once", func(t *testing.T) {
		start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		w := kjobtest.Window{Job: "once", Handler: "report", Start: start, Payload: reportArgs{Team: "billing", Retries: 2}}
		id := p.Publish(t, w)
		if id != "once@2026-11-22T10:00:00Z" {
			t.Fatalf("id = %q", id)
		}
		res := p.Wait(t, id)
		if res.Outcome != kjobtest.OutcomeDone || res.Err != nil || len(res.Attempts) != 1 || c.of(id) != 1 {
			t.Fatalf("result %+v, handler called %d times; want done after 1 attempt", res, c.of(id))
		}
		if a := res.Attempts[0]; a.Attempt != 1 || a.FencingToken < 1 || a.Err != nil || a.Finished.Before(a.Started) {
			t.Fatalf("attempt = %+v", a)
		}
		if res.Stored.Status != "done" || res.Stored.Attempts != 1 || res.Stored.FencingToken != res.Attempts[0].FencingToken {
			t.Fatalf("store state = %+v", res.Stored)
		}
		if got := c.args[id][0]; got != (reportArgs{Team: "billing", Retries: 2}) {
			t.Fatalf("handler got %+v", got)
		}

		// The same window again: the worker skips it as done.
		if again := p.Publish(t, w); again != id {
			t.Fatalf("second publish id = %q, want %q", again, id)
		}
		res = p.Wait(t, id)
		if res.Outcome != kjobtest.OutcomeSkippedDone || c.of(id) != 1 || len(res.Attempts) != 1 {
			t.Fatalf("second record: %s, handler called %d times; want skipped-done and 1 call", res.Outcome, c.of(id))
		}

		// A new window of the job (default Start: now) runs.
		id2 := p.Publish(t, kjobtest.Window{Job: "once", Handler: "report"})
		id3 := p.Publish(t, kjobtest.Window{Job: "once", Handler: "report"})
		if id2 == id || id3 == id2 {
			t.Fatalf("default starts gave ids %q, %q after %q; want new windows", id2, id3, id)
		}
		for _, id := range []string{id2, id3} {
			if res := p.Wait(t, id); res.Outcome != kjobtest.OutcomeDone || c.of(id) != 1 {
				t.Fatalf("%s: %s after %d calls", id, res.Outcome, c.of(id))
			}
		}
	})

	t.Run("retried with a higher token", func(t *testing.T) {
		id := p.Publish(t, kjobtest.Window{Job: "flaky", Handler: "report", Payload: `{"team":"ops"}`})
		res := p.Wait(t, id)
		if res.Outcome != kjobtest.OutcomeDone || len(res.Attempts) != 2 {
			t.Fatalf("result %+v; want done after 2 attempts", res)
		}
		a1, a2 := res.Attempts[0], res.Attempts[1]
		if a1.Attempt != 1 || !errors.Is(a1.Err, errFlaky) || a2.Attempt != 2 || a2.Err != nil {
			t.Fatalf("attempts = %+v", res.Attempts)
		}
		if a2.FencingToken <= a1.FencingToken {
			t.Fatalf("tokens %d then %d; want the retry's higher", a1.FencingToken, a2.FencingToken)
		}
		if st := res.Stored; st.Status != "done" || st.Attempts != 2 || st.FencingToken != a2.FencingToken || st.LastError != errFlaky.Error() {
			t.Fatalf("store state = %+v", st)
		}
		if fmt.Sprint(res.Steps) != "[failed done]" {
			t.Fatalf("steps = %v", res.Steps)
		}
	})

	t.Run("bad payload dead-lettered at once", func(t *testing.T) {
		id := p.Publish(t, kjobtest.Window{Job: "bad", Handler: "report", Payload: `{"team":"ops","retries":"three"}`, MaxAttempts: 5})
		res := p.Wait(t, id)
		const reason = `payload.retries: "three": want int`
		if res.Outcome != kjobtest.OutcomeDeadLettered || len(res.Attempts) != 1 || c.of(id) != 0 {
			t.Fatalf("result %+v, typed function called %d times; want dead-lettered after 1 attempt, function never called", res, c.of(id))
		}
		var pe *kjob.PayloadError
		if !errors.As(res.Err, &pe) || pe.Field != "payload.retries" || res.Err.Error() != reason {
			t.Fatalf("err = %v", res.Err)
		}
		if res.DeadLetter == nil || res.DeadLetter.Reason != reason || res.DeadLetter.Attempts != 1 {
			t.Fatalf("dead letter = %+v; want reason %q after 1 attempt", res.DeadLetter, reason)
		}
		if res.DeadLetter.WindowID != id {
			t.Fatalf("dead letter's window id = %q, want %q", res.DeadLetter.WindowID, id)
		}
		if res.Stored.Status != "dead" {
			t.Fatalf("store state = %+v", res.Stored)
		}
	})

	t.Run("attempts used up", func(t *testing.T) {
		id := p.Publish(t, kjobtest.Window{Job: "always-fails", Handler: "report", MaxAttempts: 2})
		res := p.Wait(t, id)
		if res.Outcome != kjobtest.OutcomeDeadLettered || len(res.Attempts) != 2 || !errors.Is(res.Err, errFlaky) ||
			res.DeadLetter == nil || res.DeadLetter.Reason != errFlaky.Error() || res.DeadLetter.Attempts != 2 {
			t.Fatalf("result %+v; want dead-lettered after 2 attempts with reason %q", res, errFlaky)
		}
	})

	t.Run("panic", func(t *testing.T) {
		id := p.Publish(t, kjobtest.Window{Job: "panics", Handler: "report", MaxAttempts: 1})
		res := p.Wait(t, id)
		var pe *kjob.PanicError
		if res.Outcome != kjobtest.OutcomeDeadLettered || len(res.Attempts) != 1 || !errors.As(res.Attempts[0].Err, &pe) || pe.Value != "boom" {
			t.Fatalf("result %+v; want dead-lettered, the attempt's error a *kjob.PanicError", res)
		}
	})

	t.Run("overlap policy", func(t *testing.T) {
		// While the first window of "slow" runs, a second one with
		// overlap skip is settled as skipped without running.
		first := p.Publish(t, kjobtest.Window{Job: "slow", Handler: "report", Overlap: "skip"})
		waitFor(t, func() bool { return c.of(first) == 1 }, "the first window of slow to start")
		second := p.Publish(t, kjobtest.Window{Job: "slow", Handler: "report", Overlap: "skip"})
		res := p.Wait(t, second)
		if res.Outcome != kjobtest.OutcomeSkipped || c.of(second) != 0 || res.Stored.Status != "skipped" ||
			res.Err == nil || !strings.Contains(res.Err.Error(), first) {
			t.Fatalf("second window: %+v, called %d times; want skipped because of %s", res, c.of(second), first)
		}
		close(release)
		if res := p.Wait(t, first); res.Outcome != kjobtest.OutcomeDone {
			t.Fatalf("first window: %s", res.Outcome)
		}
	})

	// A handler sees the schedule version of the record it runs, through
	// the worker's decoding; a record without one reads as 0.
	t.Run("schedule version", func(t *testing.T) {
		v5 := p.Publish(t, kjobtest.Window{Job: "versioned", Handler: "report", ScheduleVersion: 5})
		legacy := p.Publish(t, kjobtest.Window{Job: "versioned", Handler: "report"})
		for id, want := range map[string]int64{v5: 5, legacy: 0} {
			if res := p.Wait(t, id); res.Outcome != kjobtest.OutcomeDone {
				t.Fatalf("%s: %s", id, res.Outcome)
			}
			if got, ok := versions.Load(id); !ok || got.(int64) != want {
				t.Errorf("handler of %s saw schedule version %v (ran: %v), want %d", id, got, ok, want)
			}
		}
	})

	t.Run("attempts so far", func(t *testing.T) {
		id := p.Publish(t, kjobtest.Window{Job: "flaky", Handler: "report", Start: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)})
		p.Wait(t, id)
		if got := p.Attempts(id); len(got) != 2 {
			t.Fatalf("Attempts = %+v", got)
		}
		if got := p.Attempts("flaky@never"); len(got) != 0 {
			t.Fatalf("Attempts of an unknown window = %+v", got)
		}
	})
}

// waitFor polls cond until it holds, failing after 20s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Mistakes in a test fail it with a message naming the field: an invalid
// window, an id that was never published, a Wait that times out. A
// Standalone turns the failure into a panic we can inspect.
func TestPipelineMisuse(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	mux := kjob.NewMux()
	mux.HandleFunc("block", func(ctx context.Context, j *kjob.Job) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil
	})
	tb := kjobtest.NewStandalone()
	defer tb.Close()
	p := kjobtest.StartPipeline(tb, mux, kjobtest.PipelineOptions{WaitTimeout: 500 * time.Millisecond, Partitions: 1})

	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"payload not an object", func() { p.Publish(tb, kjobtest.Window{Job: "block", Payload: `[1]`}) },
			`kjobtest: Publish: jobmsg: payload: "[1]": must be a JSON object`},
		{"end before start", func() {
			p.Publish(tb, kjobtest.Window{Job: "block", Start: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		}, `kjobtest: Publish: jobmsg: window.end: "2026-01-01T00:00:00Z": must be after window.start 2026-01-01T01:00:00Z`},
		{"unpublished id", func() { p.Wait(tb, "block@2026-01-01T00:00:00Z") },
			`kjobtest: Wait: window "block@2026-01-01T00:00:00Z" was not published by this pipeline; pass the id Publish returned`},
		{"wait times out", func() { p.Wait(tb, p.Publish(tb, kjobtest.Window{Job: "block"})) },
			`not settled within 500ms (PipelineOptions.WaitTimeout); so far: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := catch(tc.f)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("failure = %q, want it to contain %q", msg, tc.want)
			}
		})
	}
	if !tb.Failed() {
		t.Fatal("Standalone.Failed() = false after Fatalf")
	}
}

// catch runs f and returns what it panicked with.
func catch(f func()) (msg string) {
	defer func() {
		v := recover()
		s, _ := v.(string)
		msg = s
	}()
	f()
	return "(no panic)"
}

// When the test ends, nothing the pipeline started is left running.
func TestPipelineCleansUp(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Run("pipeline", func(t *testing.T) {
		mux := kjob.NewMux()
		mux.HandleFunc("noop", func(context.Context, *kjob.Job) error { return nil })
		p := kjobtest.StartPipeline(t, mux, kjobtest.PipelineOptions{})
		if res := p.Wait(t, p.Publish(t, kjobtest.Window{Job: "noop"})); res.Outcome != kjobtest.OutcomeDone {
			t.Fatalf("outcome %s", res.Outcome)
		}
	})
	goleak.VerifyNone(t, append(leakOpts, before)...)

	// Close may also be called early, and twice.
	t.Run("close early", func(t *testing.T) {
		p := kjobtest.StartPipeline(t, kjob.NewMux(), kjobtest.PipelineOptions{})
		p.Close()
		p.Close()
	})
	goleak.VerifyNone(t, append(leakOpts, before)...)
}

func TestStandalone(t *testing.T) {
	s := kjobtest.NewStandalone()
	var order []int
	s.Cleanup(func() { order = append(order, 1) })
	s.Cleanup(func() {
		order = append(order, 2)
		s.Cleanup(func() { order = append(order, 3) }) // registered while closing: runs too
	})
	if s.Failed() {
		t.Fatal("Failed before any error")
	}
	s.Close()
	s.Close()
	if len(order) != 3 || order[0] != 2 || order[1] != 3 || order[2] != 1 {
		t.Fatalf("cleanup order = %v, want [2 3 1]", order)
	}
	ran := false
	s.Cleanup(func() { ran = true })
	if !ran {
		t.Fatal("Cleanup after Close did not run at once")
	}
	if msg := catch(func() { s.Fatalf("bad %d", 7) }); msg != "bad 7" || !s.Failed() {
		t.Fatalf("Fatalf panicked with %q, Failed %v", msg, s.Failed())
	}
}

func TestStartPipelineOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    kjob.Handler
		o    kjobtest.PipelineOptions
		want string
	}{
		{"no handler", nil, kjobtest.PipelineOptions{},
			"kjobtest: StartPipeline: handler is nil; pass the handler under test, e.g. a *kjob.Mux"},
		{"partitions", kjob.NewMux(), kjobtest.PipelineOptions{Partitions: -1},
			"kjobtest: StartPipeline: PipelineOptions.Partitions = -1 is negative; set a positive count, or 0 for 4"},
		{"grace", kjob.NewMux(), kjobtest.PipelineOptions{Grace: -time.Second},
			"kjobtest: StartPipeline: PipelineOptions.Grace = -1s is negative; set a positive duration, or 0 for 2s"},
		{"wait timeout", kjob.NewMux(), kjobtest.PipelineOptions{WaitTimeout: -time.Second},
			"kjobtest: StartPipeline: PipelineOptions.WaitTimeout = -1s is negative; set a positive duration, or 0 for 30s"},
		{"concurrency", kjob.NewMux(), kjobtest.PipelineOptions{Concurrency: -3},
			"kjobtest: StartPipeline: PipelineOptions.Concurrency = -3 is negative; set a positive count, or 0 for the worker's default 100"},
		{"claim ttl too short", kjob.NewMux(), kjobtest.PipelineOptions{ClaimTTL: time.Millisecond},
			"kjobtest: PipelineOptions.ClaimTTL: dedupe: Config.ClaimTTL = 1ms is below the minimum 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := kjobtest.NewStandalone()
			defer tb.Close()
			msg := catch(func() { kjobtest.StartPipeline(tb, tc.h, tc.o) })
			if !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("failure = %q\nwant      %q...", msg, tc.want)
			}
		})
	}
}

// A handler that ignores its cancelled context is abandoned after the
// grace, and each abandoned call is counted in Result.Attempts (marked
// Abandoned), as it counts towards max_attempts. Before, Attempts was
// empty for a window whose every call was abandoned.
func TestAbandonedCallsAreAttempts(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // the abandoned calls return once the test is over
	mux := kjob.NewMux()
	mux.HandleFunc("stuck", func(context.Context, *kjob.Job) error { <-release; return nil })
	p := kjobtest.StartPipeline(t, mux, kjobtest.PipelineOptions{Grace: 200 * time.Millisecond})
	id := p.Publish(t, kjobtest.Window{Job: "stuck", Timeout: 200 * time.Millisecond, MaxAttempts: 2, Backoff: 10 * time.Millisecond})
	res := p.Wait(t, id)
	if res.Outcome != kjobtest.OutcomeDeadLettered || len(res.Attempts) != 2 {
		t.Fatalf("outcome %s after %d attempts (%+v); want dead-lettered after 2 abandoned attempts", res.Outcome, len(res.Attempts), res.Attempts)
	}
	for i, a := range res.Attempts {
		if !a.Abandoned || a.Attempt != i+1 || !a.Finished.IsZero() || a.Err == nil {
			t.Errorf("attempt %d: %+v; want abandoned, attempt %d, not finished, with the worker's reason", i+1, a, i+1)
		}
	}
}

// The pipeline runs kjob.NewWorker's Worker, but every window goes to the
// handler under test, whatever its handler name: a built-in name (http,
// sleep) does not reach the built-in handler, and a name no Mux would
// route still runs.
func TestPipelineRoutesEveryWindowToTheHandler(t *testing.T) {
	var mu sync.Mutex
	var got []string
	h := kjob.HandlerFunc(func(_ context.Context, j *kjob.Job) error {
		mu.Lock()
		got = append(got, j.HandlerName())
		mu.Unlock()
		return nil
	})
	p := kjobtest.StartPipeline(t, h, kjobtest.PipelineOptions{})
	for _, name := range []string{"http", "sleep", "not-registered"} {
		res := p.Wait(t, p.Publish(t, kjobtest.Window{Job: "j-" + name, Handler: name}))
		if res.Outcome != kjobtest.OutcomeDone || len(res.Attempts) != 1 {
			t.Fatalf("handler %s: %s after %d attempts: %v", name, res.Outcome, len(res.Attempts), res.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"http", "sleep", "not-registered"}; !slices.Equal(got, want) {
		t.Fatalf("the handler under test saw %v, want %v", got, want)
	}
}
