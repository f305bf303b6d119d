package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// serverStats is what a benchmark reads from the Redis server before and
// after its loop: the server's CPU time (INFO cpu, µs) and the commands it
// ran (INFO commandstats; commands a script calls count one each, the
// script call itself one more).
type serverStats struct {
	cpuMicros float64
	commands  int64
}

func readServerStats(b *testing.B, rdb *redis.Client) serverStats {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s serverStats
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpuMicros += f * 1e6
		case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info":
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			s.commands += n
		}
	}
	return s
}

// reportServer reports the Redis server's CPU and commands per window
// since before, for windows windows.
func reportServer(b *testing.B, rdb *redis.Client, before serverStats, windows int) {
	b.Helper()
	after := readServerStats(b, rdb)
	b.ReportMetric(float64(windows)/b.Elapsed().Seconds(), "windows/s")
	b.ReportMetric((after.cpuMicros-before.cpuMicros)/float64(windows), "redis-µs/window")
	b.ReportMetric(float64(after.commands-before.commands)/float64(windows), "redis-cmds/window")
}

func BenchmarkClaimComplete(b *testing.B) {
	b.Run("epoch=none", func(b *testing.B) { benchClaimOneAtATime(b, false) })
	// With a proven store epoch (as a worker runs): tokens above its
	// floor, and on a single server the marker read in every claim script.
	b.Run("epoch=proven", func(b *testing.B) { benchClaimOneAtATime(b, true) })
}

func benchClaimOneAtATime(b *testing.B, epoch bool) {
	s, _, rdb := newStore(b, Config{})
	ctx := context.Background()
	if epoch {
		if _, err := s.Mark(ctx, 1, "bench", ""); err != nil {
			b.Fatal(err)
		}
		if err := s.SetEpoch(1); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	before := readServerStats(b, rdb)
	for b.Loop() {
		id := "bench@" + strconv.Itoa(n)
		n++
		c, err := s.Claim(ctx, id, "w")
		if err != nil || c.Outcome != Claimed {
			b.Fatalf("claim: %+v, %v", c, err)
		}
		if err := s.Complete(ctx, id, c.Token); err != nil {
			b.Fatal(err)
		}
	}
	reportServer(b, rdb, before, n)
}

// BenchmarkClaimCompleteBatch claims and completes batches of windows as
// the worker does for a backlog: 100 windows of one job, 500 windows
// spread over 25 jobs (a partition's share of the burst workload's 100
// jobs), 200 windows over 100 jobs, and 250 windows of 250 jobs (a
// partition's share of 1,000 jobs due at the same second). Each runs with
// one script call per job (calls=per-job, as on a Redis Cluster) and with
// the calls a single server takes (calls=cross-job: one per batch).
func BenchmarkClaimCompleteBatch(b *testing.B) {
	for _, tc := range []struct{ batch, jobs int }{{100, 1}, {500, 25}, {200, 100}, {250, 250}, {32, 32}} {
		for _, mode := range []struct {
			name    string
			scripts int32
		}{{"per-job", scriptsPerJob}, {"cross-job", scriptsCrossJob}} {
			b.Run(fmt.Sprintf("windows=%d/jobs=%d/calls=%s", tc.batch, tc.jobs, mode.name), func(b *testing.B) {
				benchClaimComplete(b, tc.batch, tc.jobs, mode.scripts)
			})
		}
	}
}

func benchClaimComplete(b *testing.B, batch, jobs int, scripts int32) {
	s, _, rdb := newStore(b, Config{})
	if scripts == scriptsCrossJob && !s.crossJob(context.Background()) {
		b.Skip("the server takes no cross-job script calls")
	}
	s.scripts.Store(scripts)
	ctx := context.Background()
	ids := make([]string, batch)
	tokens := make([]int64, batch)
	n := 0
	before := readServerStats(b, rdb)
	for b.Loop() {
		for j := range ids {
			ids[j] = "bench" + strconv.Itoa(n%jobs) + "@" + strconv.Itoa(n)
			n++
		}
		cs, err := s.ClaimBatch(ctx, ids, "w")
		if err != nil {
			b.Fatal(err)
		}
		for j, c := range cs {
			if c.Outcome != Claimed {
				b.Fatalf("claim %s: %+v", ids[j], c)
			}
			tokens[j] = c.Token
		}
		errs, err := s.CompleteBatch(ctx, ids, tokens)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	reportServer(b, rdb, before, n)
}

// BenchmarkSettleChain is the worker's hot path in a backlog of queue
// lanes: one Settle call completes the running window of each of 100 jobs
// and claims each job's next window (Settlement.Next), on a single server
// (one script call). Each window is claimed once (chained) and completed
// once; redis-µs/window is the server's CPU per window.
func BenchmarkSettleChain(b *testing.B) {
	const jobs = 100
	s, _, rdb := newStore(b, Config{})
	id := func(j, i int) string { return "chain" + strconv.Itoa(j) + "@" + strconv.Itoa(i) }
	first := make([]string, jobs)
	for j := range first {
		first[j] = id(j, 0)
	}
	c := newChain(b, s, first)
	n := 0
	before := readServerStats(b, rdb)
	for b.Loop() {
		n++
		c.step(b, func(j int) string { return id(j, n) })
	}
	reportServer(b, rdb, before, n*jobs)
}

// chain holds the running window of each of a few jobs, claimed by "w",
// as a worker's queue lanes in a backlog do.
type chain struct {
	s  *Store
	ss []Settlement
}

// newChain claims first, one window per job.
func newChain(tb testing.TB, s *Store, first []string) *chain {
	tb.Helper()
	cs, err := s.ClaimBatch(context.Background(), first, "w")
	if err != nil {
		tb.Fatal(err)
	}
	c := &chain{s: s, ss: make([]Settlement, len(first))}
	for j, cl := range cs {
		c.ss[j] = Settlement{ID: first[j], Op: OpComplete, Token: cl.Token, Owner: "w"}
	}
	return c
}

// step completes each job's running window in one Settle call that also
// claims the job's next window, next(j), which then runs.
func (c *chain) step(tb testing.TB, next func(j int) string) {
	for j := range c.ss {
		c.ss[j].Next = next(j)
	}
	res, err := c.s.Settle(context.Background(), c.ss)
	if err != nil {
		tb.Fatal(err)
	}
	for j, r := range res {
		if r.Err != nil || r.Next.Outcome != Claimed {
			tb.Fatalf("settle %s: %+v", c.ss[j].ID, r)
		}
		c.ss[j].ID, c.ss[j].Token = r.Next.WindowID, r.Next.Token
	}
}
