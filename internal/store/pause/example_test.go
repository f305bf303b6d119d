package pause_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/pause"
)

// Pause a job; the producer (producer.Config.Pauses) publishes none of its
// windows until it is resumed. It needs Redis, so it is compiled but not run.
func ExampleStore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	p, err := pause.New(rdb, "kjob")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Pause(ctx, pause.Pause{Job: "nightly-report", Since: time.Now(), By: "alice"}); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Resume(ctx, "nightly-report"); err != nil {
		log.Fatal(err)
	}
}
