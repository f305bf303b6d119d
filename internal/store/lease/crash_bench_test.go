package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// crashable is a Lock whose replica can crash: from then on every call
// fails, as if its process were gone (it neither renews nor releases).
type crashable struct {
	lease.Lock
	dead atomic.Bool
}

var errCrashed = errors.New("crashed")

func (c *crashable) TryAcquire(ctx context.Context, holder string, ttl time.Duration) (lease.Record, bool, error) {
	if c.dead.Load() {
		return lease.Record{}, false, errCrashed
	}
	return c.Lock.TryAcquire(ctx, holder, ttl)
}

func (c *crashable) Renew(ctx context.Context, rec lease.Record, ttl time.Duration) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.Lock.Renew(ctx, rec, ttl)
}

func (c *crashable) Release(ctx context.Context, rec lease.Record) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.Lock.Release(ctx, rec)
}

// BenchmarkCrash measures the election part of a producer crash failover
// on a real redis-server: from the leader's crash (its calls to Redis
// stop, nothing is released) to the standby's lead being called, over
// KJOB_CRASH_REPS repetitions (default 10) at a random point of the renew
// cycle, for the defaults (TTL 2s, renew 300ms, the standby retrying at
// the lease's expiry) and for the earlier defaults (TTL 5s, renew 1s,
// polling every 1s). It also counts what the lease costs Redis with a
// leader and one standby: script calls per second and redis-server CPU,
// over 10s. Run it with
//
//	KJOB_TEST_REQUIRE_REDIS=1 go test -run '^$' -bench Crash -benchtime 1x ./internal/store/lease/
//
// (the repetitions are inside; b.N is not used). The whole failover, to
// the next window's handler, is test.BenchmarkFailover's.
func BenchmarkCrash(b *testing.B) {
	reps := testenv.Reps(b, "KJOB_CRASH_REPS", 10)
	r := testenv.NewRedis(b)
	rc := r.Client()
	type setting struct {
		name       string
		ttl, renew time.Duration
		expiry     bool // the standby retries at the lease's expiry
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\nlease crash failover: leader's calls stop (no release) -> standby's lead called; %d repetitions; leader + 1 standby; redis-server on loopback\n", reps)
	fmt.Fprintf(&out, "%-52s %9s %9s %9s  %14s %16s\n", "setting", "p50", "p99", "max", "script calls/s", "redis CPU µs/s")
	for i, s := range []setting{
		{"TTL 2s, renew 300ms, retry at expiry (default)", lease.DefaultTTL, lease.DefaultRenewInterval, true},
		{"TTL 5s, renew 1s, retry 1s (before 2026-11-29)", 5 * time.Second, time.Second, false},
	} {
		key := fmt.Sprintf("kjob:{crash%d}:producer-lease", i)
		next := 0
		start := func() (*benchReplica, *crashable) {
			l, err := lease.NewRedisLock(rc, key)
			if err != nil {
				b.Fatal(err)
			}
			var inner lease.Lock = l
			if !s.expiry {
				inner = noRemaining{l}
			}
			c := &crashable{Lock: inner}
			next++
			return startBenchReplicaWith(b, lease.Config{Lock: c, Holder: fmt.Sprintf("r%d", next), TTL: s.ttl, RenewInterval: s.renew}), c
		}
		leader, lock := start()
		leader.waitLeading(b)
		standby, slock := start()
		// The lease's steady cost: a leader renewing, a standby polling.
		time.Sleep(s.renew) // the standby's first attempt is in
		calls0, cpu0 := redisCost(b, rc)
		time.Sleep(10 * time.Second)
		calls1, cpu1 := redisCost(b, rc)
		var samples []time.Duration
		for range reps {
			time.Sleep(time.Duration(rand.Int64N(int64(s.renew)))) // a random point of the renew cycle
			at := time.Now()
			lock.dead.Store(true)
			samples = append(samples, standby.waitLeading(b).Sub(at))
			leader.stop(b) // its Run ends; its release fails: a crash
			leader, lock = standby, slock
			standby, slock = start()
			time.Sleep(s.renew) // the new standby has seen the lease held
		}
		leader.stop(b)
		standby.stop(b)
		fmt.Fprintf(&out, "%-52s %9v %9v %9v  %14.1f %16.0f\n", s.name, pctl(samples, 50), pctl(samples, 99), slices.Max(samples).Round(time.Millisecond),
			float64(calls1-calls0)/10, (cpu1-cpu0)/10)
	}
	out.WriteString("With fewer than 100 samples p99 is the maximum. Script calls: EVAL/EVALSHA from INFO commandstats; redis CPU: used_cpu_sys + used_cpu_user (an idle redis-server's own timers included).\n")
	fmt.Fprint(os.Stdout, out.String())
}

// noRemaining hides how long a held lease has left, as a Lock that does
// not say: the standby polls every RetryInterval.
type noRemaining struct{ lease.Lock }

func (n noRemaining) TryAcquire(ctx context.Context, holder string, ttl time.Duration) (lease.Record, bool, error) {
	rec, ok, err := n.Lock.TryAcquire(ctx, holder, ttl)
	rec.Remaining = 0
	return rec, ok, err
}

// redisCost returns redis-server's script calls so far and its CPU time in
// microseconds.
func redisCost(b *testing.B, rc *redis.Client) (calls int64, cpuMicros float64) {
	ctx := context.Background()
	cs, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(cs, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			f := strings.TrimPrefix(strings.SplitN(line, ":", 2)[1], "calls=")
			n, _ := strconv.ParseInt(strings.SplitN(f, ",", 2)[0], 10, 64)
			calls += n
		}
	}
	cpu, err := rc.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(cpu, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if strings.HasPrefix(line, k) {
				v, _ := strconv.ParseFloat(strings.TrimPrefix(line, k), 64)
				cpuMicros += v * 1e6
			}
		}
	}
	return calls, cpuMicros
}
