package producer_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// A producer replica: load the schedules, elect with a Redis lease, publish
// while leading. Run the same program on two or more machines with the same
// lease key and transactional id; SIGTERM hands leadership over.
//
// The example brings its own Kafka (the in-process kfake broker) and Redis
// (a throwaway redis-server), and stops after the first window is
// published. A real replica gets its brokers and Redis URL from its
// configuration, loads its schedules with schedule.Load (which stops it at
// start-up, naming file and line, if the file is invalid), and runs until
// signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM) is done.
func Example() {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println("kafka:", err)
		return
	}
	defer kafka.Close()
	redisAddr, stopRedis, err := testenv.ExampleRedis()
	if err != nil {
		fmt.Println("redis:", err)
		return
	}
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler) // a real process logs to stderr

	file, err := schedule.Parse("schedules.yaml", []byte(`
jobs:
  - name: report
    schedule: "@every 1s"
    handler: report
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	lock, err := lease.NewRedisLock(rdb, "kjob:{example}:producer-lease")
	if err != nil {
		fmt.Println(err)
		return
	}
	elector, err := lease.NewElector(lease.Config{Lock: lock, Holder: "producer-1", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	published := make(chan producer.Published, 1)
	p, err := producer.New(producer.Config{
		Brokers:         kafka.ListenAddrs(),
		Jobs:            file.Jobs,
		Elector:         elector,
		TransactionalID: "kjob-producer-example", // the same on every replica of this deployment
		Logger:          quiet,
		OnPublished: func(ws []producer.Published) {
			for _, w := range ws {
				select {
				case published <- w:
				default:
				}
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	select {
	case w := <-published:
		fmt.Printf("published a %s window of %s, starting on a whole second: %v\n", w.Trigger, w.Job, w.Start.Equal(w.Start.Truncate(time.Second)))
	case <-ctx.Done():
		fmt.Println("nothing published within 30s")
	}
	cancel() // as SIGTERM would: stop publishing and release the lease
	fmt.Println("Run:", <-stopped)
	// Output:
	// published a schedule window of report, starting on a whole second: true
	// Run: <nil>
}
