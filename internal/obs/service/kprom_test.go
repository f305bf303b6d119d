package service

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// The producer makes a new client for each publishing term, one at a time,
// all sharing one Observability's Kafka hooks: a term's client is closed
// and the next one created at once. kgo runs a client's produce-batch hook
// on a goroutine that Close does not wait for, and kprom's OnNewClient
// replaces the vectors that hook reads: a data race under -race unless
// syncedMetrics orders them (CI caught it in TestProducerPublishesWindows
// after a term restarted on a Kafka error).
func TestKafkaMetricsAcrossSuccessiveClients(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // only its pool's statistics are read
	defer rdb.Close()
	o := Observe(rdb, nil, true, 0)
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t")}, o.KafkaOpts(true)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n := range 50 { // terms, each closed right after its last produce
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
			t.Fatalf("client %d: produce: %v", n, err)
		}
		if n == 49 {
			// kgo runs the produce hook on its own goroutine after the
			// records' promises, so ProduceSync can return before it:
			// wait for it, with a deadline.
			testenv.Eventually(t, 10*time.Second, func() bool { return exported(t, o, "kjob_kafka_produce_bytes_total") },
				"the last client's produced records are not exported")
		}
		cl.Close()
	}
}

// exported reports whether o's registry has the metric family name.
func exported(t *testing.T, o *Observability, name string) bool {
	mfs, err := o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	return false
}
