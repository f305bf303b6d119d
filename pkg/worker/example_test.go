package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/worker"
)

// A worker process: an idempotency store on Redis, a Mux of handlers, and
// a Worker consuming the windows topic until SIGINT or SIGTERM. It needs a
// Kafka broker and a Redis server, so the example is compiled, not run.
func Example() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "prod", ClaimTTL: 30 * time.Second})
	if err != nil {
		log.Error("store", "err", err)
		return
	}

	mux := handler.NewMux()
	mux.Use(handler.Logging(log))
	mux.HandleFunc("report", func(ctx context.Context, j *handler.Job) error {
		w := j.Window()
		// Pass j.FencingToken() to the system you write to, so it can
		// reject a stale attempt's writes.
		fmt.Printf("report %s..%s (attempt %d, token %d)\n", w.Start, w.End, j.Attempt(), j.FencingToken())
		return nil
	})

	host, _ := os.Hostname()
	w, err := worker.New(worker.Config{
		Brokers:             []string{"localhost:9092"},
		Store:               store,
		Handler:             mux,
		WorkerID:            fmt.Sprintf("%s-%d", host, os.Getpid()),
		ClaimExtendInterval: 10 * time.Second, // a third of the store's ClaimTTL
		Logger:              log,
		OnExecuted: func(e worker.Execution) {
			log.Info("executed", "window", e.WindowID, "outcome", e.Outcome, "attempt", e.Attempt)
		},
	})
	if err != nil {
		log.Error("worker", "err", err)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil { // returns after a graceful shutdown
		log.Error("worker stopped", "err", err)
	}
}
