package lease_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// pollOnly hides a Lock's Watcher: the Elector then only polls.
type pollOnly struct{ lease.Lock }

// BenchmarkHandover measures graceful handovers between two Electors with
// the binaries' default timings (TTL 2s, renew 300ms, retry 300ms) on a real
// redis-server: the time from the leader's shutdown (its Run's context
// cancelled, as on SIGTERM) to the standby's lead being called, over
// KJOB_HANDOVER_REPS repetitions (default 20) per mode, with and without
// release announcements. It prints p50/p99/max; run it with
//
//	KJOB_TEST_REQUIRE_REDIS=1 go test -run '^$' -bench Handover -benchtime 1x ./internal/store/lease/
//
// (the repetitions are inside; b.N is not used).
func BenchmarkHandover(b *testing.B) {
	reps := testenv.Reps(b, "KJOB_HANDOVER_REPS", 20)
	r := testenv.NewRedis(b)
	rc := r.Client()
	type row struct {
		mode    string
		samples []time.Duration
	}
	var rows []row
	for i, mode := range []string{"release announced (RedisLock Watcher)", "polling only (RetryInterval 300ms)"} {
		key := fmt.Sprintf("kjob:{bench%d}:producer-lease", i)
		watch := i == 0
		var subscribers int64
		if watch {
			subscribers = 2
		}
		next := 0
		start := func() *benchReplica {
			l, err := lease.NewRedisLock(rc, key)
			if err != nil {
				b.Fatal(err)
			}
			var lock lease.Lock = l
			if !watch {
				lock = pollOnly{l}
			}
			next++
			return startBenchReplica(b, lock, fmt.Sprintf("r%d", next))
		}
		leader := start()
		leader.waitLeading(b)
		standby := start()
		var samples []time.Duration
		for range reps {
			l, _ := lease.NewRedisLock(rc, key)
			waitSubscribers(b, rc, l, subscribers)
			// Shut down at a random point of the standby's poll cycle.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			at := time.Now()
			leader.stop(b)
			samples = append(samples, standby.waitLeading(b).Sub(at))
			leader, standby = standby, start()
		}
		leader.stop(b)
		standby.stop(b)
		rows = append(rows, row{mode, samples})
	}
	fmt.Fprintf(os.Stdout, "\nlease handover: leader's Run cancelled -> standby's lead called; %d repetitions per mode; TTL %v, renew %v, retry %v; redis-server on loopback\n",
		reps, lease.DefaultTTL, lease.DefaultRenewInterval, lease.DefaultRenewInterval)
	fmt.Fprintf(os.Stdout, "%-40s %10s %10s %10s\n", "mode", "p50", "p99", "max")
	for _, r := range rows {
		fmt.Fprintf(os.Stdout, "%-40s %10v %10v %10v\n", r.mode, pctl(r.samples, 50), pctl(r.samples, 99), slices.Max(r.samples).Round(10*time.Microsecond))
	}
	b.ReportMetric(float64(pctl(rows[0].samples, 50).Nanoseconds()), "ns-p50-announced")
}

// pctl returns the p-th percentile (nearest rank) of ds.
func pctl(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(10 * time.Microsecond)
}

type benchReplica struct {
	cancel  context.CancelFunc
	done    chan error
	leading chan time.Time
}

func startBenchReplica(b *testing.B, lock lease.Lock, name string) *benchReplica {
	return startBenchReplicaWith(b, lease.Config{Lock: lock, Holder: name})
}

func startBenchReplicaWith(b *testing.B, cfg lease.Config) *benchReplica {
	cfg.Logger = slog.New(slog.DiscardHandler)
	el, err := lease.NewElector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	br := &benchReplica{cancel: cancel, done: make(chan error, 1), leading: make(chan time.Time, 1)}
	go func() {
		br.done <- el.Run(ctx, func(ctx context.Context) error {
			br.leading <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	b.Cleanup(func() { br.stop(b) })
	return br
}

func (br *benchReplica) waitLeading(b *testing.B) time.Time {
	select {
	case at := <-br.leading:
		return at
	case <-time.After(30 * time.Second):
		b.Fatal("no replica started leading within 30s")
		return time.Time{}
	}
}

// stop cancels Run and waits for it; idempotent.
func (br *benchReplica) stop(b *testing.B) {
	br.cancel()
	select {
	case _, ok := <-br.done:
		if ok {
			close(br.done)
		}
	case <-time.After(15 * time.Second):
		b.Fatal("Run did not return within 15s of cancellation")
	}
}
