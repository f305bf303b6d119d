package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/jobmsg"
)

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
// trips and the offset commits.
func BenchmarkBurst(b *testing.B) {
	for _, tc := range []struct {
		partitions int32
		logLevel   string
	}{{1, "info"}, {4, "info"}, {4, "warn"}} {
		b.Run(fmt.Sprintf("partitions=%d/log=%s", tc.partitions, tc.logLevel), func(b *testing.B) {
			for range b.N {
				burst(b, tc.partitions, tc.logLevel)
			}
		})
	}
}

func burst(b *testing.B, partitions int32, logLevel string) {
	n := burstWindows()
	brokers := broker(b)
	r := redis(b)
	cl, adm := admin(b, brokers)
	topic := "burst"
	createTopic(b, adm, topic, partitions)

	// Prefill: n windows of 100 jobs, spread over the partitions by key.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]*kgo.Record, 0, 10_000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	flush := func() {
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatalf("prefill: %v", err)
		}
		recs = recs[:0]
	}
	payload := json.RawMessage(`{}`)
	for i := range n {
		job := fmt.Sprintf("burst-%02d", i%100)
		start := base.Add(time.Duration(i/100) * time.Second)
		m := &jobmsg.Message{
			ID: jobmsg.WindowID(job, start), Job: job, Handler: "noop",
			Window:      jobmsg.Window{Start: start, End: start.Add(time.Second)},
			ScheduledAt: start, PublishedAt: start, Trigger: jobmsg.TriggerBackfill,
			Payload: payload, Policy: benchPolicy,
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
	b.ResetTimer()
	self0, redis0 := readUsage(b, os.Getpid()), readUsage(b, rpid)
	w := start(b, "worker", "",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--group", "bench",
		"--namespace", "bench", "--http-addr", "", "--log-level", logLevel)
	waitStable(b, adm, "bench")
	t0 := time.Now()
	var t1 time.Time
	deadline := time.Now().Add(5 * time.Minute)
	for {
		l, err := lag(ctx, adm, "bench", topic)
		if err == nil && l == 0 {
			t1 = time.Now()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("backlog of %d not drained within 5 minutes (lag %d, err %v)", n, l, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the broker: there is no event to wait on
	}
	b.StopTimer()
	wu, self1, redis1 := readUsage(b, w.cmd.Process.Pid), readUsage(b, os.Getpid()), readUsage(b, rpid)
	took := t1.Sub(t0)
	// The lag reaches 0 only at the next offset commit (every 1s), so the
	// end-to-end figure moves in steps of about a second; the time the
	// last window completed (its record's updated_ms, the Redis server's
	// clock on this machine) shows the processing rate without that tail.
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var last time.Time
	for i := max(0, n-100); i < n; i++ {
		id := jobmsg.WindowID(fmt.Sprintf("burst-%02d", i%100), base.Add(time.Duration(i/100)*time.Second))
		st, err := store.State(ctx, id)
		if err != nil || st.Status != dedupe.StatusDone {
			b.Fatalf("window %s after the burst: %+v, %v", id, st, err)
		}
		if st.UpdatedAt.After(last) {
			last = st.UpdatedAt
		}
	}
	settings := fmt.Sprintf("%d windows of 100 jobs, %d partition(s), 1 worker process, built-in noop handler, log level %s, commit interval 1s, "+
		"embedded broker in the bench process, redis-server on loopback; %s", n, partitions, logLevel, machine())
	what := fmt.Sprintf("%d partition(s), log %s", partitions, logLevel)
	perWindow := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	report(b, "burst throughput to lag 0, "+what, float64(n)/took.Seconds(), "windows/s", settings+"; from the group's assignment to a committed lag of 0")
	report(b, "burst throughput to the last window done, "+what, float64(n)/last.Sub(t0).Seconds(), "windows/s", settings+"; from the group's assignment to the last window's completion in Redis (no commit tail)")
	report(b, "burst CPU per window: worker process, "+what, perWindow(wu.cpu), "µs CPU/window", settings+"; from the worker's start")
	report(b, "burst CPU per window: redis-server, "+what, perWindow(redis1.cpu-redis0.cpu), "µs CPU/window", settings+"; from the worker's start")
	report(b, "burst CPU per window: broker and bench process, "+what, perWindow(self1.cpu-self0.cpu), "µs CPU/window", settings+"; from the worker's start, lag polling included")
	report(b, "burst CPU per window: sum of the three, "+what, perWindow(wu.cpu+redis1.cpu-redis0.cpu+self1.cpu-self0.cpu), "µs CPU/window",
		settings+fmt.Sprintf("; %d CPUs", runtime.NumCPU()))
}
