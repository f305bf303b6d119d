package peers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// holConcurrency is the concurrency of the head-of-line workload, kjob's
// default --concurrency.
const holConcurrency = 100

// holDuration is how long the slow task holds, kjob's measured duration:
// KJOB_BENCH_DURATION (as make bench's BENCH_DURATION sets it), 60s by
// default, and at least 102s, so that the periodic task runs at least 100
// times meanwhile (a nearest-rank p99 of fewer is the maximum).
func holDuration() time.Duration {
	d := 60 * time.Second
	if v, err := time.ParseDuration(os.Getenv("KJOB_BENCH_DURATION")); err == nil && v > 0 {
		d = v
	}
	return max(d, 102*time.Second)
}

// starts collects, per periodic run, when it was due and when its
// handler started.
type starts struct {
	mu      sync.Mutex
	due     map[string]time.Time
	started map[string]time.Time
}

func newStarts() *starts {
	return &starts{due: map[string]time.Time{}, started: map[string]time.Time{}}
}

func (s *starts) setDue(id string, t time.Time) {
	s.mu.Lock()
	s.due[id] = t
	s.mu.Unlock()
}

func (s *starts) setStarted(id string, t time.Time) {
	s.mu.Lock()
	if _, ok := s.started[id]; !ok {
		s.started[id] = t
	}
	s.mu.Unlock()
}

// lateness returns the sorted start - due of the runs due in [from,
// until) whose handler started.
func (s *starts) lateness(from, until time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for id, due := range s.due {
		st, ok := s.started[id]
		if ok && !due.Before(from) && due.Before(until) {
			out = append(out, st.Sub(due))
		}
	}
	slices.Sort(out)
	return out
}

func (s *starts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.started)
}

// measureHeadOfLine waits for the fast runs due while the slow task runs
// (from the second after slowStart to slowStart+hold) and reports their
// lateness.
func measureHeadOfLine(b *testing.B, peer string, s *starts, slowStart time.Time, hold time.Duration, settings string) {
	b.Helper()
	from := slowStart.Truncate(time.Second).Add(time.Second)
	until := slowStart.Add(hold).Truncate(time.Second)
	want := int(until.Sub(from) / time.Second)
	deadline := slowStart.Add(hold + 30*time.Second)
	for len(s.lateness(from, until)) < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // bounded by deadline
	}
	ds := s.lateness(from, until)
	if len(ds) == 0 {
		b.Fatalf("%s: no periodic run due while the slow task ran started its handler", peer)
	}
	if len(ds) < want-1 { // a run may straddle the boundaries of an interval schedule
		b.Errorf("%s: %d periodic runs started of the %d due while the slow task ran", peer, len(ds), want)
	}
	// Nearest rank: the smallest sample with at least p% at or below it.
	pct := func(p float64) time.Duration {
		return ds[min(max(int(math.Ceil(p/100*float64(len(ds)))), 1), len(ds))-1]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	settings = fmt.Sprintf("%d samples; %s", len(ds), settings)
	what := fmt.Sprintf("head-of-line, %s, concurrency %d: fast task due -> handler start, beside a %v handler", peer, holConcurrency, hold)
	report(b, what+" p50", ms(pct(50)), "ms", settings)
	report(b, what+" p99", ms(pct(99)), "ms", settings)
	report(b, what+" max", ms(ds[len(ds)-1]), "ms", settings)
}

// BenchmarkAsynqHeadOfLine: one asynq server (Concurrency 100) runs a
// task that sleeps for the measured duration beside a task its Scheduler
// enqueues "@every 1s": how long after its tick each periodic task's
// handler starts while the slow one runs. The tick is the whole second
// the scheduler enqueued it in (robfig/cron's @every fires on whole
// seconds).
func BenchmarkAsynqHeadOfLine(b *testing.B) {
	for range b.N {
		asynqHeadOfLine(b)
	}
}

func asynqHeadOfLine(b *testing.B) {
	b.StopTimer()
	hold := holDuration()
	rs := startRedis(b)
	opt := asynq.RedisClientOpt{Addr: rs.addr}
	s := newStarts()
	slowStarted := make(chan time.Time, 1)
	mux := asynq.NewServeMux()
	mux.HandleFunc("fast", func(ctx context.Context, _ *asynq.Task) error {
		now := time.Now()
		if id, ok := asynq.GetTaskID(ctx); ok {
			s.setStarted(id, now)
		}
		return nil
	})
	mux.HandleFunc("slow", func(ctx context.Context, _ *asynq.Task) error {
		select {
		case slowStarted <- time.Now():
		default:
		}
		return sleepCtx(ctx, hold)
	})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: holConcurrency, Queues: map[string]int{"default": 1}, LogLevel: asynq.WarnLevel})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	sched := asynq.NewScheduler(opt, &asynq.SchedulerOpts{
		LogLevel: asynq.WarnLevel,
		PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
			if err == nil {
				s.setDue(info.ID, time.Now().Truncate(time.Second))
			}
		},
	})
	if _, err := sched.Register("@every 1s", asynq.NewTask("fast", nil)); err != nil {
		b.Fatal(err)
	}
	if err := sched.Start(); err != nil {
		b.Fatal(err)
	}
	defer sched.Shutdown()
	waitFor(b, 30*time.Second, "the periodic task's first runs", func() (bool, error) { return s.count() >= 2, nil })

	client := asynq.NewClient(opt)
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask("slow", nil), asynq.Timeout(hold+time.Minute), asynq.MaxRetry(0)); err != nil {
		b.Fatal(err)
	}
	var slowStart time.Time
	select {
	case slowStart = <-slowStarted:
	case <-time.After(30 * time.Second):
		b.Fatal("the slow task did not start within 30s")
	}
	b.StartTimer()
	settings := fmt.Sprintf("asynq %s, Config.Concurrency %d, 1 server and 1 Scheduler in the bench process; a task sleeping %v enqueued once beside a task the Scheduler enqueues @every 1s; "+
		"due = the whole second the Scheduler enqueued it in; runs due while the slow task runs; defaults otherwise, redis-server %s on loopback without persistence; %s",
		version("github.com/hibiken/asynq"), holConcurrency, hold, rs.version, machine())
	measureHeadOfLine(b, "asynq", s, slowStart, hold, settings)
	b.StopTimer()
}

// holArgs are the River jobs of the head-of-line workload.
type holArgs struct {
	Slow bool `json:"slow"`
}

func (holArgs) Kind() string { return "hol" }

type holWorker struct {
	river.WorkerDefaults[holArgs]
	hold        time.Duration
	s           *starts
	slowStarted chan time.Time
}

func (w *holWorker) Work(ctx context.Context, job *river.Job[holArgs]) error {
	now := time.Now()
	if job.Args.Slow {
		select {
		case w.slowStarted <- now:
		default:
		}
		return sleepCtx(ctx, w.hold)
	}
	id := fmt.Sprint(job.ID)
	w.s.setDue(id, job.ScheduledAt)
	w.s.setStarted(id, now)
	return nil
}

// BenchmarkRiverHeadOfLine: one River client (MaxWorkers 100) runs a job
// that sleeps for the measured duration beside a periodic job
// (PeriodicInterval 1s): how long after its scheduled_at each periodic
// job's handler starts while the slow one runs.
func BenchmarkRiverHeadOfLine(b *testing.B) {
	for range b.N {
		riverHeadOfLine(b)
	}
}

func riverHeadOfLine(b *testing.B) {
	b.StopTimer()
	hold := holDuration()
	ctx, cancel := context.WithTimeout(context.Background(), hold+5*time.Minute)
	defer cancel()
	pool, pgVersion := riverDatabase(ctx, b)
	s := newStarts()
	w := &holWorker{hold: hold, s: s, slowStarted: make(chan time.Time, 1)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:     map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: holConcurrency}},
		Workers:    workers,
		JobTimeout: hold + time.Minute,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Second),
			func() (river.JobArgs, *river.InsertOpts) { return holArgs{}, nil }, nil)},
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
	waitFor(b, 60*time.Second, "the periodic job's first runs (River elects a leader first)", func() (bool, error) { return s.count() >= 2, nil })
	if _, err := client.Insert(ctx, holArgs{Slow: true}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
		b.Fatal(err)
	}
	var slowStart time.Time
	select {
	case slowStart = <-w.slowStarted:
	case <-time.After(30 * time.Second):
		b.Fatal("the slow job did not start within 30s")
	}
	b.StartTimer()
	settings := fmt.Sprintf("River %s (riverpgxv5), QueueConfig.MaxWorkers %d, 1 client in the bench process (the leader, which enqueues periodic jobs); a job sleeping %v inserted once beside a periodic job (PeriodicInterval 1s); "+
		"due = the job's scheduled_at; runs due while the slow job runs; defaults otherwise, PostgreSQL %s on loopback; %s",
		version("github.com/riverqueue/river"), holConcurrency, hold, pgVersion, machine())
	measureHeadOfLine(b, "River", s, slowStart, hold, settings)
	b.StopTimer()
}
