package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Records with missing fields or an oversized value are dead-lettered with
// their reason and never block the partition: the valid window behind them
// runs.
func TestPoisonRecordsDoNotBlock(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	mux := handler.NewMux()
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })

	noJob := e.record(window("nojob", "ok", 0, defaultPolicy))
	noJob.Value = bytes.Replace(noJob.Value, []byte(`"job":"nojob",`), nil, 1)
	noHandler := e.record(window("nohandler", "ok", 0, defaultPolicy))
	noHandler.Value = bytes.Replace(noHandler.Value, []byte(`"handler":"ok",`), nil, 1)
	huge := e.record(window("huge", "ok", 0, defaultPolicy))
	huge.Value = append(bytes.TrimSuffix(huge.Value, []byte("}")), []byte(`,"pad":"`+strings.Repeat("x", jobmsg.MaxValueBytes)+`"}`)...)
	ok := window("fine", "ok", 0, defaultPolicy)
	e.produce(noJob, noHandler, huge, e.record(ok))

	x := &execs{}
	_, stop := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(ok.ID)) == 1 }, "the valid window after the poison records runs")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 4 }, "all four records committed")
	stop()

	dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
	if len(dlq) != 3 {
		t.Fatalf("dead-letter topic has %d records, want 3", len(dlq))
	}
	byOffset := lettersByOffset(t, dlq)
	for i, want := range []string{"job: required", "handler: required", "exceeds the limit"} {
		if reason, _ := header(byOffset[int64(i)], HeaderDLQReason); !strings.Contains(reason, want) {
			t.Errorf("dead letter of offset %d: reason %q, want it to mention %q", i, reason, want)
		}
	}
}

// A dead-lettered window is settled in the store: a redelivered record of it
// (the worker died before committing past it, or the producer re-sent it) is
// skipped, not run and dead-lettered again.
func TestDeadLetteredWindowIsNotRunAgain(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	var calls atomic.Int64
	mux := handler.NewMux()
	mux.HandleFunc("perm", func(context.Context, *handler.Job) error {
		calls.Add(1)
		return fmt.Errorf("bad payload: %w", handler.ErrPermanent)
	})
	m := window("perm", "perm", 0, defaultPolicy)
	e.publish(m, m) // the second record is the redelivery
	x := &execs{}
	_, stop := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(m.ID)) == 2 }, "both records settled")
	stop()
	if got, want := outcomes(x.of(m.ID)), []string{OutcomeDeadLettered, OutcomeSkippedDone}; !slices.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if dlq := testenv.ReadCommitted(t, e.brokers, testDLQ); len(dlq) != 1 {
		t.Errorf("dead-letter topic has %d records, want 1", len(dlq))
	}
	st, err := e.store.State(context.Background(), m.ID)
	if err != nil || st.Status != dedupe.StatusDeadLettered {
		t.Errorf("state = %+v, %v; want dead-lettered", st, err)
	}
}

// The job timeout cancels the handler's context; a handler that ignores it
// is abandoned after Grace, its claim is not marked done, and the window is
// retried with a higher token on the same partition, which does not stall.
func TestTimeoutCancelsThenAbandonedAttemptIsRetried(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) }) // lets the abandoned goroutine end before goleak looks
	var calls atomic.Int64
	cause := make(chan error, 1)
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			cause <- ctx.Err()
			<-unblock // ignores the cancellation
		}
		return nil
	})
	pol := defaultPolicy
	pol.Timeout = jobmsg.Duration(200 * time.Millisecond)
	pol.MaxAttempts = 2
	m, next := window("job", "h", 0, pol), window("job", "h", 1, pol)
	e.publish(m, next)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Grace = 300 * time.Millisecond
	start(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(next.ID)) == 1 }, "the next window runs")
	select {
	case err := <-cause:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("handler context ended with %v, want the job timeout (deadline exceeded)", err)
		}
	default:
		t.Fatal("the first attempt's context was never cancelled")
	}
	es := x.of(m.ID)
	if got, want := outcomes(es), []string{OutcomeAbandoned, OutcomeDone}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if es[1].Token <= es[0].Token || es[1].Attempt != 2 {
		t.Errorf("retry has token %d attempt %d; want a token above %d and attempt 2", es[1].Token, es[1].Attempt, es[0].Token)
	}
	st, err := e.store.State(context.Background(), m.ID)
	if err != nil || st.Status != dedupe.StatusDone || st.Token != es[1].Token {
		t.Errorf("state = %+v, %v; want done by the retry's token %d, not the abandoned one", st, err, es[1].Token)
	}
}

// TestTimeoutContextIsWithTimeouts: the handler's context carries its
// policy's timeout as context.WithTimeout would (attempts share one
// deadline context per millisecond): Deadline() reports it, and once it
// passes Err() and the cause are context.DeadlineExceeded, in the handler's
// context and in one the handler derives from it.
func TestTimeoutContextIsWithTimeouts(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	const timeout = 300 * time.Millisecond
	type seen struct {
		start, deadline      time.Time
		hasDeadline          bool
		err, cause, childErr error
	}
	got := make(chan seen, 2)
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		s := seen{start: time.Now()}
		s.deadline, s.hasDeadline = ctx.Deadline()
		child, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		<-child.Done()
		s.err, s.cause, s.childErr = ctx.Err(), context.Cause(ctx), child.Err()
		got <- s
		return nil
	})
	pol := defaultPolicy
	pol.Timeout = jobmsg.Duration(timeout)
	pol.MaxAttempts = 1
	e.publish(window("a", "h", 0, pol), window("b", "h", 0, pol))
	start(t, e.config("w1", mux, &execs{}))
	for range 2 {
		var s seen
		select {
		case s = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no handler saw its timeout within 20s")
		}
		if !s.hasDeadline {
			t.Fatal("the handler's context has no deadline")
		}
		if d := s.deadline.Sub(s.start); d > timeout || d < timeout-100*time.Millisecond {
			t.Errorf("deadline %v after the handler started, want at most the timeout %v and not much less", d, timeout)
		}
		for what, err := range map[string]error{"Err()": s.err, "Cause": s.cause, "a derived context's Err()": s.childErr} {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s = %v after the timeout, want context.DeadlineExceeded", what, err)
			}
		}
	}
}

// TestDeadlinesAreSharedAndReleased: attempts whose timeouts end in the
// same millisecond share one deadline context, which the last of them
// releases.
func TestDeadlinesAreSharedAndReleased(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &loop{ctx: ctx, deadlines: map[int64]*deadline{}}
	at := mono() + int64(time.Hour)
	a, b := l.deadlineFor(at), l.deadlineFor(at-at%int64(time.Millisecond))
	other := l.deadlineFor(at + int64(time.Millisecond))
	if a != b || a == other || len(l.deadlines) != 2 {
		t.Fatalf("deadlines %p %p %p (%d held), want the first two shared and the third its own", a, b, other, len(l.deadlines))
	}
	if dl, _ := a.ctx.Deadline(); dl.Sub(monoBase) != time.Duration(a.at) || a.at%int64(time.Millisecond) != 0 || a.at > at {
		t.Errorf("deadline at %v (mono %d), want mono %d rounded down to the millisecond", dl, a.at, at)
	}
	l.releaseDeadline(a)
	if a.ctx.Err() != nil {
		t.Fatal("released by one of two attempts, the shared deadline ended")
	}
	l.releaseDeadline(b)
	l.releaseDeadline(other)
	if a.ctx.Err() == nil || other.ctx.Err() == nil || len(l.deadlines) != 0 {
		t.Errorf("after every attempt ended: errs %v, %v; %d held; want both released", a.ctx.Err(), other.ctx.Err(), len(l.deadlines))
	}
}
