package inspect_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/ops/inspect"
)

// A dashboard takes a Snapshot per refresh. It needs Kafka and Redis, so
// it is compiled but not run.
func ExampleInspector_Snapshot() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	in, err := inspect.New(inspect.Config{Brokers: []string{"127.0.0.1:9092"}, Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	s, err := in.Snapshot(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if s.Leader != nil {
		fmt.Println("leader:", s.Leader.Holder)
	}
	for _, j := range s.Jobs {
		fmt.Println(j.Name, j.Next)
	}
}
