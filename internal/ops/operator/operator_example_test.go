package operator_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/schedule"
)

// Publish one manual window of a job now, as kjobctl trigger and the
// dashboard's "trigger now" do. It needs Kafka, so it is compiled but not
// run.
func ExampleTrigger() {
	f, err := schedule.Load("schedules.yaml")
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	m, rec, err := operator.Trigger(context.Background(), cl, names.Deployment{}, f.Jobs[0], nil, time.Now())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.ID, rec.Partition, rec.Offset)
}

// Redrive every dead letter whose window is neither done nor running, as
// kjobctl dlq redrive --all --execute does. It needs Kafka and Redis, so
// it is compiled but not run.
func ExampleExecuteRedrive() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store, _ := dedupe.New(rdb, dedupe.Config{Namespace: "kjob"})
	rd, _ := operator.NewRedrives(rdb, "kjob")
	opts := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}
	letters, err := operator.ReadDeadLetters(ctx, opts, "kjob.windows.dlq")
	if err != nil {
		log.Fatal(err)
	}
	if err := operator.AnnotateDeadLetters(ctx, store, rd, "kjob.windows.dlq", letters); err != nil {
		log.Fatal(err)
	}
	items := operator.PlanRedrive(letters, false)
	cl, _ := kgo.NewClient(append(opts, kgo.RecordPartitioner(names.Partitioner()))...)
	defer cl.Close()
	out, err := operator.ExecuteRedrive(ctx, operator.RedriveConfig{Client: cl, Store: store, Redrives: rd,
		DLQTopic: "kjob.windows.dlq", Topic: "kjob.windows", By: "ops", Now: time.Now}, items, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(out), "redriven")
}

// Read the newest records of the operators' audit log. It needs Redis, so
// it is compiled but not run.
func ExampleAuditLog() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	audit, err := operator.NewAuditLog(rdb, "kjob", 0)
	if err != nil {
		log.Fatal(err)
	}
	recs, err := audit.Recent(context.Background(), 20)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.At.Format(time.RFC3339), r.Who, r.Action, r.Target, r.Outcome, r.Detail)
	}
}
