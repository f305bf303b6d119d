package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// recorder is an HTTP server in the bench process that the worker's
// built-in http handler calls at the start of each attempt: it notes
// when each window of a job arrived, on this process's clock, so a
// handler's start is measured from the worker's side without reading its
// logs.
type recorder struct {
	srv *httptest.Server
	job string

	mu       sync.Mutex
	arrivals map[string]arrival // by window id; the first attempt counts
}

type arrival struct {
	windowStart, received time.Time
}

func newRecorder(b *testing.B, job string) *recorder {
	b.Helper()
	rc := &recorder{job: job, arrivals: map[string]arrival{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body struct {
			WindowID    string    `json:"window_id"`
			Job         string    `json:"job"`
			WindowStart time.Time `json:"window_start"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if body.Job != rc.job {
			return
		}
		rc.mu.Lock()
		if _, ok := rc.arrivals[body.WindowID]; !ok {
			rc.arrivals[body.WindowID] = arrival{windowStart: body.WindowStart, received: now}
		}
		rc.mu.Unlock()
	}))
	b.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) url() string { return rc.srv.URL + "/window" }

// between returns the lateness (arrival - window start) of the windows
// that start in [from, until).
func (rc *recorder) between(from, until time.Time) *lateness {
	l := &lateness{}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, a := range rc.arrivals {
		if !a.windowStart.Before(from) && a.windowStart.Before(until) {
			l.add(a.received.Sub(a.windowStart))
		}
	}
	return l
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.arrivals)
}

// BenchmarkHeadOfLine: 1 partition; a job whose handler holds for the
// measured duration (the built-in sleep handler, 60s by default) is
// published once beside a job `@every 1s` that cmd/producer publishes and
// whose built-in http handler calls a recorder in this process: the fast
// job's window start -> handler start for the windows that start while
// the slow one runs. A worker that runs one window at a time per
// partition starts them only when the slow one ends.
func BenchmarkHeadOfLine(b *testing.B) {
	for range b.N {
		headOfLine(b)
	}
}

func headOfLine(b *testing.B) {
	// A fast window a second while the slow one holds: at least
	// minSamples of them, whatever the duration.
	hold := max(duration(), time.Duration(minSamples+2)*time.Second)
	brokers := broker(b)
	r := redis(b)
	cl, adm := admin(b, brokers)
	topic := "hol"
	createTopic(b, adm, topic, 1)
	rc := newRecorder(b, "heartbeat")
	schedules := writeSchedules(b, fmt.Sprintf("jobs:\n  - name: heartbeat\n    schedule: \"@every 1s\"\n    handler: http\n    payload: {url: %q}\n    catchup: 0s\n", rc.url()))
	env := []string{fmt.Sprintf("KJOB_CONCURRENCY=%d", defaultConcurrency)}
	startEnv(b, "worker", env, "",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--group", "bench",
		"--namespace", "bench", "--http-addr", "")
	waitStable(b, adm, "bench")
	p := start(b, "producer", "publishing as leader",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--partitions", "1",
		"--schedules", schedules, "--namespace", "bench", "--http-addr", "")
	p.wait(b, 60*time.Second, "leadership")
	testenv.Eventually(b, 30*time.Second, func() bool { return rc.count() >= 2 }, "the fast job's handler never ran")

	// The slow window, as `kjobctl trigger` would publish it.
	ctx, cancel := context.WithTimeout(context.Background(), hold+5*time.Minute)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Millisecond)
	slowPolicy := benchPolicy
	slowPolicy.Timeout = jobmsg.Duration(hold + time.Minute)
	slow := &jobmsg.Message{
		Namespace: "bench", ID: jobmsg.WindowID("export", now), Job: "export", Handler: "sleep",
		Window:      jobmsg.Window{Start: now, End: now.Add(time.Second)},
		ScheduledAt: now, PublishedAt: now, Trigger: jobmsg.TriggerManual,
		Payload: mustJSON(map[string]string{"duration": hold.String()}), Policy: slowPolicy,
	}
	rec, err := jobmsg.Record(topic, slow)
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		b.Fatalf("publish the slow window: %v", err)
	}
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var slowStart time.Time
	testenv.Eventually(b, 30*time.Second, func() bool {
		st, err := store.State(ctx, slow.ID)
		slowStart = time.Now()
		return err == nil && st.Status == dedupe.StatusRunning
	}, "the slow window never started")
	// The fast windows that start while the slow one runs, from the next
	// whole second on.
	from := slowStart.Truncate(time.Second).Add(time.Second)
	until := slowStart.Add(hold).Truncate(time.Second)
	want := int(until.Sub(from) / time.Second)
	b.ResetTimer()
	deadline := slowStart.Add(hold + time.Minute)
	for rc.between(from, until).len() < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the recorder has no event to wait on cheaply; bounded by deadline
	}
	b.StopTimer()
	lat := rc.between(from, until)
	if got := lat.len(); got != want {
		b.Errorf("%d of the %d fast windows that started while the slow one ran reached their handler within %v of the slow one's start", got, want, hold+time.Minute)
	}
	settings := fmt.Sprintf("1 partition; job export (built-in sleep handler, %v) published once beside job heartbeat @every 1s (cmd/producer); "+
		"handler start = arrival of the built-in http handler's POST at a recorder in the bench process (one loopback request after the handler starts); "+
		"windows of heartbeat that start while export runs; producer process + 1 worker process, %s, log level info; %s", hold, envText(b, env), machine())
	reportLateness(b, fmt.Sprintf("head-of-line: fast job window start -> handler start, beside a %v handler", hold), lat, settings)
}

// BenchmarkInFlight: 10,000 windows of 10,000 jobs already in the topic,
// the built-in sleep handler sleeping 30s, 1 partition, one worker process
// with KJOB_CONCURRENCY=10000 and KJOB_MAX_UNCOMMITTED=10000: once every
// window is running, the worker's resident memory and the Redis calls per
// second during a steady 10s, when only claim extensions reach Redis. A
// worker that cannot have them all running within 20s of its assignment
// (after that the first handlers would end before the steady period does)
// is reported as not reaching it, with the most it had running.
// KJOB_BENCH_INFLIGHT overrides the number of windows.
func BenchmarkInFlight(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("KJOB_BENCH_INFLIGHT")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		inFlight(b, n)
	}
}

func inFlight(b *testing.B, n int) {
	const (
		hold   = 30 * time.Second
		steady = 10 * time.Second
	)
	brokers := broker(b)
	r := redis(b)
	cl, adm := admin(b, brokers)
	topic := "inflight"
	createTopic(b, adm, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := benchPolicy
	policy.Timeout = jobmsg.Duration(hold + time.Minute)
	payload := mustJSON(map[string]string{"duration": hold.String()})
	ids := make([]string, n)
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		job := fmt.Sprintf("held-%05d", i)
		m := &jobmsg.Message{
			Namespace: "bench", ID: jobmsg.WindowID(job, base), Job: job, Handler: "sleep",
			Window:      jobmsg.Window{Start: base, End: base.Add(time.Second)},
			ScheduledAt: base, PublishedAt: base, Trigger: jobmsg.TriggerBackfill,
			Payload: payload, Policy: policy,
		}
		ids[i] = m.ID
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatalf("prefill: %v", err)
	}
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// running counts the windows whose claim is live (status running) in
	// Redis: with --concurrency at least n, a claimed window's handler
	// starts at once.
	// lastClaim is the Redis server's time of the latest of their claims
	// (a claim sets updated_ms; an extension does not): once all are
	// running, when the last one started, whatever the polling interval.
	var lastClaim time.Time
	running := func() int {
		states, err := store.States(ctx, ids)
		if err != nil {
			b.Fatalf("read the windows' states: %v", err)
		}
		c := 0
		for _, st := range states {
			if st.Status == dedupe.StatusRunning {
				c++
				if st.UpdatedAt.After(lastClaim) {
					lastClaim = st.UpdatedAt
				}
			}
		}
		return c
	}

	env := []string{fmt.Sprintf("KJOB_CONCURRENCY=%d", n), fmt.Sprintf("KJOB_MAX_UNCOMMITTED=%d", n)}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
	settings := fmt.Sprintf("%d windows of %d jobs in 1 partition, built-in sleep handler %v, 1 worker process, %s, claim TTL 6s extended every 2s (defaults), "+
		"embedded broker in the bench process, redis-server on loopback; running = live claim in Redis; %s", n, n, hold, envText(b, env), machine())
	rpid := redisPID(b, r)
	b.ResetTimer()
	w := startEnv(b, "worker", env, "",
		"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--group", "bench",
		"--namespace", "bench", "--http-addr", httpAddr, "--log-level", "warn")
	pid := w.cmd.Process.Pid
	waitStable(b, adm, "bench")
	t0 := time.Now()
	reachBy := t0.Add(hold - steady)
	// Counting all n windows costs Redis n script calls, which would slow
	// the worker's own claims: wait for the last record's window first
	// (windows are claimed roughly in offset order), then count them all.
	lastRunning := func() bool {
		st, err := store.State(ctx, ids[n-1])
		return err == nil && st.Status == dedupe.StatusRunning
	}
	peak, reached := 0, false
	for !reached && time.Now().Before(reachBy) {
		if !lastRunning() {
			time.Sleep(20 * time.Millisecond) // polling Redis: the sleep handler reports nothing
			continue
		}
		c := running()
		peak = max(peak, c)
		reached = c >= n
		if !reached {
			time.Sleep(200 * time.Millisecond)
		}
	}
	allRunning := time.Since(t0)
	if reached {
		// The poll above finds them all running up to one interval late;
		// the last claim's own time is exact (same host clock, ms).
		allRunning = lastClaim.Sub(t0)
	}
	if !reached {
		peak = max(peak, running())
	}
	if !reached {
		b.StopTimer()
		u := readUsage(b, pid)
		report(b, fmt.Sprintf("%d in flight: NOT REACHED within %v, most windows counted running at once", n, hold-steady), float64(peak), "windows", settings+"; from the group's assignment")
		report(b, fmt.Sprintf("%d in flight: NOT REACHED, worker RSS with %d running", n, peak), float64(u.rss)/(1<<20), "MiB", settings)
		return
	}
	u0, redis0, cs0 := readUsage(b, pid), readUsage(b, rpid), commandStats(b, r)
	time.Sleep(steady) // the workload: windows in flight over wall-clock time
	u1, redis1, cs1 := readUsage(b, pid), readUsage(b, rpid), commandStats(b, r)
	b.StopTimer()
	goroutines := scrapeGauge(b, "http://"+httpAddr+"/metrics", "go_goroutines")
	// Where the RSS goes, from the Go runtime's own figures.
	heapInuse := scrapeGauge(b, "http://"+httpAddr+"/metrics", "go_memstats_heap_inuse_bytes")
	heapSys := scrapeGauge(b, "http://"+httpAddr+"/metrics", "go_memstats_heap_sys_bytes") -
		scrapeGauge(b, "http://"+httpAddr+"/metrics", "go_memstats_heap_released_bytes")
	stacks := scrapeGauge(b, "http://"+httpAddr+"/metrics", "go_memstats_stack_inuse_bytes")
	if c := running(); c < n {
		b.Errorf("only %d of %d windows still running after the steady %v: the figures include ended handlers", c, n, steady)
	}
	perSec := func(calls int64) float64 { return float64(calls) / steady.Seconds() }
	var all int64
	for cmd, calls := range cs1 {
		d := calls - cs0[cmd]
		if cmd != "info" {
			all += d
		}
	}
	scripts := scriptCalls(cs0, cs1)
	what := fmt.Sprintf("%d in flight", n)
	steadyText := fmt.Sprintf("; over a steady %v once all were running", steady)
	report(b, what+": assignment to all running", allRunning.Seconds(), "s", settings+"; from the group's assignment to the Redis time of the last window's claim")
	report(b, what+": worker RSS", float64(max(u0.rss, u1.rss))/(1<<20), "MiB", settings+steadyText)
	report(b, what+": worker peak RSS (VmHWM)", float64(u1.hwm)/(1<<20), "MiB", settings+"; since the worker's start")
	report(b, what+": worker Go heap in use", heapInuse/(1<<20), "MiB", settings+"; go_memstats_heap_inuse_bytes after the steady period (live objects and garbage not yet collected)")
	report(b, what+": worker Go heap held from the OS", heapSys/(1<<20), "MiB", settings+"; go_memstats_heap_sys_bytes minus heap_released_bytes after the steady period")
	report(b, what+": worker goroutine stacks", stacks/(1<<20), "MiB", settings+"; go_memstats_stack_inuse_bytes after the steady period")
	report(b, what+": worker goroutines", goroutines, "goroutines", settings+"; go_goroutines from the worker's /metrics after the steady period")
	report(b, what+": worker CPU", 100*float64(u1.cpu-u0.cpu)/float64(steady), "% of one core", settings+steadyText)
	report(b, what+": Redis script calls per second (claim extension)", perSec(scripts), "calls/s", settings+steadyText+"; EVAL/EVALSHA calls from INFO commandstats")
	report(b, what+": Redis commands per second, scripts' commands included", perSec(all), "commands/s", settings+steadyText+"; all commands in INFO commandstats but INFO")
	report(b, what+": redis-server CPU", 100*float64(redis1.cpu-redis0.cpu)/float64(steady), "% of one core", settings+steadyText)
}

// scriptCalls is how many EVAL/EVALSHA/FCALL calls INFO commandstats
// counted between the readings cs0 and cs1.
func scriptCalls(cs0, cs1 map[string]int64) int64 {
	var n int64
	for cmd, calls := range cs1 {
		if strings.HasPrefix(cmd, "eval") || strings.HasPrefix(cmd, "fcall") {
			n += calls - cs0[cmd]
		}
	}
	return n
}

// commandStats returns the calls of each command from INFO commandstats
// (commands a script runs are counted under their own names too).
func commandStats(b *testing.B, r *testenv.Redis) map[string]int64 {
	return commandStatsField(b, r, "calls")
}

// commandUsec returns the microseconds redis-server spent in each command
// from INFO commandstats (a script's commands are counted inside its
// EVALSHA's time and under their own names too).
func commandUsec(b *testing.B, r *testenv.Redis) map[string]int64 {
	return commandStatsField(b, r, "usec")
}

// commandStatsField returns one integer field ("calls", "usec") of each
// command from INFO commandstats.
func commandStatsField(b *testing.B, r *testenv.Redis, field string) map[string]int64 {
	b.Helper()
	info, err := r.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		// cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,...
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k != field {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("INFO commandstats: %q: %v", line, err)
			}
			out[name] = n
		}
	}
	return out
}

// logCommands logs, for each command called between two readings, its
// calls and the server's time in it per window of n.
func logCommands(b *testing.B, what string, n int, calls0, calls1, usec0, usec1 map[string]int64) {
	b.Helper()
	var names []string
	for name := range calls1 {
		if calls1[name] > calls0[name] && name != "info" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, name := range names {
		fmt.Fprintf(&sb, " %s %.4f calls, %.2f µs;", name, float64(calls1[name]-calls0[name])/float64(n), float64(usec1[name]-usec0[name])/float64(n))
	}
	b.Logf("%s: Redis commands per window (INFO commandstats, server time in the command):%s", what, sb.String())
}

// scrapeGauge reads an unlabelled gauge from a Prometheus text endpoint.
func scrapeGauge(b *testing.B, url, name string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("%s: %s %q: %v", url, name, v, err)
			}
			return f
		}
	}
	b.Fatalf("%s has no %s", url, name)
	return 0
}
