package operator_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// Rewind every partition by one hour while the workers run, and run the
// replayed windows again. It needs Kafka and Redis, so it is compiled but
// not run.
func ExampleReplayer() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "kjob"})
	if err != nil {
		log.Fatal(err)
	}
	r, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: []string{"127.0.0.1:9092"}, Store: store})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	plan, err := r.Plan(ctx, operator.ReplaySpec{Group: "kjob-workers", Mode: operator.ByDuration, Duration: time.Hour, Rerun: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Execute(ctx, plan); err != nil {
		log.Fatal(err)
	}
	for _, p := range plan.Partitions {
		log.Printf("partition %d: %d -> %d (applied by %s)", p.Partition, p.Before, p.Target, p.AppliedBy)
	}
}
