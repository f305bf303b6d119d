package peers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// BenchmarkAsynq runs each workload through one asynq server in this
// process against its own redis-server: the tasks (of one type, with
// distinct task ids; asynq has no per-key ordering) are all enqueued
// before the server starts.
func BenchmarkAsynq(b *testing.B) {
	for _, w := range workloads {
		for _, c := range concurrencies(b, "asynq", w) {
			b.Run(fmt.Sprintf("%s/concurrency=%d", w.name, c), func(b *testing.B) {
				for range b.N {
					benchAsynq(b, w, c)
				}
			})
		}
	}
}

func benchAsynq(b *testing.B, w workload, conc int) {
	b.StopTimer()
	rs := startRedis(b)
	opt := asynq.RedisClientOpt{Addr: rs.addr}
	client := asynq.NewClient(opt)
	defer client.Close()

	// Enqueue from a few goroutines: one script call per task.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < w.n; i += 8 {
				t := asynq.NewTask("burst", []byte(fmt.Sprintf(`{"job":"job-%05d"}`, i)))
				if _, err := client.EnqueueContext(ctx, t, asynq.TaskID(fmt.Sprintf("job-%05d", i)), asynq.MaxRetry(0)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("enqueue: %v", err)
	}

	fin := &finishLine{n: w.n}
	mux := asynq.NewServeMux()
	mux.HandleFunc("burst", func(ctx context.Context, _ *asynq.Task) error {
		err := sleepCtx(ctx, w.sleep)
		fin.add()
		return err
	})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: conc,
		Queues:      map[string]int{"default": 1},
		LogLevel:    asynq.WarnLevel,
	})
	insp := asynq.NewInspector(opt)
	defer insp.Close()

	b.StartTimer()
	t0 := time.Now()
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	waitFor(b, 5*time.Minute, fmt.Sprintf("all %d handlers returned", w.n), func() (bool, error) {
		n, _ := fin.result()
		return n >= w.n, fmt.Errorf("%d of %d returned", n, w.n)
	})
	settled := waitFor(b, time.Minute, "an empty queue", func() (bool, error) {
		q, err := insp.GetQueueInfo("default")
		if err != nil {
			return false, err
		}
		return q.Pending+q.Active+q.Scheduled+q.Retry+q.Archived == 0, fmt.Errorf("%+v", *q)
	})
	b.StopTimer()
	_, last := fin.result()
	settings := fmt.Sprintf("asynq %s, Config.Concurrency %d, 1 server in the bench process, %d tasks of one type with distinct task ids enqueued before the start, %s, MaxRetry 0, defaults otherwise, redis-server %s on loopback without persistence; %s",
		version("github.com/hibiken/asynq"), conc, w.n, w.handlerText(), rs.version, machine())
	reportBurst(b, "asynq", w, conc, t0, last, settled, settings)
}
