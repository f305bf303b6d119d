package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/handler/builtin"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// BenchmarkBacklog measures the worker's hot path in process: b.N windows
// of 100 jobs already in a 1- or 4-partition topic, a no-op handler, the
// embedded broker and a real redis-server; ns/op is per window, from Run to
// the last window done (commits excluded; test/perf's BenchmarkBurst
// includes them). It also reports how many windows each claim and settle
// call carried, and the CPU each window cost this process (the embedded
// broker included) and redis-server. KJOB_BENCH_JOBS (default 100) and
// KJOB_BENCH_CONC (default Config.Concurrency's) change the shape;
// KJOB_BENCH_MEMSTORE=1 replaces Redis by an in-memory store (the worker's
// own cost, without the store's round trips); KJOB_BENCH_CPUPROFILE=file
// profiles the measured part.
func BenchmarkBacklog(b *testing.B) {
	for _, partitions := range []int32{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) { benchBacklog(b, partitions) })
	}
}

// callCounter counts a store's calls and the windows they carry.
type callCounter struct {
	Store
	claims, claimed, settles, settled atomic.Int64
	claimNS, settleNS                 atomic.Int64
}

func (c *callCounter) ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error) {
	c.claims.Add(1)
	c.claimed.Add(int64(len(ids)))
	t := time.Now()
	defer func() { c.claimNS.Add(int64(time.Since(t))) }()
	return c.Store.ClaimBatch(ctx, ids, owner)
}

func (c *callCounter) Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error) {
	c.settles.Add(1)
	c.settled.Add(int64(len(ss)))
	t := time.Now()
	defer func() { c.settleNS.Add(int64(time.Since(t))) }()
	return c.Store.Settle(ctx, ss, runs...)
}

func benchBacklog(b *testing.B, partitions int32) {
	brokers := testenv.Brokers(b, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	r := testenv.NewRedis(b)
	ds, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var inner Store = ds
	if os.Getenv("KJOB_BENCH_MEMSTORE") != "" {
		inner = &memStore{st: map[string]*memWin{}}
	}
	store := &callCounter{Store: inner}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	topic := fmt.Sprintf("backlog-%d", b.N)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	jobs := benchJobs()
	produceBacklog(b, cl, topic, b.N, func(i int) *jobmsg.Message {
		return window(fmt.Sprintf("job-%d", i%jobs), "noop", i, defaultPolicy)
	})
	mux := handler.NewMux()
	mux.HandleFunc("noop", func(context.Context, *handler.Job) error { return nil })
	var done atomic.Int64
	all := make(chan struct{})
	w, err := New(Config{
		Brokers: brokers, Topic: topic, Group: "bench", Store: store, Handler: mux, WorkerID: "bench",
		Concurrency: benchConc(), Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnExecuted: func(e Execution) {
			if e.Outcome == OutcomeDone && done.Add(1) == int64(b.N) {
				close(all)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.ReportAllocs()
	cpu0, redis0 := processCPU(), testenv.ServerCPU(b, r.Client())
	stopProfile := startProfile(b)
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(rctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d windows done within 5 minutes", done.Load(), b.N)
	}
	b.StopTimer()
	stopProfile()
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "proc-cpu-µs/window")
	b.ReportMetric((testenv.ServerCPU(b, r.Client())-redis0)/float64(b.N), "redis-cpu-µs/window")
	if info, err := r.Client().Info(ctx, "commandstats").Result(); err == nil {
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				b.Log(line)
			}
		}
	}
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.Logf("%d windows claimed in %d claim calls; %d windows in %d settle calls", store.claimed.Load(), store.claims.Load(), store.settled.Load(), store.settles.Load())
	b.ReportMetric(float64(store.claimed.Load())/float64(max(1, store.claims.Load())), "windows/claim-call")
	b.ReportMetric(float64(store.settled.Load())/float64(max(1, store.settles.Load())), "windows/settle-call")
	b.ReportMetric(float64(store.claimNS.Load())/float64(max(1, store.claims.Load()))/1e3, "µs/claim-call")
	b.ReportMetric(float64(store.settleNS.Load())/float64(max(1, store.settles.Load()))/1e3, "µs/settle-call")
}

// produceBacklog produces window(i) for i in [0, n) to topic.
func produceBacklog(b *testing.B, cl *kgo.Client, topic string, n int, window func(int) *jobmsg.Message) {
	b.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		rec, err := jobmsg.Record(topic, window(i))
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
}

// startProfile starts a CPU profile of the measured part alone (not the
// backlog's production) into the file KJOB_BENCH_CPUPROFILE names, if set,
// and returns what stops it.
func startProfile(b *testing.B) func() {
	path := os.Getenv("KJOB_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// benchJobs is the number of jobs the backlog's windows belong to.
func benchJobs() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_BENCH_JOBS")); err == nil && n > 0 {
		return n
	}
	return 100
}

// benchConc is the worker's Config.Concurrency (0: its default).
func benchConc() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_BENCH_CONC")); err == nil && n > 0 {
		return n
	}
	return 0
}

// processCPU returns this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInFlightMemory measures what a window in flight holds in the
// worker's memory: 10,000 windows of 10,000 jobs (KJOB_BENCH_INFLIGHT
// changes the number) whose handler is the built-in sleep handler (as in
// test/perf's BenchmarkInFlight), Concurrency as many, the embedded broker
// and a real redis-server. Once every handler runs it forces two
// collections (a parked goroutine's stack shrinks by half at each) and
// reports the live heap and the goroutine stacks this process gained per
// window in flight (the broker's share of the heap is in the baseline,
// taken after the backlog was produced). KJOB_BENCH_MEMPROFILE writes a
// heap profile then.
func BenchmarkInFlightMemory(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("KJOB_BENCH_INFLIGHT")); err == nil && v > 0 {
		n = v
	}
	if os.Getenv("KJOB_BENCH_MEMPROFILE") != "" {
		runtime.MemProfileRate = 64
	}
	brokers := testenv.Brokers(b, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	r := testenv.NewRedis(b)
	ds, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	mux := handler.NewMux()
	builtin.Register(mux.Handle, slog.New(slog.NewTextHandler(io.Discard, nil)), http.DefaultClient, nil)
	for i := range b.N {
		topic := fmt.Sprintf("inflight-%d", i)
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			b.Fatal(err)
		}
		produceBacklog(b, cl, topic, n, func(j int) *jobmsg.Message {
			m := window(fmt.Sprintf("job-%d", j), "sleep", j, defaultPolicy)
			m.Policy.Timeout = jobmsg.Duration(time.Hour)
			m.Payload = json.RawMessage(`{"duration":"1h"}`)
			return m
		})
		w, err := New(Config{
			Brokers: brokers, Topic: topic, Group: topic, Store: ds, Handler: mux, WorkerID: "bench",
			Concurrency: n, MaxUncommitted: n,
			Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			b.Fatal(err)
		}
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- w.Run(rctx) }()
		deadline := time.Now().Add(2 * time.Minute)
		for w.InFlight() < n {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d handlers running after 2 minutes", w.InFlight(), n)
			}
			time.Sleep(10 * time.Millisecond) // polling a counter: there is no event to wait on
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if path := os.Getenv("KJOB_BENCH_MEMPROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-B/window")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(n), "stack-B/window")
		b.ReportMetric(float64(after.HeapSys-after.HeapReleased)/(1<<20), "heap-held-MiB")
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
