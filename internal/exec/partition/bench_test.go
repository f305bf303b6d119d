package partition

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkLoop measures the partition loop alone (fetch, queue, hand-off,
// frontier, marks, commits) with a ServeFunc that settles every record as
// it takes it: b.N records in 4 partitions of the embedded broker, ns/op
// per record.
func BenchmarkLoop(b *testing.B) {
	brokers := cluster(b)
	topic := fmt.Sprintf("loop-%d", b.N)
	createTopic(b, brokers, topic, 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, b.N)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 100)), Value: make([]byte, 300)}
	}
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	all := make(chan struct{})
	c, err := New(Config{
		Brokers: brokers, Group: "bench", Topic: topic, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Serve: func(ctx context.Context, o *Owned) {
			for {
				select {
				case <-o.Halted():
					return
				case <-ctx.Done():
					return
				case <-o.Ready():
				}
				rs := o.Take()
				for _, r := range rs {
					o.Settle(r)
				}
				if n.Add(int64(len(rs))) == int64(b.N) {
					close(all)
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	b.ResetTimer()
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d records processed within 5 minutes", n.Load(), b.N)
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
