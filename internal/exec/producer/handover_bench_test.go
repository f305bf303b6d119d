package producer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// pollOnly hides a Lock's Watcher: the Elector then only polls.
type pollOnly struct{ lease.Lock }

// mark is a log message that BenchmarkHandover times.
type mark struct {
	msg string
	at  time.Time
}

// markHandler passes the records the benchmark times to a channel and
// drops the rest.
type markHandler struct{ ch chan mark }

func (h markHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h markHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "lease acquired" || r.Message == "publishing as leader" {
		select {
		case h.ch <- mark{r.Message, r.Time}:
		default:
		}
	}
	return nil
}
func (h markHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h markHandler) WithGroup(string) slog.Handler      { return h }

// BenchmarkHandover measures the graceful handover of two producers, each
// with a Redis lease Elector at the binaries' defaults (TTL 2s, renew and
// retry 300ms), on an in-process kfake broker and a real redis-server: from
// the leader's shutdown (its Run's context cancelled, as SIGTERM does in
// cmd/producer) to the standby logging "lease acquired" and then
// "publishing as leader" (fenced, state read, timers set). It runs
// KJOB_HANDOVER_REPS repetitions (default 20) with release announcements
// (RedisLock's Watcher) and with polling only, and prints p50/p99/max:
//
//	KJOB_TEST_REQUIRE_REDIS=1 go test -run '^$' -bench Handover -benchtime 1x ./internal/exec/producer/
//
// (the repetitions are inside; b.N is not used).
func BenchmarkHandover(b *testing.B) {
	reps := testenv.Reps(b, "KJOB_HANDOVER_REPS", 20)
	brokers := testenv.Brokers(b)
	rc := testenv.NewRedis(b).Client()
	type row struct {
		mode              string
		acquired, leading []time.Duration
	}
	var rows []row
	for i, mode := range []string{"release announced (RedisLock Watcher)", "polling only (RetryInterval 1s)"} {
		watch := i == 0
		key := fmt.Sprintf("kjob:{bench%d}:producer-lease", i)
		js := jobsB(b, "@every 1s")
		next := 0
		start := func() *benchProducer {
			l, err := lease.NewRedisLock(rc, key)
			if err != nil {
				b.Fatal(err)
			}
			var lock lease.Lock = l
			if !watch {
				lock = pollOnly{l}
			}
			next++
			marks := make(chan mark, 64)
			log := slog.New(markHandler{marks})
			el, err := lease.NewElector(lease.Config{Lock: lock, Holder: fmt.Sprintf("p%d", next), Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			p, err := producer.New(producer.Config{
				Brokers: brokers, Jobs: js, Elector: el, Logger: log,
				Topic: fmt.Sprintf("bench%d.windows", i), TransactionalID: fmt.Sprintf("bench%d", i),
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			bp := &benchProducer{cancel: cancel, done: make(chan error, 1), marks: marks}
			go func() { bp.done <- p.Run(ctx) }()
			b.Cleanup(func() { bp.stop(b) })
			return bp
		}
		leader := start()
		leader.wait(b, "publishing as leader")
		standby := start()
		r := row{mode: mode}
		for range reps {
			waitSubscribersB(b, rc, key, watch)
			// Shut down at a random point of the standby's poll cycle.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			at := time.Now()
			leader.stop(b)
			r.acquired = append(r.acquired, standby.wait(b, "lease acquired").Sub(at))
			r.leading = append(r.leading, standby.wait(b, "publishing as leader").Sub(at))
			leader, standby = standby, start()
		}
		leader.stop(b)
		standby.stop(b)
		rows = append(rows, r)
	}
	fmt.Fprintf(os.Stdout, "\nproducer handover: leader's Run cancelled (SIGTERM) -> standby's \"lease acquired\" / \"publishing as leader\"; %d repetitions per mode\n"+
		"lease TTL %v, renew %v, retry %v; in-process kfake broker, redis-server on loopback\n", reps, lease.DefaultTTL, lease.DefaultRenewInterval, lease.DefaultRenewInterval)
	fmt.Fprintf(os.Stdout, "%-40s %12s %12s %12s %12s %12s\n", "mode", "acquired p50", "acquired p99", "leading p50", "leading p99", "leading max")
	for _, r := range rows {
		fmt.Fprintf(os.Stdout, "%-40s %12v %12v %12v %12v %12v\n", r.mode,
			pctl(r.acquired, 50), pctl(r.acquired, 99), pctl(r.leading, 50), pctl(r.leading, 99), pctl(r.leading, 100))
	}
	b.ReportMetric(float64(pctl(rows[0].leading, 50).Nanoseconds()), "ns-p50-announced")
}

// pctl returns the p-th percentile (nearest rank) of ds.
func pctl(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(10 * time.Microsecond)
}

func jobsB(b *testing.B, spec string) []*schedule.Job {
	b.Helper()
	f, err := schedule.Parse("bench.yaml", fmt.Appendf(nil, "jobs:\n  - name: h\n    schedule: %q\n    handler: log\n", spec))
	if err != nil {
		b.Fatal(err)
	}
	return f.Jobs
}

// waitSubscribersB waits, when watch is set, until both producers' Electors
// subscribe to the lease's release channel.
func waitSubscribersB(b *testing.B, rc *redis.Client, key string, watch bool) {
	if !watch {
		return
	}
	l, err := lease.NewRedisLock(rc, key)
	if err != nil {
		b.Fatal(err)
	}
	testenv.Eventually(b, 10*time.Second, func() bool {
		m, err := rc.PubSubNumSub(context.Background(), l.Channel()).Result()
		return err == nil && m[l.Channel()] >= 2
	}, "the producers did not subscribe to %s", l.Channel())
}

type benchProducer struct {
	cancel context.CancelFunc
	done   chan error
	marks  chan mark
}

// wait returns the time of the replica's next log record with msg.
func (bp *benchProducer) wait(b *testing.B, msg string) time.Time {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-bp.marks:
			if m.msg == msg {
				return m.at
			}
		case <-deadline:
			b.Fatalf("no %q within 30s", msg)
		}
	}
}

// stop cancels Run and waits for it; idempotent.
func (bp *benchProducer) stop(b *testing.B) {
	bp.cancel()
	select {
	case _, ok := <-bp.done:
		if ok {
			close(bp.done)
		}
	case <-time.After(20 * time.Second):
		b.Fatal("producer did not stop within 20s of cancellation")
	}
}
