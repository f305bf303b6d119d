package dedupe_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/dedupe"
)

// A worker's life of one window: claim, run the handler while extending the
// claim, then complete (or release on failure). It needs a Redis server, so
// it is compiled but not run.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "prod", ClaimTTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	id := "report@2026-11-22T10:00:00Z"
	c, err := store.Claim(ctx, id, "worker-1/4711")
	if err != nil {
		log.Printf("redis unavailable, retry later without committing: %v", err)
		return
	}
	switch c.Outcome {
	case dedupe.AlreadyDone:
		log.Printf("%s already done by %s (token %d): skip and commit", id, c.Holder, c.Token)
		return
	case dedupe.Busy:
		log.Printf("%s is being run by %s: look again in %v", id, c.Holder, c.Retry)
		return
	}

	// Claimed: run the handler in a context that ends if the claim is lost.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(5 * time.Second) // ClaimTTL/3
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				if err := store.Extend(hctx, id, c.Token); errors.Is(err, dedupe.ErrFenced) || errors.Is(err, dedupe.ErrAlreadyDone) {
					cancel() // someone else owns the window now
					return
				}
			}
		}
	}()
	herr := runHandler(hctx, c.Token)
	cancel()

	if herr != nil {
		if err := store.Release(ctx, id, c.Token, herr.Error()); err != nil {
			log.Printf("release: %v", err)
		}
		return
	}
	switch err := store.Complete(ctx, id, c.Token); {
	case err == nil, errors.Is(err, dedupe.ErrAlreadyDone):
		log.Printf("%s done: commit the offset", id)
	case errors.Is(err, dedupe.ErrFenced):
		log.Printf("%s: a newer attempt took over; its completion counts, not ours", id)
	default:
		log.Printf("complete %s: outcome unknown, retry: %v", id, err)
	}
}

// runHandler stands in for the user's handler; it passes the fencing token
// to the systems it writes to.
func runHandler(ctx context.Context, token int64) error { return ctx.Err() }
