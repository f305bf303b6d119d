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

// redisBound measures the Redis-bound limit of a no-op burst of n windows
// of jobs jobs, on r, as the worker sends its calls in such a burst: each
// job's first window claimed in one ClaimBatch, then each window completed
// by a Settle call that also claims its job's next window
// (Settlement.Next) and appends the previous call's runs to the history,
// with boundCalls calls in flight, each for its share of the jobs. No
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
	cs0, u0 := commandStats(b, r), readUsage(b, rpid)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, boundCalls)
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
				res, err := store.Settle(ctx, ss, runs...)
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
			}
			if len(runs) > 0 {
				if err := store.AppendRuns(ctx, runs); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	close(errs)
	for err := range errs {
		b.Fatalf("Redis-bound limit: %v", err)
	}
	cs1, u1 := commandStats(b, r), readUsage(b, rpid)
	done := float64(perJob * jobs)
	return done / took.Seconds(), float64((u1.cpu - u0.cpu).Microseconds()) / done, float64(scriptCalls(cs0, cs1)) / done
}

// reportRedisBound reports the Redis-bound limit beside a burst of n
// windows of jobs jobs that ran at rate windows/s on the same
// redis-server, in the same run.
func reportRedisBound(b *testing.B, r *testenv.Redis, n, jobs int, rate float64, settings string) {
	limit, cpu, calls := redisBound(b, r, n, jobs)
	what := fmt.Sprintf("%d windows of %d jobs: each job's first window claimed, then each window completed by a settle call that claims its job's next one and appends the runs, %d calls in flight (the worker's bound per partition); no broker, no handler; redis-server on loopback; measured right after the burst, same run; %s",
		n, jobs, boundCalls, machine())
	report(b, "Redis-bound limit (claim + complete scripts alone)", limit, "windows/s", what)
	report(b, "Redis-bound limit: redis-server CPU per window", cpu, "µs CPU/window", what)
	report(b, "Redis-bound limit: script calls per window", calls, "calls/window", what)
	report(b, "burst throughput to the last window done / Redis-bound limit", 100*rate/limit, "%", settings+"; the limit: "+what)
}
