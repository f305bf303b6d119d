package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/lease"
)

// A producer replica: every replica runs this; the one holding the lease
// runs lead until its context is cancelled. (It needs a Redis, so it is
// compiled, not run.)
func Example() {
	// ContextTimeoutEnabled lets calls in flight end with their context,
	// so shutdown is not held up by a hung Redis.
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	// The hash tag {prod} keeps the lease and its epoch counter in one
	// Redis Cluster slot.
	lock, err := lease.NewRedisLock(rdb, "kjob:{prod}:producer-lease")
	if err != nil {
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	el, err := lease.NewElector(lease.Config{
		Lock:          lock,
		Holder:        fmt.Sprintf("%s-%d", host, os.Getpid()),
		TTL:           5 * time.Second,
		RenewInterval: time.Second,
		OnChange: func(ev lease.Event) {
			// e.g. leaderGauge.Set(1) on lease.Acquired, 0 otherwise
			log.Printf("leadership %s (epoch %d): %s", ev.Kind, ev.Record.Epoch, ev.Reason)
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = el.Run(ctx, func(ctx context.Context) error {
		rec, _ := el.Current()
		log.Printf("publishing as leader, epoch %d", rec.Epoch)
		<-ctx.Done() // publish until ctx is done, then return promptly
		if errors.Is(context.Cause(ctx), lease.ErrLost) {
			log.Printf("leadership lost: %v", context.Cause(ctx))
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// Inspecting who holds the lease, e.g. for a status command.
func ExampleRedisLock_Get() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	lock, err := lease.NewRedisLock(rdb, "kjob:{prod}:producer-lease")
	if err != nil {
		log.Fatal(err)
	}
	rec, err := lock.Get(context.Background())
	switch {
	case errors.Is(err, lease.ErrNoHolder):
		fmt.Println("no leader")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("leader %s, epoch %d, since %s\n", rec.Holder, rec.Epoch, rec.Acquired.Format(time.RFC3339))
	}
}
