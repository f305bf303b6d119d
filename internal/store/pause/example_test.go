package pause_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/pause"
)

// List the jobs an older kjobctl paused in Redis: the producer leader
// migrates each into a spec pause and deletes the entry. It needs Redis, so
// it is compiled but not run.
func ExampleStore_List() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	p, err := pause.New(rdb, "kjob")
	if err != nil {
		log.Fatal(err)
	}
	left, err := p.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for job, e := range left {
		fmt.Printf("%s paused by %s since %s, not migrated yet\n", job, e.By, e.Since)
	}
}
