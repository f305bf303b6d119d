package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// A worker process: an idempotency store on Redis, a Mux of handlers, and
// a Worker consuming the windows topic. Here a producer feeds it a job due
// every second, and the example stops after the first window is done.
//
// The example brings its own Kafka (the in-process kfake broker) and Redis
// (a throwaway redis-server); a real worker gets its brokers and Redis URL
// from its configuration, and its context from
// signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM), so that SIGTERM
// drains it gracefully.
func Example() {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println("kafka:", err)
		return
	}
	defer kafka.Close()
	brokers := kafka.ListenAddrs()
	redisAddr, stopRedis, err := testenv.ExampleRedis()
	if err != nil {
		fmt.Println("redis:", err)
		return
	}
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler) // a real process logs to stderr

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Claims, fencing tokens and done markers live in Redis. A worker
	// stops a handler whose claim it cannot extend before the claim TTL
	// runs out, so keep the TTL above your Redis's failover time.
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "example", ClaimTTL: 6 * time.Second})
	if err != nil {
		fmt.Println("store:", err)
		return
	}

	// Handlers by the name the schedules file gives in "handler:".
	var runs atomic.Int32
	mux := handler.NewMux()
	mux.HandleFunc("report", func(ctx context.Context, j *handler.Job) error {
		// Pass j.FencingToken() to the system you write to, so that it
		// can reject a stale attempt's writes.
		if runs.Add(1) == 1 {
			fmt.Printf("ran a window of %s: attempt %d, fencing token %d\n", j.Name(), j.Attempt(), j.FencingToken())
		}
		return nil
	})

	done := make(chan string, 1)
	w, err := worker.New(worker.Config{
		Brokers:  brokers,
		Store:    store,
		Handler:  mux,
		WorkerID: "worker-1", // unique per process, e.g. hostname-pid
		Logger:   quiet,
		OnExecuted: func(e worker.Execution) {
			if e.Outcome == worker.OutcomeDone {
				select {
				case done <- e.WindowID:
				default:
				}
			}
		},
	})
	if err != nil {
		fmt.Println("worker:", err)
		return
	}

	// The producer side (see internal/exec/producer): one job, due every second.
	p, err := newProducer(brokers, rdb, quiet)
	if err != nil {
		fmt.Println("producer:", err)
		return
	}

	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{w.Run, p.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				fmt.Println("run:", err)
			}
		}()
	}
	var id string
	select {
	case id = <-done:
	case <-ctx.Done():
		fmt.Println("no window done within 30s")
	}
	cancel() // as SIGTERM would: both finish in-flight work and stop
	wg.Wait()

	if id != "" {
		st, err := store.State(context.Background(), id)
		job, _, _ := strings.Cut(id, "@")
		fmt.Printf("window of %s: %s after %d attempt, err %v\n", job, st.Status, st.Attempts, err)
	}
	// Output:
	// ran a window of report: attempt 1, fencing token 1
	// window of report: done after 1 attempt, err <nil>
}

// newProducer returns a producer publishing one job every second, elected
// by a Redis lease.
func newProducer(brokers []string, rdb redis.UniversalClient, log *slog.Logger) (*producer.Producer, error) {
	file, err := schedule.Parse("schedules.yaml", []byte(`
jobs:
  - name: report
    schedule: "@every 1s"
    handler: report
`))
	if err != nil {
		return nil, err
	}
	lock, err := lease.NewRedisLock(rdb, "kjob:{example}:producer-lease")
	if err != nil {
		return nil, err
	}
	elector, err := lease.NewElector(lease.Config{Lock: lock, Holder: "producer-1", Logger: log})
	if err != nil {
		return nil, err
	}
	return producer.New(producer.Config{Brokers: brokers, Jobs: file.Jobs, Elector: elector, TransactionalID: "kjob-producer-example", Logger: log})
}
