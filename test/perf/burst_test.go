package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// defaultConcurrency is the worker's --concurrency / KJOB_CONCURRENCY
// default (issue 13), passed explicitly so each row names it.
const defaultConcurrency = 100

// burstWindows is the backlog size; KJOB_BENCH_BURST overrides it.
func burstWindows() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_BENCH_BURST")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// BenchmarkBurst: a backlog of windows already in the topic (as after a
// replay or a backfill), the built-in noop handler (returns nil at once),
// one worker process (cmd/worker) against the embedded broker
// and a real redis-server: windows per second from the worker's partition
// assignment to a group lag of 0, so it includes the Redis dedupe round
// trips and the offset commits. KJOB_BENCH_WORKER_ENV adds to the worker's
// environment (space-separated, e.g. GOMAXPROCS=1); the rows name it.
func BenchmarkBurst(b *testing.B) {
	for _, tc := range []struct {
		partitions int32
		logLevel   string
	}{{1, "info"}, {4, "info"}, {4, "warn"}} {
		b.Run(fmt.Sprintf("partitions=%d/log=%s", tc.partitions, tc.logLevel), func(b *testing.B) {
			for range b.N {
				burst(b, burstSpec{
					figure: "burst", prefix: "burst", windows: burstWindows(), jobs: 100, handler: "noop", payload: json.RawMessage(`{}`),
					handlerText: "built-in noop handler", partitions: tc.partitions, logLevel: tc.logLevel, cpuRows: true,
					env: append([]string{fmt.Sprintf("KJOB_CONCURRENCY=%d", defaultConcurrency)}, strings.Fields(os.Getenv("KJOB_BENCH_WORKER_ENV"))...),
				})
			}
		})
	}
}

// BenchmarkIOBurst: 2,000 windows of 2,000 different jobs already in the
// topic, the built-in sleep handler sleeping 50 ms (an I/O-bound webhook),
// one worker process with KJOB_CONCURRENCY=100: windows per second to a
// committed lag of 0 and to the last window done. asynq and River run the
// same workload in bench/peers (make bench-peers).
func BenchmarkIOBurst(b *testing.B) {
	for _, partitions := range []int32{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			for range b.N {
				burst(b, burstSpec{
					figure: "I/O burst", prefix: "io", windows: 2000, jobs: 2000, handler: "sleep", payload: json.RawMessage(`{"duration":"50ms"}`),
					handlerText: `built-in sleep handler, payload {"duration":"50ms"}`, partitions: partitions, logLevel: "info",
					env: []string{fmt.Sprintf("KJOB_CONCURRENCY=%d", defaultConcurrency)},
				})
			}
		})
	}
}

// burstSpec is one backlog workload.
type burstSpec struct {
	figure      string // prefix of the rows' figures
	prefix      string // of the jobs' names
	windows     int    // records in the backlog
	jobs        int    // distinct jobs; window i belongs to job i%jobs
	handler     string // built-in handler name
	payload     json.RawMessage
	handlerText string // the handler, for the settings
	partitions  int32
	logLevel    string
	env         []string // the worker's environment, e.g. KJOB_CONCURRENCY=100
	cpuRows     bool     // also report CPU per window of the worker, redis-server and this process
}

func (s burstSpec) job(i int) string {
	return fmt.Sprintf("%s-%0*d", s.prefix, len(strconv.Itoa(s.jobs-1)), i%s.jobs)
}

func burst(b *testing.B, s burstSpec) {
	n := s.windows
	brokers := broker(b)
	r := redis(b)
	cl, adm := admin(b, brokers)
	topic := "burst"
	createTopic(b, adm, topic, s.partitions)

	// Prefill: n windows of s.jobs jobs, spread over the partitions by key.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	windowStart := func(i int) time.Time { return base.Add(time.Duration(i/s.jobs) * time.Second) }
	recs := make([]*kgo.Record, 0, 10_000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	flush := func() {
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatalf("prefill: %v", err)
		}
		recs = recs[:0]
	}
	for i := range n {
		job, start := s.job(i), windowStart(i)
		m := &jobmsg.Message{
			Namespace: "bench", ID: jobmsg.WindowID(job, start), Job: job, Handler: s.handler,
			Window:      jobmsg.Window{Start: start, End: start.Add(time.Second)},
			ScheduledAt: start, PublishedAt: start, Trigger: jobmsg.TriggerBackfill,
			Payload: s.payload, Policy: benchPolicy,
		}
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
		if len(recs) == cap(recs) {
			flush()
		}
	}
	flush()

	rpid := redisPID(b, r)
	settings := fmt.Sprintf("%d windows of %d jobs, %d partition(s), 1 worker process, %s, %s, log level %s, commit interval 1s, "+
		"embedded broker in the bench process, redis-server on loopback; %s", n, s.jobs, s.partitions, s.handlerText, envText(b, s.env), s.logLevel, machine())
	b.ResetTimer()
	cs0, us0 := commandStats(b, r), commandUsec(b, r)
	self0, redis0 := readUsage(b, os.Getpid()), readUsage(b, rpid)
	w := startEnv(b, "worker", s.env, "",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--group", "bench",
		"--namespace", "bench", "--http-addr", "", "--log-level", s.logLevel)
	waitStable(b, adm, "bench")
	t0 := time.Now()
	var t1 time.Time
	const drain = 5 * time.Minute
	deadline := time.Now().Add(drain)
	for {
		l, err := lag(ctx, adm, "bench", topic)
		if err == nil && l == 0 {
			t1 = time.Now()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("backlog of %d not drained within %v (lag %d, err %v)", n, drain, l, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the broker: there is no event to wait on
	}
	b.StopTimer()
	wu, self1, redis1 := readUsage(b, w.cmd.Process.Pid), readUsage(b, os.Getpid()), readUsage(b, rpid)
	cs1, us1 := commandStats(b, r), commandUsec(b, r)
	took := t1.Sub(t0)
	// The lag reaches 0 only at an offset commit, so the end-to-end
	// figure includes the commit tail; the time the last window completed
	// (its record's updated_ms, the Redis server's clock on this machine)
	// shows the processing rate without it. Each job's windows run in
	// order, so the last one completed is among each job's last window.
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for i := max(0, n-s.jobs); i < n; i++ {
		ids = append(ids, jobmsg.WindowID(s.job(i), windowStart(i)))
	}
	states, err := store.States(ctx, ids)
	if err != nil {
		b.Fatal(err)
	}
	var last time.Time
	for _, id := range ids {
		st, ok := states[id]
		if !ok || st.Status != dedupe.StatusDone {
			b.Fatalf("window %s after the burst: %+v (found %v)", id, st, ok)
		}
		if st.UpdatedAt.After(last) {
			last = st.UpdatedAt
		}
	}
	what := fmt.Sprintf("%d partition(s), log %s", s.partitions, s.logLevel)
	if !s.cpuRows {
		what = fmt.Sprintf("%d partition(s)", s.partitions)
	}
	perWindow := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	report(b, s.figure+" throughput to lag 0, "+what, float64(n)/took.Seconds(), "windows/s", settings+"; from the group's assignment to a committed lag of 0")
	report(b, s.figure+" throughput to the last window done, "+what, float64(n)/last.Sub(t0).Seconds(), "windows/s", settings+"; from the group's assignment to the last window's completion in Redis (no commit tail)")
	if !s.cpuRows {
		return
	}
	report(b, s.figure+" CPU per window: worker process, "+what, perWindow(wu.cpu), "µs CPU/window", settings+"; from the worker's start")
	report(b, s.figure+" CPU per window: redis-server, "+what, perWindow(redis1.cpu-redis0.cpu), "µs CPU/window", settings+"; from the worker's start")
	report(b, s.figure+" CPU per window: broker and bench process, "+what, perWindow(self1.cpu-self0.cpu), "µs CPU/window", settings+"; from the worker's start, lag polling included")
	sum := perWindow(wu.cpu + redis1.cpu - redis0.cpu + self1.cpu - self0.cpu)
	report(b, s.figure+" CPU per window: sum of the three, "+what, sum, "µs CPU/window",
		settings+fmt.Sprintf("; %d CPUs", runtime.NumCPU()))
	// What this machine's CPUs carry at the CPU per window just measured,
	// had they nothing else to do and never waited: the ceiling the burst
	// (and the Redis-bound limit's share) meets on a machine that runs the
	// worker, redis-server and the broker on the same CPUs. Reported
	// last: without -v go test keeps a benchmark's first 10 log lines,
	// and the Redis-bound limit's is the tenth.
	rate := float64(n) / last.Sub(t0).Seconds()
	ceiling := float64(runtime.NumCPU()) * 1e6 / sum
	logCommands(b, s.figure+", "+what, n, cs0, cs1, us0, us1)
	report(b, s.figure+" Redis script calls per window, "+what, float64(scriptCalls(cs0, cs1))/float64(n), "calls/window", settings+"; EVAL/EVALSHA calls from INFO commandstats, from the worker's start to lag 0")
	if s.partitions == 1 {
		reportRedisBound(b, r, n, s.jobs, rate, ceiling, settings)
	}
	report(b, s.figure+" CPU ceiling: the machine's CPUs / the sum of the three, "+what, ceiling, "windows/s at most",
		settings+fmt.Sprintf("; %d CPUs / %.1f µs CPU per window", runtime.NumCPU(), sum))
	report(b, s.figure+" throughput to the last window done / CPU ceiling, "+what, 100*rate/ceiling, "% of the CPU ceiling", settings)
}
