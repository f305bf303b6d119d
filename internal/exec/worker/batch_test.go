package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// runCounter counts handler runs per window and fails chosen windows' first
// attempt.
type runCounter struct {
	mu       sync.Mutex
	runs     map[string]int
	failOnce map[string]bool
	delay    time.Duration
}

func (r *runCounter) HandleJob(ctx context.Context, j *handler.Job) error {
	r.mu.Lock()
	r.runs[j.ID()]++
	fail := r.failOnce[j.ID()] && r.runs[j.ID()] == 1
	r.mu.Unlock()
	if fail {
		return errors.New("first attempt fails")
	}
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *runCounter) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

// A backlog of quick windows is claimed and completed many windows per
// round trip (one per job at a time: the default overlap policy, queue,
// runs a job's windows one after the other), and still settles exactly
// like one window at a time per job: in order, each window once, with
// windows already done skipped, a duplicate record skipped, a failing
// window retried, and an undecodable record dead-lettered.
func TestBacklogIsBatched(t *testing.T) {
	e := newEnv(t, 2, 30*time.Second)
	ctx := context.Background()
	const n = 2000
	rc := &runCounter{runs: map[string]int{}, failOnce: map[string]bool{}}
	var recs []*kgo.Record
	var ids []string
	done := map[string]bool{}
	for i := range n {
		m := window(fmt.Sprintf("job-%d", i%100), "count", i, defaultPolicy)
		ids = append(ids, m.ID)
		switch {
		case i%101 == 0: // done by someone else earlier
			c, err := e.store.Claim(ctx, m.ID, "earlier")
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.Complete(ctx, m.ID, c.Token); err != nil {
				t.Fatal(err)
			}
			done[m.ID] = true
		case i%97 == 0:
			rc.failOnce[m.ID] = true
		}
		rec := e.record(m)
		recs = append(recs, rec)
		if i == 1000 {
			dup := e.record(m) // the same window published twice
			recs = append(recs, dup, &kgo.Record{Topic: testTopic, Key: rec.Key, Value: []byte("not json")})
		}
	}
	e.produce(recs...)
	mux := handler.NewMux()
	mux.Handle("count", rc)
	x := &execs{}
	_, stop := start(t, e.config("w1", mux, x))
	want := len(recs)
	testenv.Eventually(t, 60*time.Second, func() bool { return x.count(OutcomeDone) == n-len(done) }, "%d windows done (have %d)", n-len(done), x.count(OutcomeDone))
	testenv.Eventually(t, 60*time.Second, func() bool {
		c := e.committed()
		return c[0]+c[1] == int64(want)
	}, "all %d offsets committed (have %v)", want, e.committed())
	stop()

	for _, id := range ids {
		runs := rc.count(id)
		switch {
		case done[id] && runs != 0:
			t.Errorf("window %s was done before and ran %d times", id, runs)
		case !done[id] && rc.failOnce[id] && runs != 2:
			t.Errorf("window %s (first attempt fails) ran %d times, want 2", id, runs)
		case !done[id] && !rc.failOnce[id] && runs != 1:
			t.Errorf("window %s ran %d times, want 1", id, runs)
		}
		st, err := e.store.State(ctx, id)
		if err != nil || st.Status != dedupe.StatusDone {
			t.Fatalf("window %s state = %+v, %v; want done", id, st, err)
		}
		if wantAttempts := 1 + btoi(rc.failOnce[id]); st.Attempts != wantAttempts {
			t.Errorf("window %s has %d attempts on record, want %d", id, st.Attempts, wantAttempts)
		}
	}
	// Settled in order per job, once each (a retried window reports
	// failed, then done).
	last := map[string]int64{}
	final := map[string]int{}
	settled := map[int64]bool{} // partition and offset of each record settled
	for _, ex := range x.all() {
		if ex.Outcome == OutcomeFailed {
			continue
		}
		if ex.Job == "" {
			final[ex.Outcome]++
			continue // the undecodable record: in no job's lane
		}
		key := int64(ex.Partition)<<40 | ex.Offset
		if ex.Outcome == OutcomeSkippedDone && settled[key] {
			continue // delivered again after a rebalance: skipped as done, as it must
		}
		settled[key] = true
		final[ex.Outcome]++
		if prev, ok := last[ex.Job]; ok && ex.Offset <= prev {
			t.Fatalf("job %s settled offset %d after %d: out of order", ex.Job, ex.Offset, prev)
		}
		last[ex.Job] = ex.Offset
	}
	if final[OutcomeDone] != n-len(done) || final[OutcomeSkippedDone] != len(done)+1 || final[OutcomeDeadLettered] != 1 {
		t.Errorf("final outcomes %v; want %d done, %d skipped-done, 1 dead-lettered", final, n-len(done), len(done)+1)
	}
	// A queue lane's window is claimed by the completion of the window
	// before it (dedupe.Settlement.Next), in the same settle call; the
	// others (each lane's first, those after a failure) by ClaimBatch.
	chained, chainCalls := e.store.chainClaimed.Load(), e.store.chainCalls.Load()
	batched, batchCalls := e.store.batchClaimed.Load(), e.store.batchClaims.Load()
	t.Logf("%d windows claimed with their predecessors' completions in %d settle calls, %d in %d ClaimBatch calls", chained, chainCalls, batched, batchCalls)
	if chained < n/2 {
		t.Errorf("%d of %d windows claimed with their predecessor's completion; want most of a backlog of 100 queue lanes", chained, n)
	}
	// How many windows a call carries depends on how many come up while
	// the previous one is in flight, so on the store's speed; one window
	// per call would be 1. At least 5 is batching with room to spare.
	if calls, windows := chainCalls+batchCalls, chained+batched; calls == 0 || windows < 5*calls {
		t.Errorf("%d windows claimed in %d round trips; want at least 5 per round trip for a backlog", windows, calls)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A worker that loses partitions to a new member in the middle of a
// backlog gives back the claims it took for windows it will not start:
// the new owner runs those windows at once (not after the claim TTL) as
// the same attempt.
func TestRevokeMidBacklogGivesClaimsBack(t *testing.T) {
	e := newEnv(t, 4, time.Minute) // a claim left behind would stall the test past its deadline
	rc := &runCounter{runs: map[string]int{}, failOnce: map[string]bool{}, delay: time.Millisecond}
	var ms []*jobmsg.Message
	for i := range 1200 {
		ms = append(ms, window(fmt.Sprintf("job-%d", i%8), "count", i, defaultPolicy))
	}
	e.publish(ms...)
	mux := handler.NewMux()
	mux.Handle("count", rc)
	x := &execs{}
	w1, stop1 := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) >= 100 }, "w1 started the backlog")
	w2, stop2 := start(t, e.config("w2", mux, x))
	testenv.Eventually(t, 30*time.Second, func() bool { return len(w2.Assigned()) > 0 && len(w1.Assigned()) < 4 }, "w2 took partitions")
	testenv.Eventually(t, 40*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "all windows done (have %d)", x.count(OutcomeDone))
	t.Logf("w1 gave back %d claims taken ahead", e.store.unclaimed.Load())
	testenv.Eventually(t, 40*time.Second, func() bool {
		c := e.committed()
		return c[0]+c[1]+c[2]+c[3] == int64(len(ms))
	}, "all offsets committed (have %v)", e.committed())
	stop2()
	stop1()
	ctx := context.Background()
	for _, m := range ms {
		if n := rc.count(m.ID); n != 1 {
			t.Errorf("window %s ran %d times, want once", m.ID, n)
		}
		st, err := e.store.State(ctx, m.ID)
		if err != nil || st.Status != dedupe.StatusDone || st.Attempts != 1 {
			t.Errorf("window %s state = %+v, %v; want done in 1 attempt", m.ID, st, err)
		}
	}
}

// Under the default overlap policy (queue) a job's window starts only once
// the window before it is recorded done: a success never waits behind
// later windows of its job.
func TestQueuedWindowStartsAfterThePreviousIsDone(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	var ms []*jobmsg.Message
	for i := range 30 {
		ms = append(ms, window("slow", "slow", i, defaultPolicy))
	}
	e.publish(ms...)
	x := &execs{}
	var mu sync.Mutex
	started, worst := 0, 0
	mux := handler.NewMux()
	mux.HandleFunc("slow", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		started++
		worst = max(worst, started-x.count(OutcomeDone))
		mu.Unlock()
		select {
		case <-time.After(10 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	_, stop := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == len(ms) }, "all windows done (have %d)", x.count(OutcomeDone))
	stop()
	mu.Lock()
	defer mu.Unlock()
	if worst > 1 {
		t.Fatalf("%d windows of one job started before the earlier ones were recorded done; want 1 (overlap policy queue)", worst)
	}
}
