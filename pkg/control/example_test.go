package control_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/dedupe"
)

// A worker runs an Agent next to its *worker.Worker so operators can
// replay its partitions while it runs. It needs Kafka, so it is compiled
// but not run.
func ExampleAgent() {
	var w control.Seeker // the *worker.Worker
	a, err := control.NewAgent(control.AgentConfig{
		Brokers: []string{"127.0.0.1:9092"}, Group: "kjob-workers", Topic: "kjob.windows",
		Member: "worker-1", Seeker: w,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = a.Run(context.Background()) // until the context ends
}

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
	r, err := control.NewReplayer(control.ReplayerConfig{Brokers: []string{"127.0.0.1:9092"}, Store: store})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	plan, err := r.Plan(ctx, control.ReplaySpec{Group: "kjob-workers", Mode: control.ByDuration, Duration: time.Hour, Rerun: true})
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

// Pause a job; the producer (producer.Config.Pauses) publishes none of its
// windows until it is resumed. It needs Redis, so it is compiled but not run.
func ExamplePauses() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	p, err := control.NewPauses(rdb, "kjob")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Pause(ctx, control.Pause{Job: "nightly-report", Since: time.Now(), By: "alice"}); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Resume(ctx, "nightly-report"); err != nil {
		log.Fatal(err)
	}
}
