package producer_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/pkg/lease"
	"github.com/kjob/kjob/pkg/producer"
	"github.com/kjob/kjob/pkg/schedule"
)

// Example shows a producer replica: load the schedules, elect with a Redis
// lease, publish while leading. Run the same program on two or more
// machines; SIGTERM hands leadership over at once.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	file, err := schedule.Load("schedules.yaml") // stops here, naming file:line, if invalid
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	lock, err := lease.NewRedisLock(rdb, "kjob:{prod}:producer-lease")
	if err != nil {
		log.Fatal(err)
	}
	elector, err := lease.NewElector(lease.Config{Lock: lock, Holder: "producer-a"})
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.Config{
		Brokers:         []string{"127.0.0.1:9092"},
		Jobs:            file.Jobs,
		Elector:         elector,
		TransactionalID: "kjob-producer-prod", // the same on every replica of this deployment
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
