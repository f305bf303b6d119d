package partition_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/partition"
)

// A consumer processes each assigned partition on its own goroutine, in
// offset order, and commits a record's offset only once Process returned
// nil for it; shutdown (the end of Run's context) commits what was
// processed and leaves the group. The example uses the in-process kfake
// broker and stops after four records.
func Example() {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer kafka.Close()
	brokers := kafka.ListenAddrs()

	// Two records on each partition.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, v := range []string{"p0-a", "p1-a", "p0-b", "p1-b"} {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(v[1] - '0'), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		fmt.Println(err)
		return
	}

	var mu sync.Mutex
	seen := map[int32][]string{}
	n := 0
	c, err := partition.New(partition.Config{
		Brokers: brokers,
		Group:   "example",
		Topic:   "events",
		Logger:  slog.New(slog.DiscardHandler),
		// Process runs on the goroutine of rec's partition. Its ctx is
		// cancelled if the partition is lost, or Grace after a revoke.
		Process: func(ctx context.Context, rec *kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			seen[rec.Partition] = append(seen[rec.Partition], string(rec.Value))
			if n++; n == len(recs) {
				cancel() // in a real process: SIGTERM
			}
			return nil // settled: its offset may be committed
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Run:", c.Run(ctx))
	fmt.Println("partition 0:", seen[0])
	fmt.Println("partition 1:", seen[1])

	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	for p := int32(0); p < 2; p++ {
		o, _ := offs.Lookup("events", p)
		fmt.Printf("committed offset of partition %d: %d\n", p, o.At)
	}
	// Output:
	// Run: <nil>
	// partition 0: [p0-a p0-b]
	// partition 1: [p1-a p1-b]
	// committed offset of partition 0: 2
	// committed offset of partition 1: 2
}
