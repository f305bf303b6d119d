package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/robfig/cron/v3"
)

// The herd: herdJobs jobs due at the same instant every herdEvery (the
// top of the hour's load, "every job at 0 * * * *", compressed), measured
// over herdTicks ticks. kjob runs the same workload in test/perf
// (BenchmarkHerd); make bench-peers runs both.
const (
	herdJobs  = 1000
	herdEvery = 10 * time.Second
	// herdConcurrency is kjob's default --concurrency, given to asynq and
	// River; gocron runs every job in a goroutine of its own.
	herdConcurrency = 100
)

// herdTicks is KJOB_PEERS_HERD_TICKS, 10 by default: 10,000 samples.
func herdTicks() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_PEERS_HERD_TICKS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// herdRuns records every handler run of the herd: which job, which tick,
// when it started.
type herdRuns struct {
	mu   sync.Mutex
	runs map[string][]time.Duration // "<job>@<due unix>": lateness of each run
}

func newHerdRuns() *herdRuns { return &herdRuns{runs: map[string][]time.Duration{}} }

func (h *herdRuns) ran(job string, due, started time.Time) {
	k := job + "@" + strconv.FormatInt(due.Unix(), 10)
	h.mu.Lock()
	h.runs[k] = append(h.runs[k], started.Sub(due))
	h.mu.Unlock()
}

// tickAtOrBefore is the herd's tick at or before t: with lateness under
// herdEvery, the tick a run belongs to.
func tickAtOrBefore(t time.Time) time.Time { return t.Truncate(herdEvery) }

// measure waits for the ticks in [from, from + ticks*herdEvery) to run
// (bounded) and reports the lateness of each tick's first run of each
// job, the runs that are duplicates and the windows that never ran.
func (h *herdRuns) measure(b *testing.B, peer string, from time.Time, ticks int, settings string) {
	b.Helper()
	until := from.Add(time.Duration(ticks) * herdEvery)
	want := herdJobs * ticks
	count := func() (first []time.Duration, dups int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for k, ls := range h.runs {
			sec, _ := strconv.ParseInt(k[strings.LastIndexByte(k, '@')+1:], 10, 64)
			if due := time.Unix(sec, 0); due.Before(from) || !due.Before(until) {
				continue
			}
			first = append(first, slices.Min(ls))
			dups += len(ls) - 1
		}
		return first, dups
	}
	deadline := until.Add(herdEvery + 30*time.Second)
	time.Sleep(time.Until(until))
	for {
		first, _ := count()
		if len(first) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the handlers' record, bounded by deadline
	}
	time.Sleep(2 * time.Second) // late duplicates
	ds, dups := count()
	if len(ds) == 0 {
		b.Fatalf("%s: no herd run started", peer)
	}
	missing := want - len(ds)
	slices.Sort(ds)
	pct := func(p float64) time.Duration {
		return ds[min(max(int(math.Ceil(p/100*float64(len(ds)))), 1), len(ds))-1]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	settings = fmt.Sprintf("%d samples (%d jobs x %d ticks every %v; first run of each), %d missing; %s", len(ds), herdJobs, ticks, herdEvery, missing, settings)
	what := fmt.Sprintf("herd %d jobs every %v, %s: due -> handler start", herdJobs, herdEvery, peer)
	report(b, what+" p50", ms(pct(50)), "ms", settings)
	report(b, what+" p99", ms(pct(99)), "ms", settings)
	report(b, what+" max", ms(ds[len(ds)-1]), "ms", settings)
	report(b, fmt.Sprintf("herd %d jobs every %v, %s: duplicate runs", herdJobs, herdEvery, peer), float64(dups), "runs", settings+"; runs of a job's tick after its first")
	if missing > 0 {
		b.Errorf("%s: %d of %d herd windows never ran", peer, missing, want)
	}
}

// herdStart is the first measured tick: the second tick after now, so
// that setup and the first (warm-up) tick are left out.
func herdStart() time.Time { return time.Now().Truncate(herdEvery).Add(2 * herdEvery) }

// BenchmarkHerd runs the herd on asynq (1 server, Concurrency 100, 1
// Scheduler), River (1 client, MaxWorkers 100, 1,000 periodic jobs on a
// cron schedule) and gocron (2 schedulers in this process, as 2 replicas,
// with a Redis lock per job, as gocron's distributed locking asks).
func BenchmarkHerd(b *testing.B) {
	b.Run("peer=asynq", func(b *testing.B) {
		for range b.N {
			asynqHerd(b)
		}
	})
	b.Run("peer=river", func(b *testing.B) {
		for range b.N {
			riverHerd(b)
		}
	})
	b.Run("peer=gocron", func(b *testing.B) {
		for range b.N {
			gocronHerd(b)
		}
	})
}

func asynqHerd(b *testing.B) {
	b.StopTimer()
	rs := startRedis(b)
	opt := asynq.RedisClientOpt{Addr: rs.addr}
	h := newHerdRuns()
	mux := asynq.NewServeMux()
	mux.HandleFunc("herd", func(_ context.Context, t *asynq.Task) error {
		now := time.Now()
		h.ran(string(t.Payload()), tickAtOrBefore(now), now)
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: herdConcurrency, Queues: map[string]int{"default": 1}, LogLevel: asynq.WarnLevel})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	sched := asynq.NewScheduler(opt, &asynq.SchedulerOpts{LogLevel: asynq.WarnLevel})
	// robfig/cron's "@every 10s" fires 10s after the whole second it was
	// registered in, then every 10s: register every job within one
	// second whose number is a multiple of 10 so all fire on the herd's
	// ticks.
	time.Sleep(time.Until(time.Now().Truncate(herdEvery).Add(herdEvery + 10*time.Millisecond)))
	regStart := time.Now()
	for i := range herdJobs {
		if _, err := sched.Register("@every 10s", asynq.NewTask("herd", fmt.Appendf(nil, "herd-%04d", i))); err != nil {
			b.Fatal(err)
		}
	}
	if took := time.Since(regStart); took > 900*time.Millisecond {
		b.Fatalf("registering %d periodic tasks took %v: they straddle a second, the herd would split", herdJobs, took)
	}
	if err := sched.Start(); err != nil {
		b.Fatal(err)
	}
	defer sched.Shutdown()
	from := herdStart()
	b.StartTimer()
	settings := fmt.Sprintf("asynq %s, Config.Concurrency %d, 1 server and 1 Scheduler in the bench process, %d tasks registered \"@every 10s\" in one second, so they fire on the same whole seconds; due = that tick; no-op handler; "+
		"redis-server %s on loopback without persistence; %s", version("github.com/hibiken/asynq"), herdConcurrency, herdJobs, rs.version, machine())
	h.measure(b, "asynq", from, herdTicks(), settings)
	b.StopTimer()
}

// herdArgs is the River job of the herd.
type herdArgs struct {
	Job string `json:"job"`
}

func (herdArgs) Kind() string { return "herd" }

type herdWorker struct {
	river.WorkerDefaults[herdArgs]
	h *herdRuns
}

func (w *herdWorker) Work(_ context.Context, job *river.Job[herdArgs]) error {
	now := time.Now()
	w.h.ran(job.Args.Job, job.ScheduledAt, now)
	return nil
}

func riverHerd(b *testing.B) {
	b.StopTimer()
	ticks := herdTicks()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ticks+6)*herdEvery+5*time.Minute)
	defer cancel()
	pool, pgVersion := riverDatabase(ctx, b)
	every, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse("*/10 * * * * *")
	if err != nil {
		b.Fatal(err)
	}
	h := newHerdRuns()
	workers := river.NewWorkers()
	river.AddWorker(workers, &herdWorker{h: h})
	var periodic []*river.PeriodicJob
	for i := range herdJobs {
		job := fmt.Sprintf("herd-%04d", i)
		periodic = append(periodic, river.NewPeriodicJob(every, func() (river.JobArgs, *river.InsertOpts) { return herdArgs{Job: job}, nil }, nil))
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: herdConcurrency}},
		Workers:      workers,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		PeriodicJobs: periodic,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := client.StopAndCancel(sctx); err != nil {
			b.Errorf("stop river client: %v", err)
		}
	}()
	from := herdStart()
	b.StartTimer()
	settings := fmt.Sprintf("River %s (riverpgxv5), QueueConfig.MaxWorkers %d, 1 client in the bench process (the leader, which enqueues periodic jobs), %d periodic jobs on the cron schedule \"*/10 * * * * *\"; due = the job's scheduled_at; no-op handler; "+
		"PostgreSQL %s on loopback; %s", version("github.com/riverqueue/river"), herdConcurrency, herdJobs, pgVersion, machine())
	h.measure(b, "River", from, ticks, settings)
	b.StopTimer()
}

// redisLocker is a gocron.Locker on Redis with the semantics of gocron's
// Redis lockers (gocron-redis-lock, on redsync): a lock per job name,
// SET NX with an 8s expiry (redsync's default), released by its holder
// (compare and delete) when the job's run returns. A replica whose timer
// fires after the other's run returned finds the lock free and runs the
// job again: gocron's duplicates.
type redisLocker struct{ rdb *redis.Client }

var errLocked = errors.New("locked by another replica")

var unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func (l redisLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	var buf [16]byte
	_, _ = rand.Read(buf[:])
	tok := hex.EncodeToString(buf[:])
	ok, err := l.rdb.SetNX(ctx, "gocron:lock:"+key, tok, 8*time.Second).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errLocked
	}
	return redisLock{l.rdb, "gocron:lock:" + key, tok}, nil
}

type redisLock struct {
	rdb      *redis.Client
	key, tok string
}

func (l redisLock) Unlock(ctx context.Context) error {
	return unlockScript.Run(ctx, l.rdb, []string{l.key}, l.tok).Err()
}

func gocronHerd(b *testing.B) {
	b.StopTimer()
	rs := startRedis(b)
	h := newHerdRuns()
	for r := range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: rs.addr})
		defer rdb.Close()
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(redisLocker{rdb}), gocron.WithLogger(gocron.NewLogger(gocron.LogLevelError)))
		if err != nil {
			b.Fatal(err)
		}
		for i := range herdJobs {
			job := fmt.Sprintf("herd-%04d", i)
			if _, err := s.NewJob(gocron.CronJob("*/10 * * * * *", true), gocron.NewTask(func() {
				now := time.Now()
				h.ran(job, tickAtOrBefore(now), now)
			}), gocron.WithName(job)); err != nil {
				b.Fatalf("replica %d: %v", r, err)
			}
		}
		s.Start()
		defer func() { _ = s.Shutdown() }()
	}
	from := herdStart()
	b.StartTimer()
	settings := fmt.Sprintf("gocron %s, 2 schedulers in the bench process as 2 replicas, each with the %d jobs on CronJob(\"*/10 * * * * *\", withSeconds) and a Redis lock per job "+
		"(SET NX, 8s expiry, released when the run returns, as gocron's Redis lockers do); a goroutine per run (gocron's default, no limit); due = the tick; no-op handler; redis-server %s on loopback; %s",
		version("github.com/go-co-op/gocron/v2"), herdJobs, rs.version, machine())
	h.measure(b, "gocron", from, herdTicks(), settings)
	b.StopTimer()
}
