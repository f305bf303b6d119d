package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// blocker is a handler whose first run of window block blocks until its
// context is cancelled (reporting the cause); every other run succeeds.
type blocker struct {
	block     string
	started   chan struct{}
	cancelled chan error

	mu     sync.Mutex
	runs   map[string][]int64 // tokens of each run, per window
	before map[string]int     // runs of each window that started while the flag was set
	down   bool               // set while Redis is down
}

func newBlocker(block string) *blocker {
	return &blocker{block: block, started: make(chan struct{}), cancelled: make(chan error, 1), runs: map[string][]int64{}, before: map[string]int{}}
}

func (b *blocker) HandleJob(ctx context.Context, j *handler.Job) error {
	b.mu.Lock()
	b.runs[j.ID()] = append(b.runs[j.ID()], j.FencingToken())
	first := len(b.runs[j.ID()]) == 1
	if b.down {
		b.before[j.ID()]++
	}
	b.mu.Unlock()
	if j.ID() != b.block || !first {
		return nil
	}
	close(b.started)
	select {
	case <-ctx.Done():
		b.cancelled <- context.Cause(ctx)
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return nil
	}
}

func (b *blocker) setDown(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

func (b *blocker) tokens(id string) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.runs[id])
}

func (b *blocker) startedWhileDown() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.before)
}

// killRedis kills Redis under a running handler and checks that the
// handler's context is cancelled with ErrClaimUnproven before its claim
// could have expired (within ClaimTTL of the kill, the last proof being
// before it).
func killRedis(t *testing.T, e *env, b *blocker, claimTTL time.Duration) {
	t.Helper()
	testenv.Recv(t, b.started, 20*time.Second, "the blocking handler starts")
	b.setDown(true)
	killed := time.Now()
	e.redis.Kill()
	cause := testenv.Recv(t, b.cancelled, 10*time.Second, "the handler's context is cancelled once Redis is gone")
	took := time.Since(killed)
	t.Logf("handler cancelled %v after Redis was killed (claim TTL %v): %v", took.Round(time.Millisecond), claimTTL, cause)
	if took >= claimTTL {
		t.Errorf("handler cancelled %v after Redis was killed; want within the claim TTL %v (before the claim can expire)", took, claimTTL)
	}
	if !errors.Is(cause, ErrClaimUnproven) {
		t.Errorf("cause of the handler's cancellation = %v, want ErrClaimUnproven", cause)
	}
}

// A handler running when Redis dies is stopped before its claim can
// expire; the attempt is neither completed nor committed, and once Redis
// is back the window runs again with a higher fencing token and completes
// once.
func TestStoreOutageStopsRunningHandler(t *testing.T) {
	const ttl = 2 * time.Second
	e := newDurableEnv(t, 1, ttl)
	m := window("job", "h", 0, defaultPolicy)
	b := newBlocker(m.ID)
	mux := handler.NewMux()
	mux.Handle("h", b)
	e.publish(m)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.ClaimExtendInterval = 200 * time.Millisecond
	start(t, cfg)

	killRedis(t, e, b, ttl)
	errs := e.store.claimErrs.Load()
	testenv.Eventually(t, 20*time.Second, func() bool { return e.store.claimErrs.Load() >= errs+3 }, "worker claims the window again while Redis is down")
	if got := outcomes(x.of(m.ID)); !slices.Equal(got, []string{OutcomeSteppedDown}) {
		t.Fatalf("outcomes while Redis is down %v, want [stepped-down]", got)
	}
	if es := x.of(m.ID); !errors.Is(es[0].Err, ErrClaimUnproven) {
		t.Errorf("stepped-down execution's Err = %v, want ErrClaimUnproven", es[0].Err)
	}
	if got, ok := e.committed()[0]; ok && got != 0 {
		t.Fatalf("committed offset %d while Redis is down, want none", got)
	}
	if n := len(b.tokens(m.ID)); n != 1 {
		t.Fatalf("handler ran %d times while Redis was down, want once (the stopped attempt)", n)
	}

	b.setDown(false)
	e.redis.Restart()
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == 1 }, "window runs once Redis is back")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 1 }, "window committed")
	if got := outcomes(x.of(m.ID)); !slices.Equal(got, []string{OutcomeSteppedDown, OutcomeDone}) {
		t.Errorf("outcomes %v, want [stepped-down done]", got)
	}
	toks := b.tokens(m.ID)
	if len(toks) != 2 || toks[1] <= toks[0] {
		t.Errorf("fencing tokens of the runs %v; want two, the second higher", toks)
	}
	// go-redis may answer a few calls with the dial error of the outage
	// after the restart: read the final state until it answers.
	var st dedupe.State
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		st, err = e.store.State(context.Background(), m.ID)
		return err == nil
	}, "state of %s readable", m.ID)
	if st.Status != dedupe.StatusDone || st.Token != toks[len(toks)-1] {
		t.Errorf("window state %+v; want done by the re-run's token", st)
	}
}

// With windows of several jobs running at once, a handler running when
// Redis dies is stopped like a single window's, and no window arriving
// while Redis is down starts; once Redis is back every window is done
// once, the stopped one with a higher token.
func TestStoreOutageStopsConcurrentWindows(t *testing.T) {
	const ttl = 2 * time.Second
	e := newDurableEnv(t, 1, ttl)
	var ms []*jobmsg.Message
	for i := range 16 {
		ms = append(ms, window(fmt.Sprintf("job-%d", i), "h", 0, defaultPolicy))
	}
	b := newBlocker(ms[2].ID)
	mux := handler.NewMux()
	mux.Handle("h", b)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.ClaimExtendInterval = 200 * time.Millisecond
	start(t, cfg)
	e.publish(ms[:8]...)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 7 }, "the 7 quick windows done beside the blocked one")
	killRedis(t, e, b, ttl)
	e.publish(ms[8:]...)
	errs := e.store.errs()
	testenv.Eventually(t, 20*time.Second, func() bool { return e.store.errs() >= errs+3 }, "worker retries the store while Redis is down")
	if got := b.startedWhileDown(); len(got) != 0 {
		t.Fatalf("handlers started while Redis was down: %v", got)
	}
	if got, ok := e.committed()[0]; ok && got > 2 {
		t.Fatalf("committed offset %d while window 2 is not settled, want at most 2", got)
	}

	b.setDown(false)
	e.redis.Restart()
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "every window done once Redis is back (have %d)", x.count(OutcomeDone))
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == int64(len(ms)) }, "all windows committed")
	for i, m := range ms {
		toks := b.tokens(m.ID)
		if i != 2 && len(toks) != 1 {
			t.Errorf("window %d ran with tokens %v; want 1 run", i, toks)
		}
		// go-redis may answer a few calls with the dial error of the
		// outage after the restart: read the final state until it answers.
		var st dedupe.State
		testenv.Eventually(t, 10*time.Second, func() bool {
			var err error
			st, err = e.store.State(context.Background(), m.ID)
			return err == nil
		}, "state of %s readable", m.ID)
		if st.Status != dedupe.StatusDone || st.Token != toks[len(toks)-1] {
			t.Errorf("window %d state %+v; want done by the last run's token %d", i, st, toks[len(toks)-1])
		}
	}
	// The stopped window stepped down (more than once if the store's first
	// answers after the restart were still errors), then ran again with
	// higher tokens and was done once.
	toks := b.tokens(ms[2].ID)
	if len(toks) < 2 || !slices.IsSorted(toks) || len(slices.Compact(slices.Clone(toks))) != len(toks) {
		t.Errorf("stopped window ran with tokens %v; want at least 2 runs, with strictly increasing tokens", toks)
	}
	got := outcomes(x.of(ms[2].ID))
	if len(got) < 2 || got[len(got)-1] != OutcomeDone || slices.ContainsFunc(got[:len(got)-1], func(o string) bool { return o != OutcomeSteppedDown }) {
		t.Errorf("stopped window's outcomes %v, want stepped-down (once or more), then done", got)
	}
}

// Claims are never run on an old proof: when the claim call answers later
// than the claims are proven for, no handler starts on them; each window is
// claimed afresh, so each handler starts within the claim TTL of the last
// successful claim or extend of its token.
func TestSlowClaimBatchIsNotRunUnproven(t *testing.T) {
	const ttl = time.Second
	e := newEnv(t, 1, ttl)
	var ms []*jobmsg.Message
	for i := range 8 {
		ms = append(ms, window(fmt.Sprintf("job-%d", i), "h", 0, defaultPolicy))
	}
	var mu sync.Mutex
	var stale []string
	runs := map[string]int{}
	mux := handler.NewMux()
	mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
		age := time.Since(e.store.proof(j.ID(), j.FencingToken()))
		mu.Lock()
		defer mu.Unlock()
		runs[j.ID()]++
		if age >= ttl {
			stale = append(stale, fmt.Sprintf("%s (token %d, proven %v ago)", j.ID(), j.FencingToken(), age.Round(time.Millisecond)))
		}
		return nil
	})
	x := &execs{}
	e.store.claimBatchDelay.Store(int64(ttl + ttl/5))
	start(t, e.config("w1", mux, x))
	e.publish(ms...)
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "every window done (have %d)", x.count(OutcomeDone))
	if n := x.count(OutcomeSteppedDown); n == 0 {
		t.Errorf("no attempt stepped down although the first claim call answered %v late", ttl+ttl/5)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stale) > 0 {
		t.Errorf("handlers started on claims not proven within the claim TTL %v: %v", ttl, stale)
	}
	for _, m := range ms {
		if runs[m.ID] != 1 {
			t.Errorf("window %s ran %d times, want once", m.ID, runs[m.ID])
		}
	}
}

// A record older than the store's Retention (its done marker may have
// expired) is not run: it is dead-lettered with the reason and how to
// redrive it, unless the store still knows the window is done. A record
// republished later (as kjobctl dlq redrive does) is young again and runs.
func TestRecordBeyondReplayHorizonIsDeadLettered(t *testing.T) {
	for _, concurrency := range []int{1, 100} {
		t.Run(fmt.Sprintf("concurrency=%d", concurrency), func(t *testing.T) {
			e := newEnv(t, 1, 5*time.Second)
			ctx := context.Background()
			var mu sync.Mutex
			runs := map[string]int{}
			mux := handler.NewMux()
			mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
				mu.Lock()
				runs[j.ID()]++
				mu.Unlock()
				return nil
			})
			old := testNow.Add(-9 * 24 * time.Hour)
			msg := func(i int) *jobmsg.Message {
				m := window("job", "h", i, defaultPolicy)
				m.ScheduledAt, m.PublishedAt = old, old
				return m
			}
			stale, done, redriven := msg(0), msg(1), msg(2)
			c, err := e.store.Claim(ctx, done.ID, "earlier")
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.Complete(ctx, done.ID, c.Token); err != nil {
				t.Fatal(err)
			}
			recs := []*kgo.Record{e.record(stale), e.record(done), e.record(redriven)}
			recs[0].Timestamp, recs[1].Timestamp = old, old
			recs[2].Timestamp = testNow.Add(-time.Hour) // republished an hour ago
			e.produce(recs...)

			x := &execs{}
			cfg := e.config("w1", mux, x)
			cfg.Concurrency = concurrency
			_, stop := start(t, cfg)
			testenv.Eventually(t, 20*time.Second, func() bool { return len(x.all()) >= 3 }, "all three records settled")
			testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 3 }, "all three records committed")
			stop()

			if got := outcomes(x.of(stale.ID)); !slices.Equal(got, []string{OutcomeDeadLettered}) {
				t.Errorf("old window: outcomes %v, want [dead-lettered]", got)
			} else if es := x.of(stale.ID); !errors.Is(es[0].Err, ErrBeyondHorizon) {
				t.Errorf("old window's Err = %v, want ErrBeyondHorizon", es[0].Err)
			}
			if got := outcomes(x.of(done.ID)); !slices.Equal(got, []string{OutcomeSkippedDone}) {
				t.Errorf("old window known done: outcomes %v, want [skipped-done]", got)
			}
			if got := outcomes(x.of(redriven.ID)); !slices.Equal(got, []string{OutcomeDone}) {
				t.Errorf("republished window: outcomes %v, want [done]", got)
			}
			mu.Lock()
			if runs[stale.ID] != 0 || runs[done.ID] != 0 || runs[redriven.ID] != 1 {
				t.Errorf("handler runs %v; want only the republished window, once", runs)
			}
			mu.Unlock()
			st, err := e.store.State(ctx, stale.ID)
			if err != nil || st.Status != dedupe.StatusDeadLettered {
				t.Errorf("old window state %+v, %v; want dead-lettered (a redelivery is skipped)", st, err)
			}
			dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
			if len(dlq) != 1 {
				t.Fatalf("dead-letter topic has %d records, want 1", len(dlq))
			}
			reason, _ := header(dlq[0], HeaderDLQReason)
			want := "published 9d ago, more than the replay horizon (the store's retention, WorkerConfig.Retention = 7d): its done marker may have expired, so whether it already ran is unknown; redrive it with kjobctl dlq redrive if it must still run"
			if reason != want {
				t.Errorf("dead letter reason\n %q\nwant\n %q", reason, want)
			}
			if !strings.Contains(reason, "kjobctl dlq redrive") {
				t.Errorf("reason %q does not say how to redrive", reason)
			}
		})
	}
}
