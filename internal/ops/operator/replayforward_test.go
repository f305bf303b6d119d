package operator_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// blocker is a handler whose windows of the jobs in block run until their
// context ends; it records every start.
type blocker struct {
	block      map[string]bool
	maxAttempt int
	mu         sync.Mutex
	started    map[string]int
	running    map[string]bool
}

func (b *blocker) serve(ctx context.Context, j *handler.Job) error {
	b.mu.Lock()
	b.started[j.ID()]++
	b.maxAttempt = max(b.maxAttempt, j.Attempt())
	b.running[j.ID()] = true
	block := b.block[j.Name()]
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running[j.ID()] = false
		b.mu.Unlock()
	}()
	if !block {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (b *blocker) starts(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started[id]
}

func (b *blocker) isRunning(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running[id]
}

// slowWindow is window(job, i) with a timeout long enough to block.
func slowWindow(job string, i int) *jobmsg.Message {
	m := window(job, i)
	m.Policy.Timeout = jobmsg.Duration(10 * time.Minute)
	m.Policy.MaxAttempts = 2
	return m
}

// executions reads kjob_executions_total{kjob_job=job, outcome=outcome}.
func executions(t *testing.T, reg *prometheus.Registry, job, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kjob_executions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var j, o string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "kjob_job":
					j = l.GetValue()
				case "outcome":
					o = l.GetValue()
				}
			}
			if j == job && o == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The replay reproduction of issue 21: a long handler holds the commit
// back, and a replay forward (here --to-latest) would move the offsets past
// its window and the window queued behind it, which were then never
// delivered again. The plan lists both (job, window, state); Execute refuses
// without SkipUnsettled and changes nothing; with it both end settled as
// skipped (replay), in the store, the run history and the executions
// metric, never failed, and neither runs again.
func TestReplayForwardPastUnsettledWindows(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	l := &ledger{}
	b := &blocker{block: map[string]bool{"slow": true}, started: map[string]int{}, running: map[string]bool{}}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	e.startWorkerWith(ctx, "wa", l, &wg, b.serve, m.Executed)

	held, queued := slowWindow("slow", 0), slowWindow("slow", 1) // queued: same job, overlap queue, waits for held
	var fast []*jobmsg.Message
	for i := range 3 {
		fast = append(fast, window("fast", i))
	}
	e.publish(held)
	e.publish(fast...)
	e.publish(queued)
	testenv.Eventually(t, 30*time.Second, func() bool { return b.isRunning(held.ID) }, "window %s running", held.ID)
	for _, f := range fast {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(f.ID, worker.OutcomeDone) == 1 }, "window %s done", f.ID)
	}

	r := e.replayer()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	plan := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToLatest})
	got := map[string]string{}
	for _, w := range plan.Skip {
		got[w.ID] = w.Job + " " + w.State
	}
	want := map[string]string{held.ID: "slow running", queued.ID: "slow pending"}
	if len(got) != 2 || got[held.ID] != want[held.ID] || got[queued.ID] != want[queued.ID] {
		t.Fatalf("plan lists %v as unsettled, want %v (the done fast windows are not listed)", got, want)
	}
	if p := plan.Partitions[0]; p.Target <= p.Before || p.Unsettled != 2 {
		t.Fatalf("partition plan %+v: want a move forward past 2 unsettled windows", p)
	}

	// Without the flag: refused, nothing moved, the handler still runs.
	err := r.Execute(rctx, plan)
	if ce := configerr.As(err); !errors.Is(err, operator.ErrUnsettled) || ce == nil || ce.Field != "ReplaySpec.SkipUnsettled" {
		t.Fatalf("execute without SkipUnsettled: %v; want ErrUnsettled, a *configerr.Error about ReplaySpec.SkipUnsettled", err)
	}
	if !b.isRunning(held.ID) {
		t.Fatal("a refused replay stopped the running handler")
	}
	if st, err := e.store.State(rctx, queued.ID); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("a refused replay settled %s: %+v, %v", queued.ID, st, err)
	}

	// With it: both settled as skipped (replay), never failed.
	plan.Spec.SkipUnsettled = true
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	if p := plan.Partitions[0]; p.Skipped != 2 || p.AppliedBy != "wa" {
		t.Fatalf("after execute: %+v; want 2 windows skipped by wa", p)
	}
	for _, m := range []*jobmsg.Message{held, queued} {
		st, err := e.store.State(rctx, m.ID)
		if err != nil || !dedupe.SkippedByReplay(st) {
			t.Fatalf("window %s after the replay: %+v, %v; want skipped by the replay", m.ID, st, err)
		}
		if n := l.count(m.ID, worker.OutcomeSkippedReplay); n != 1 {
			t.Fatalf("window %s reported skipped-replay %d times, want 1: %v", m.ID, n, l.runs)
		}
		for _, o := range []string{worker.OutcomeFailed, worker.OutcomeDone, worker.OutcomeDeadLettered} {
			if n := l.count(m.ID, o); n != 0 {
				t.Fatalf("window %s reported %s %d times", m.ID, o, n)
			}
		}
	}
	if n := executions(t, reg, "slow", worker.OutcomeSkippedReplay); n != 2 {
		t.Fatalf("kjob_executions_total{kjob_job=slow,outcome=skipped-replay} = %v, want 2", n)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		runs, err := e.store.Runs(rctx, "slow", dedupe.RunQuery{})
		if err != nil {
			return false
		}
		var ids []string
		for _, r := range runs {
			if r.Outcome == dedupe.RunFailed {
				t.Fatalf("history of slow holds a failed run: %+v", r)
			}
			if r.Outcome == dedupe.RunSkippedReplay {
				ids = append(ids, r.WindowID)
			}
		}
		slices.Sort(ids)
		return slices.Equal(ids, []string{held.ID, queued.ID})
	}, "history of slow shows both windows skipped (replay)")

	// The partition goes on: a new window of the job runs, the skipped
	// ones never again.
	next := slowWindow("slow", 2)
	b.mu.Lock()
	b.block["slow"] = false
	b.mu.Unlock()
	e.publish(next)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(next.ID, worker.OutcomeDone) == 1 }, "window %s done", next.ID)
	if n, q := b.starts(held.ID), b.starts(queued.ID); n != 1 || q != 0 {
		t.Fatalf("the skipped windows started %d and %d times, want 1 (before the replay) and 0", n, q)
	}
	e.drained()
}

// --to-latest with several handlers running (the 99 of issue 21, here 5):
// each is listed as running, cancelled after the workers' grace, and
// settled as skipped (replay), never failed nor run again.
func TestReplayToLatestSkipsRunningHandlers(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	l := &ledger{}
	jobs := []string{"s1", "s2", "s3", "s4", "s5"}
	b := &blocker{block: map[string]bool{}, started: map[string]int{}, running: map[string]bool{}}
	for _, j := range jobs {
		b.block[j] = true
	}
	e.startWorkerWith(ctx, "wa", l, &wg, b.serve, nil)
	var ms []*jobmsg.Message
	for i, j := range jobs {
		ms = append(ms, slowWindow(j, i))
	}
	e.publish(ms...)
	for _, m := range ms {
		testenv.Eventually(t, 30*time.Second, func() bool { return b.isRunning(m.ID) }, "window %s running", m.ID)
	}
	r := e.replayer()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	plan := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToLatest})
	if len(plan.Skip) != len(ms) {
		t.Fatalf("plan lists %d unsettled windows, want %d: %+v", len(plan.Skip), len(ms), plan.Skip)
	}
	for _, w := range plan.Skip {
		if w.State != dedupe.StatusRunning {
			t.Fatalf("plan lists %+v, want state running", w)
		}
	}
	if err := r.Execute(rctx, plan); !errors.Is(err, operator.ErrUnsettled) {
		t.Fatalf("execute without SkipUnsettled: %v, want ErrUnsettled", err)
	}
	plan.Spec.SkipUnsettled = true
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	if p := plan.Partitions[0]; p.Skipped != len(ms) {
		t.Fatalf("after execute: %+v; want %d skipped", p, len(ms))
	}
	for _, m := range ms {
		st, err := e.store.State(rctx, m.ID)
		if err != nil || !dedupe.SkippedByReplay(st) {
			t.Fatalf("window %s: %+v, %v; want skipped by the replay", m.ID, st, err)
		}
		if n := l.count(m.ID, worker.OutcomeSkippedReplay); n != 1 || l.count(m.ID, worker.OutcomeFailed) != 0 {
			t.Fatalf("window %s: skipped-replay %d, failed %d; want 1 and 0", m.ID, n, l.count(m.ID, worker.OutcomeFailed))
		}
		if b.isRunning(m.ID) || b.starts(m.ID) != 1 {
			t.Fatalf("window %s: running %v, started %d times", m.ID, b.isRunning(m.ID), b.starts(m.ID))
		}
	}
	e.drained()
}

// One replay --execute is one seek (issue 21, item 4): the owner
// acknowledges only once the seek is applied (after its grace when a
// handler runs), while the Replayer re-sends the request every Resend; the
// copies carry the same id and move nothing again. So the window running
// when the replay came is interrupted once, re-delivered once, and no
// attempt goes beyond its max_attempts.
func TestReplayResentRequestSeeksOnce(t *testing.T) {
	e := newEnv(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	l := &ledger{}
	b := &blocker{block: map[string]bool{"slow": true}, started: map[string]int{}, running: map[string]bool{}}
	e.startWorkerWith(ctx, "wa", l, &wg, b.serve, nil) // Grace 2s
	m := slowWindow("slow", 0)                         // MaxAttempts 2
	e.publish(m)
	testenv.Eventually(t, 30*time.Second, func() bool { return b.isRunning(m.ID) }, "window %s running", m.ID)

	r, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: e.brokers, Topic: topic, Store: e.store, AckTimeout: 30 * time.Second,
		Resend: 100 * time.Millisecond}) // about 20 copies within the grace
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	p := jobPartition(t, e, "slow")
	plan := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Partitions: []int32{p}})
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return b.starts(m.ID) >= 2 && b.isRunning(m.ID) }, "window %s re-delivered and running", m.ID)
	// A second replay, of the other (empty) partition: the agent handles
	// requests in order, so once it is acknowledged every copy of the
	// first request was handled.
	other := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Partitions: []int32{1 - p}})
	if err := r.Execute(rctx, other); err != nil {
		t.Fatal(err)
	}
	if n := b.starts(m.ID); n != 2 {
		t.Fatalf("window %s started %d times, want 2 (before the replay, and once after its one seek)", m.ID, n)
	}
	if n := l.count(m.ID, worker.OutcomeFailed); n != 1 {
		t.Fatalf("window %s interrupted %d times, want 1", m.ID, n)
	}
	b.mu.Lock()
	if b.maxAttempt > m.Policy.MaxAttempts {
		t.Errorf("an attempt started as attempt %d of max_attempts %d", b.maxAttempt, m.Policy.MaxAttempts)
	}
	b.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.runs {
		if x.attempt > m.Policy.MaxAttempts {
			t.Fatalf("attempt %d of %s with max_attempts %d: %+v", x.attempt, x.id, m.Policy.MaxAttempts, l.runs)
		}
	}
}

func jobPartition(t *testing.T, e *env, job string) int32 {
	t.Helper()
	return names.JobPartition(job, 2)
}
