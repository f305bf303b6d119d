package perf

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/stagetrace"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// duration is how long the lateness, scale and idle workloads measure;
// KJOB_BENCH_DURATION overrides the default of 60s.
func duration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KJOB_BENCH_DURATION")); err == nil && d > 0 {
		return d
	}
	return 60 * time.Second
}

// waitStable waits until the consumer group is Stable (members joined and
// assigned).
func waitStable(b *testing.B, adm *kadm.Client, group string) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		gs, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			if g, ok := gs[group]; ok && g.State == "Stable" && len(g.Members) > 0 {
				return
			}
		}
		time.Sleep(5 * time.Millisecond) // polling the broker: there is no event to wait on
	}
	b.Fatalf("group %s not stable within 60s", group)
}

func writeSchedules(b *testing.B, yaml string) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "schedules.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// lateness collects durations from many goroutines.
type lateness struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *lateness) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

func (l *lateness) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ds)
}

func (l *lateness) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sortDurations(l.ds)
}

func reportLateness(b *testing.B, what string, l *lateness, settings string) {
	b.Helper()
	ds := l.sorted()
	if len(ds) == 0 {
		b.Fatalf("%s: no samples", what)
	}
	settings = fmt.Sprintf("%d samples; %s", len(ds), settings)
	report(b, what+" p50", ms(percentile(ds, 50)), "ms", settings)
	if len(ds) >= minSamples {
		report(b, what+" p99", ms(percentile(ds, 99)), "ms", settings)
	} else {
		b.Logf("%s p99: not reported: %d samples, fewer than %d (a p99 of fewer is the maximum)", what, len(ds), minSamples)
	}
	report(b, what+" max", ms(ds[len(ds)-1]), "ms", settings)
}

// BenchmarkLateness: 1 job, then 1,000 jobs at "@every 1s" (all due at the
// same instant each second) for the measured duration; a producer process (the
// leader) and one worker in this process with a no-op handler that records
// how long after its window's start it was called.
func BenchmarkLateness(b *testing.B) {
	for _, jobs := range []int{1, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			for range b.N {
				benchLateness(b, jobs, 4, time.Second, duration())
			}
		})
	}
}

// herdTicks is how many ticks BenchmarkHerd measures:
// KJOB_PEERS_HERD_TICKS, as bench/peers' herd, 10 by default: a p99
// over 10,000 samples.
func herdTicks() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_PEERS_HERD_TICKS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// BenchmarkHerd: 1,000 and 10,000 jobs due at the same instant every 10s
// ("*/10 * * * * *"), the herd workload of bench/peers (asynq, River,
// gocron), for herdTicks ticks: how long after its window's start each
// handler starts. make bench-peers runs it beside the peers.
func BenchmarkHerd(b *testing.B) {
	for _, jobs := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			for range b.N {
				benchLateness(b, jobs, 4, 10*time.Second, time.Duration(herdTicks())*10*time.Second)
			}
		})
	}
}

// benchLateness runs jobs jobs due at the same instant every every (1s or
// a whole number of seconds dividing a minute) for at least d.
func benchLateness(b *testing.B, jobs int, partitions int32, every, d time.Duration) {
	// At least minSamples windows, so that the p99 is one: a single job
	// runs 100 ticks whatever the duration.
	d = max(d, time.Duration((minSamples+jobs-1)/jobs)*every)
	d = d.Truncate(every)
	spec := "@every 1s"
	if every != time.Second {
		spec = fmt.Sprintf("*/%d * * * * *", every/time.Second)
	}
	brokers := broker(b)
	r := redis(b)
	_, adm := admin(b, brokers)
	topic := "lateness"

	var y strings.Builder
	y.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&y, "  - name: every-%05d\n    schedule: %q\n    handler: noop\n    catchup: 0s\n", i, spec)
	}
	schedules := writeSchedules(b, y.String())

	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var from, until time.Time
	lat, pub := &lateness{}, &lateness{}
	ticks := map[time.Time]*lateness{} // by window start: which tick was slow, and how
	mux := handler.NewMux()
	mux.HandleFunc("noop", func(_ context.Context, j *handler.Job) error {
		now := time.Now()
		at := j.ScheduledAt()
		mu.Lock()
		in := !at.Before(from) && at.Before(until)
		if in {
			t := ticks[at]
			if t == nil {
				t = &lateness{}
				ticks[at] = t
			}
			t.add(now.Sub(at))
		}
		mu.Unlock()
		if in {
			lat.add(now.Sub(at))
			pub.add(j.PublishedAt().Sub(at))
		}
		return nil
	})
	createTopic(b, adm, topic, partitions)
	w, err := worker.New(worker.Config{
		Brokers: brokers, Topic: topic, Group: "bench", Store: store, Handler: mux, WorkerID: "bench-worker", Namespace: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	waitStable(b, adm, "bench")

	p := start(b, "producer", "publishing as leader",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--partitions", fmt.Sprint(partitions),
		"--schedules", schedules, "--namespace", "bench", "--http-addr", "")
	p.wait(b, 60*time.Second, "leadership")
	// Measure whole seconds, starting two seconds after the leader began.
	mu.Lock()
	from = time.Now().Truncate(every).Add(2 * every)
	until = from.Add(d)
	mu.Unlock()
	b.ResetTimer()
	// The trace of the measured windows' way to their handlers (the
	// worker is in this process).
	// KJOB_BENCH_TRACE=1: the trace of the measured windows' way to their
	// handlers (the worker is in this process). Off by default: on, its
	// stamps add about 1 ms to the 1,000 jobs' p50 (3 rounds each,
	// 2026-11-29: 26.2-27.3 against 25.3-26.2 ms), which the figures
	// compared with a baseline or with the peers must not carry.
	var tr *stagetrace.Trace
	if os.Getenv("KJOB_BENCH_TRACE") == "1" {
		tr = stagetrace.Start(from, until)
		defer tr.Stop()
	}
	time.Sleep(time.Until(from)) // the workload is wall-clock time: windows fire each second
	cs0 := commandStats(b, r)
	time.Sleep(time.Until(until.Add(2 * time.Second)))
	if every > time.Second { // a 10,000 herd may run longer: wait for it, bounded
		deadline := until.Add(every)
		for len(lat.sorted()) < jobs*int(d/every) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // polling the handler's record: there is no event to wait on
		}
	}
	cs1 := commandStats(b, r)
	b.StopTimer()
	if tr != nil {
		tr.Stop()
	}
	want := jobs * int(d/every)
	settings := fmt.Sprintf("%d jobs %q for %v (%d windows due), %d partitions, producer process + 1 in-process worker (concurrency %d, its default), in-process no-op handler that records when it starts, log level info; %s",
		jobs, spec, d, want, partitions, defaultConcurrency, machine())
	if got := len(lat.sorted()); got != want {
		b.Errorf("%d windows executed in the measured period, want %d", got, want)
	}
	what := fmt.Sprintf("lateness %d jobs", jobs)
	if every != time.Second {
		what = fmt.Sprintf("herd %d jobs every %v", jobs, every)
	}
	reportLateness(b, what+": window start -> handler start", lat, settings)
	if every > time.Second {
		logTicks(ticks)
	}
	report(b, what+": Redis script calls per window", float64(scriptCalls(cs0, cs1))/float64(want), "calls/window",
		settings+"; EVAL/EVALSHA calls from INFO commandstats over the measured period and 2s after (claims, settlements, the lease's renewals)")
	reportLateness(b, what+": window start -> published_at", pub, settings)
	// Where the time went: each stage's distribution, since each window's
	// start (internal/base/stagetrace).
	if tr == nil {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ntrace of %d jobs %q, %d windows, time since each window's start (nearest rank):\n", jobs, spec, want)
	for _, s := range tr.Stages() {
		fmt.Fprintf(&sb, "  %s\n", s)
		if s.N >= minSamples {
			report(b, fmt.Sprintf("%s trace: window start -> %s p99", what, s.Stage), ms(s.P99), "ms",
				fmt.Sprintf("%d samples, max %.2f ms, p50 %.2f ms; %s", s.N, ms(s.Max), ms(s.P50), settings))
		}
	}
	fmt.Fprint(os.Stdout, sb.String())
}

// logTicks prints each tick's handler starts (since the windows' start):
// the first, the p50 and the last. At 1,000 jobs a tick is a tenth of
// the herd's samples, so one slow tick sets its p99; the first start
// tells a tick that began late (a timer, a pause of the process) from
// one whose waves of slots were slow.
func logTicks(ticks map[time.Time]*lateness) {
	at := make([]time.Time, 0, len(ticks))
	for t := range ticks {
		at = append(at, t)
	}
	slices.SortFunc(at, time.Time.Compare)
	// This process's garbage collections (the worker runs in it): a
	// cycle's pauses end in PauseEnd, its concurrent mark between them.
	var gc debug.GCStats
	debug.ReadGCStats(&gc)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\neach tick, time since its windows' start:\n")
	for _, t := range at {
		ds := ticks[t].sorted()
		cycles := 0
		for _, e := range gc.PauseEnd {
			if !e.Before(t.Add(-50*time.Millisecond)) && !e.After(t.Add(ds[len(ds)-1])) {
				cycles++
			}
		}
		fmt.Fprintf(&sb, "  tick %s: %d windows, handler start first %.2f / p50 %.2f / last %.2f ms; GC pauses in this process from 50 ms before to the last start: %d\n",
			t.Format("15:04:05"), len(ds), ms(ds[0]), ms(percentile(ds, 50)), ms(ds[len(ds)-1]), cycles)
	}
	// To standard output, as the trace: the benchmark's log keeps ten
	// lines.
	fmt.Fprint(os.Stdout, sb.String())
}

// BenchmarkSchedules: 100,000 schedules of mixed cron specs in one
// producer process: its resident memory, CPU use, and how late windows are
// published (published_at - window start, and when a read-committed
// consumer sees them).
func BenchmarkSchedules(b *testing.B) {
	for range b.N {
		benchSchedules(b, 100_000)
	}
}

func benchSchedules(b *testing.B, n int) {
	d := duration()
	brokers := broker(b)
	r := redis(b)
	_, adm := admin(b, brokers)
	topic := "scale"
	var y strings.Builder
	y.WriteString("jobs:\n")
	for i := range n {
		spec, zone := mixedSpec(i)
		fmt.Fprintf(&y, "  - name: job-%06d\n    schedule: %q\n    timezone: %s\n    handler: noop\n    catchup: 0s\n", i, spec, zone)
	}
	schedules := writeSchedules(b, y.String())
	createTopic(b, adm, topic, 4)

	// A read-committed consumer notes when each window becomes visible.
	var from, until time.Time
	var mu sync.Mutex
	pub, vis := &lateness{}, &lateness{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				m, err := jobmsg.FromRecord(rec)
				if err != nil {
					return
				}
				mu.Lock()
				in := !m.ScheduledAt.Before(from) && m.ScheduledAt.Before(until)
				mu.Unlock()
				if in {
					pub.add(m.PublishedAt.Sub(m.ScheduledAt))
					vis.add(now.Sub(m.ScheduledAt))
				}
			})
		}
	}()

	bins(b) // build the binaries first: start-up is measured from the process start
	started := time.Now()
	p := startTracking(b, "producer", nil, "publishing as leader", []string{"schedule changed"},
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--partitions", "4",
		"--schedules", schedules, "--namespace", "bench", "--http-addr", "")
	p.wait(b, 5*time.Minute, "leadership")
	ready := time.Since(started)
	// The leader imports the file into the schedules topic after it
	// starts leading (issue 23), logging "schedule changed" for each job
	// once it is in the timer heap: measure from then.
	imported := p.waitCount(b, "schedule changed", n, 5*time.Minute).last.at.Sub(started)
	pid := p.cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the start-up allocations settle before measuring
	mu.Lock()
	from = time.Now().Truncate(time.Second).Add(time.Second)
	until = from.Add(d)
	mu.Unlock()
	time.Sleep(time.Until(from))
	u0 := readUsage(b, pid)
	b.ResetTimer()
	time.Sleep(time.Until(until)) // the workload is wall-clock time
	u1 := readUsage(b, pid)
	b.StopTimer()
	time.Sleep(2 * time.Second) // windows due just before until become visible
	settings := fmt.Sprintf("%d schedules (mixed 6-field, @every, hourly, daily; 4 zones), measured over %v, 4 partitions, producer process; %s", n, d, machine())
	report(b, "100k schedules: producer start-up to leading", ready.Seconds(), "s", settings)
	report(b, "100k schedules: producer start-up to every job imported and scheduled", imported.Seconds(), "s", settings)
	report(b, "100k schedules: producer RSS", float64(u1.rss)/(1<<20), "MiB", settings)
	report(b, "100k schedules: producer peak RSS", float64(u1.hwm)/(1<<20), "MiB", settings)
	report(b, "100k schedules: producer CPU", 100*float64(u1.cpu-u0.cpu)/float64(d), "% of one core", settings)
	reportLateness(b, "100k schedules: publish lateness (published_at - start)", pub, settings)
	reportLateness(b, "100k schedules: visible lateness (read-committed consumer)", vis, settings)
}

// mixedSpec returns the i-th schedule of the 100k-schedules workloads and
// its time zone: a quarter each of 6-field specs (a second of every fifth
// minute), @every 60s..299s, hourly and daily specs, in four zones.
func mixedSpec(i int) (spec, zone string) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}
	switch i % 4 {
	case 0: // a second of every fifth minute
		spec = fmt.Sprintf("%d %d/5 * * * *", i%60, (i/4)%5)
	case 1: // elapsed time, 1 to 5 minutes
		spec = fmt.Sprintf("@every %ds", 60+(i/4)%240)
	case 2: // hourly at a minute
		spec = fmt.Sprintf("%d * * * *", (i/4)%60)
	case 3: // daily at a time in a zone
		spec = fmt.Sprintf("%d %d * * *", (i/4)%60, (i/240)%24)
	}
	return spec, zones[i%len(zones)]
}

// BenchmarkIdle: an idle leading producer (one daily job) and an idle
// worker, each its own process: CPU and resident memory over the measured
// duration.
func BenchmarkIdle(b *testing.B) {
	for range b.N {
		benchIdle(b)
	}
}

func benchIdle(b *testing.B) {
	d := duration()
	brokers := broker(b)
	r := redis(b)
	_, adm := admin(b, brokers)
	schedules := writeSchedules(b, "jobs:\n  - name: nightly\n    schedule: \"0 3 * * *\"\n    handler: log\n")
	common := []string{"--brokers", brokers[0], "--redis-url", r.URL(), "--namespace", "bench", "--http-addr", ""}
	p := start(b, "producer", "publishing as leader", append([]string{"--schedules", schedules}, common...)...)
	p.wait(b, 60*time.Second, "leadership")
	// The same producer built with -tags nokubernetes, leading its own
	// deployment (namespace and transactional id).
	leanArgs := []string{"--schedules", schedules, "--brokers", brokers[0], "--redis-url", r.URL(), "--namespace", "bench-lean", "--http-addr", ""}
	pl := start(b, "producer-lean", "publishing as leader", leanArgs...)
	pl.wait(b, 60*time.Second, "leadership")
	w := start(b, "worker", "", append([]string{"--group", "bench"}, common...)...)
	waitStable(b, adm, "bench")
	time.Sleep(5 * time.Second) // let start-up work finish before measuring
	pu0, wu0, lu0 := readUsage(b, p.cmd.Process.Pid), readUsage(b, w.cmd.Process.Pid), readUsage(b, pl.cmd.Process.Pid)
	b.ResetTimer()
	time.Sleep(d) // the workload is idleness over wall-clock time
	pu1, wu1, lu1 := readUsage(b, p.cmd.Process.Pid), readUsage(b, w.cmd.Process.Pid), readUsage(b, pl.cmd.Process.Pid)
	b.StopTimer()
	settings := fmt.Sprintf("over %v after start-up; lease TTL 2s renewed every 300ms; group heartbeat 1s; commit interval 1s; defaults otherwise; %s", d, machine())
	report(b, "idle leading producer CPU", 100*float64(pu1.cpu-pu0.cpu)/float64(d), "% of one core", settings)
	report(b, "idle leading producer RSS", float64(pu1.rss)/(1<<20), "MiB", settings)
	report(b, "idle leading producer RSS, anonymous only (without the mapped binary)", float64(pu1.anon)/(1<<20), "MiB", settings)
	report(b, "idle leading producer built -tags nokubernetes: CPU", 100*float64(lu1.cpu-lu0.cpu)/float64(d), "% of one core", settings)
	report(b, "idle leading producer built -tags nokubernetes: RSS", float64(lu1.rss)/(1<<20), "MiB", settings)
	report(b, "idle worker CPU", 100*float64(wu1.cpu-wu0.cpu)/float64(d), "% of one core", settings)
	report(b, "idle worker RSS", float64(wu1.rss)/(1<<20), "MiB", settings)
	report(b, "idle worker RSS, anonymous only", float64(wu1.anon)/(1<<20), "MiB", settings)
}
