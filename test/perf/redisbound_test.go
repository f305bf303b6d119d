package perf

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// boundCalls is how many settle calls the limit keeps in flight: the
// worker's bound per partition (internal/exec/worker maxSettleCalls).
const boundCalls = 3

// historyDelay and maxPendingRuns are the worker's (internal/exec/worker):
// a partition's runs go with a settle call once the oldest is
// historyDelay old or maxPendingRuns wait, so that in a burst each job's
// runs are packed into few history members. Until 2026-11-29 the limit
// appended each call's runs with the next call, a history member per run,
// which cost redis-server more per window than the burst it was the
// limit of (19-22 against 14-18 µs) and so read low.
const (
	historyDelay   = 100 * time.Millisecond
	maxPendingRuns = 4096
)

// pendingRuns are the runs waiting for the history, shared by the calls
// in flight as a partition's are.
type pendingRuns struct {
	mu    sync.Mutex
	runs  []dedupe.Run
	since time.Time // when the oldest of runs was added
}

// add adds runs done now.
func (p *pendingRuns) add(runs []dedupe.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.runs) == 0 {
		p.since = time.Now()
	}
	p.runs = append(p.runs, runs...)
}

// due takes the runs if they are due to go with the next call.
func (p *pendingRuns) due() []dedupe.Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.runs) == 0 || len(p.runs) < maxPendingRuns && time.Since(p.since) < historyDelay {
		return nil
	}
	runs := p.runs
	p.runs = nil
	return runs
}

// all takes the runs left.
func (p *pendingRuns) all() []dedupe.Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := p.runs
	p.runs = nil
	return runs
}

// redisBound measures the Redis-bound limit of a no-op burst of n windows
// of jobs jobs, on r, as the worker sends its calls in such a burst: each
// job's first window claimed in one ClaimBatch, then each window completed
// by a Settle call that also claims its job's next window
// (Settlement.Next), with boundCalls calls in flight, each for its share
// of the jobs; the runs go to the history as the worker sends them, with
// the first call that goes out once the oldest waiting run is
// historyDelay old (or maxPendingRuns wait), all jobs' runs together. No
// broker, no handler, no worker: what remains is Redis's work per window
// and the client's round trips. It returns windows/s, redis-server CPU
// per window and script calls per window.
func redisBound(b *testing.B, r *testenv.Redis, n, jobs int) (rate, redisCPU, calls float64) {
	b.Helper()
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: fmt.Sprintf("bound%d", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perJob := n / jobs
	id := func(job, i int) string {
		return jobmsg.WindowID(fmt.Sprintf("bound-%03d", job), base.Add(time.Duration(i)*time.Second))
	}
	rpid := redisPID(b, r)
	cs0, us0, u0 := commandStats(b, r), commandUsec(b, r), readUsage(b, rpid)
	t0 := time.Now()
	var wg sync.WaitGroup
	var pending pendingRuns
	errs := make(chan error, boundCalls+1)
	for g := range boundCalls {
		var mine []int
		for j := g; j < jobs; j += boundCalls {
			mine = append(mine, j)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := make([]string, len(mine))
			for k, j := range mine {
				first[k] = id(j, 0)
			}
			cs, err := store.ClaimBatch(ctx, first, "bound")
			if err != nil {
				errs <- err
				return
			}
			tokens := make([]int64, len(mine))
			for k, c := range cs {
				if c.Outcome != dedupe.Claimed {
					errs <- fmt.Errorf("claim %s: %v", first[k], c.Outcome)
					return
				}
				tokens[k] = c.Token
			}
			var runs []dedupe.Run
			ss := make([]dedupe.Settlement, len(mine))
			for i := range perJob {
				for k, j := range mine {
					ss[k] = dedupe.Settlement{ID: id(j, i), Op: dedupe.OpComplete, Token: tokens[k]}
					if i+1 < perJob {
						ss[k].Next, ss[k].Owner = id(j, i+1), "bound"
					}
				}
				res, err := store.Settle(ctx, ss, pending.due()...)
				if err != nil {
					errs <- err
					return
				}
				runs = runs[:0]
				now := time.Now()
				for k, rs := range res {
					if rs.Err != nil {
						errs <- fmt.Errorf("settle %s: %w", ss[k].ID, rs.Err)
						return
					}
					runs = append(runs, dedupe.Run{WindowID: ss[k].ID, Job: fmt.Sprintf("bound-%03d", mine[k]), Trigger: "backfill", Outcome: dedupe.RunDone,
						WindowStart: base.Add(time.Duration(i) * time.Second), Started: now, Finished: now, Attempt: 1, Token: tokens[k], Worker: "bound"})
					if i+1 < perJob {
						tokens[k] = rs.Next.Token
					}
				}
				pending.add(runs)
			}
		}()
	}
	wg.Wait()
	if runs := pending.all(); len(runs) > 0 {
		if err := store.AppendRuns(ctx, runs); err != nil {
			errs <- err
		}
	}
	took := time.Since(t0)
	close(errs)
	for err := range errs {
		b.Fatalf("Redis-bound limit: %v", err)
	}
	cs1, us1, u1 := commandStats(b, r), commandUsec(b, r), readUsage(b, rpid)
	done := float64(perJob * jobs)
	logCommands(b, "Redis-bound limit", int(done), cs0, cs1, us0, us1)
	return done / took.Seconds(), float64((u1.cpu - u0.cpu).Microseconds()) / done, float64(scriptCalls(cs0, cs1)) / done
}

// reportRedisBound reports the Redis-bound limit beside a burst of n
// windows of jobs jobs that ran at rate windows/s on the same
// redis-server, in the same run, and beside the burst's CPU ceiling (the
// most windows/s the machine's CPUs carry at the burst's CPU per window).
func reportRedisBound(b *testing.B, r *testenv.Redis, n, jobs int, rate, ceiling float64, settings string) {
	limit, cpu, calls := redisBound(b, r, n, jobs)
	what := fmt.Sprintf("%d windows of %d jobs: each job's first window claimed, then each window completed by a settle call that claims its job's next one, %d calls in flight (the worker's bound per partition), the runs appended with the first call %v after the oldest (the worker's history delay); no broker, no handler; redis-server on loopback; measured right after the burst, same run; %s",
		n, jobs, boundCalls, historyDelay, machine())
	report(b, "Redis-bound limit (claim + complete scripts alone)", limit, "windows/s", what)
	report(b, "Redis-bound limit: redis-server CPU per window", cpu, "µs CPU/window", what)
	report(b, "Redis-bound limit: script calls per window", calls, "calls/window", what)
	report(b, "burst throughput to the last window done / Redis-bound limit", 100*rate/limit, "%", settings+"; the limit: "+what)
	report(b, "burst CPU ceiling / Redis-bound limit: the most of the limit this machine allows at the burst's CPU per window", 100*ceiling/limit, "% of the limit at most", settings+"; the limit: "+what)
}
