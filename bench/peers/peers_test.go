package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// workload is one of the bursts kjob's test/perf measures too.
type workload struct {
	name  string        // sub-benchmark name: "io" or "noop"
	title string        // in figures: "I/O burst" or "no-op burst"
	n     int           // tasks enqueued before the server starts
	sleep time.Duration // handler run time; 0 returns at once
}

var workloads = []workload{
	{name: "io", title: "I/O burst", n: 2000, sleep: 50 * time.Millisecond},
	{name: "noop", title: "no-op burst", n: noopTasks()},
}

// noopTasks is the no-op burst's size: 20,000, as test/perf's
// BenchmarkBurst runs it in make bench-peers, or KJOB_PEERS_NOOP_TASKS
// (compare it with test/perf run with the same KJOB_BENCH_BURST).
func noopTasks() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_PEERS_NOOP_TASKS")); err == nil && n > 0 {
		return n
	}
	return 20_000
}

// concurrencies returns the concurrencies measured for w on peer
// ("asynq" or "river"): 10, 100 and 1,000 for the I/O burst; for the
// no-op burst 100, 1,000 and one more that did well on this machine kind
// (asynq 10, River 2,000). KJOB_PEERS_IO_CONCURRENCY and
// KJOB_PEERS_NOOP_CONCURRENCY (comma-separated) override them.
func concurrencies(b *testing.B, peer string, w workload) []int {
	env, def := "KJOB_PEERS_IO_CONCURRENCY", "10,100,1000"
	if w.name == "noop" {
		env, def = "KJOB_PEERS_NOOP_CONCURRENCY", map[string]string{"asynq": "10,100,1000", "river": "100,1000,2000"}[peer]
	}
	s := os.Getenv(env)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			b.Fatalf("%s=%q: want comma-separated positive integers, e.g. %s", env, s, def)
		}
		out = append(out, c)
	}
	return out
}

// handlerText describes w's handler in the settings.
func (w workload) handlerText() string {
	if w.sleep == 0 {
		return "no-op handler (returns nil at once)"
	}
	return fmt.Sprintf("handler sleeps %v honouring its context", w.sleep)
}

// sleepCtx sleeps for d or until ctx ends, as kjob's built-in sleep
// handler does.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finishLine records when the last of n handlers returned.
type finishLine struct {
	mu   sync.Mutex
	n    int
	done int
	last time.Time
}

func (f *finishLine) add() {
	now := time.Now()
	f.mu.Lock()
	f.done++
	if f.done == f.n {
		f.last = now
	}
	f.mu.Unlock()
}

// result returns how many handlers returned and, when all did, when the
// last one did.
func (f *finishLine) result() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done, f.last
}

// waitFor polls cond every 10 ms until it holds or timeout passes; there
// is no event to wait on in the peers' stores.
func waitFor(b *testing.B, timeout time.Duration, what string, cond func() (bool, error)) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not reached within %v (last error: %v)", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// report records one figure: as a benchmark metric and, when
// KJOB_BENCH_TABLE names a file, as a tab-separated row in the format of
// test/perf's table.
func report(b *testing.B, figure string, value float64, unit, settings string) {
	b.Helper()
	b.ReportMetric(value, strings.ReplaceAll(unit, " ", "_"))
	b.Logf("%s: %.4g %s (%s)", figure, value, unit, settings)
	path := os.Getenv("KJOB_BENCH_TABLE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v := strconv.FormatFloat(value, 'f', 2, 64)
	if value >= 100 {
		v = strconv.FormatFloat(value, 'f', 0, 64)
	}
	fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", figure, v, unit, settings)
}

// reportBurst prints the two throughput figures of a burst.
func reportBurst(b *testing.B, peer string, w workload, conc int, t0, handlersDone, settled time.Time, settings string) {
	b.Helper()
	what := fmt.Sprintf("%s, %s, concurrency %d", w.title, peer, conc)
	report(b, what+": throughput to the last handler return", float64(w.n)/handlersDone.Sub(t0).Seconds(), "tasks/s", settings+"; from the server's start to the last handler's return")
	report(b, what+": throughput to all settled in the store", float64(w.n)/settled.Sub(t0).Seconds(), "tasks/s", settings+"; from the server's start to every task settled in the peer's store")
}

var machineOnce = sync.OnceValue(func() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("machine: %s, %d CPUs%s%s, %s", model, runtime.NumCPU(), mem, kernel, runtime.Version())
})

// machine describes the machine as test/perf's rows do.
func machine() string { return machineOnce() }

// version returns the version of module path this benchmark is built
// with, as go.mod selects it (test binaries carry no dependency list in
// their build info).
func version(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", path).Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "(unknown version)"
}

// redisServer is a redis-server this benchmark started on a free loopback
// port, without persistence, as kjob's test/perf does.
type redisServer struct {
	addr    string
	version string
}

func startRedis(b *testing.B) *redisServer {
	b.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Fatal("the asynq benchmarks need redis-server on PATH (apt-get install -y redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := b.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	var info string
	waitFor(b, 10*time.Second, "redis-server answering on "+addr, func() (bool, error) {
		select {
		case <-done:
			b.Fatalf("redis-server on %s exited at start", addr)
		default:
		}
		var err error
		info, err = rdb.Info(context.Background(), "server").Result()
		return err == nil, err
	})
	r := &redisServer{addr: addr, version: "?"}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			r.version = v
		}
	}
	return r
}
