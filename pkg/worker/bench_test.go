package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/jobmsg"
)

// BenchmarkBacklog measures the worker's hot path in process: b.N windows
// already in a 4-partition topic, a no-op handler, the embedded broker and
// a real redis-server; ns/op is per window, from Run to the last window
// done (commits excluded; test/perf's BenchmarkBurst includes them).
func BenchmarkBacklog(b *testing.B) {
	brokers := testenv.Brokers(b, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	r := testenv.NewRedis(b)
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	topic := fmt.Sprintf("backlog-%d", b.N)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, b.N)
	for i := range b.N {
		m := window(fmt.Sprintf("job-%d", i%100), "noop", i, defaultPolicy)
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	mux := handler.NewMux()
	mux.HandleFunc("noop", func(context.Context, *handler.Job) error { return nil })
	var done atomic.Int64
	all := make(chan struct{})
	w, err := New(Config{
		Brokers: brokers, Topic: topic, Group: "bench", Store: store, Handler: mux, WorkerID: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
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
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(rctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d windows done within 5 minutes", done.Load(), b.N)
	}
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
