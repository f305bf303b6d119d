package producer_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestPausedJobIsNotPublishedNorCaughtUp pauses a job in Redis: the leader
// publishes none of its windows, a new leader does not catch them up (the
// state advanced past them), and after resume it is published again.
func TestPausedJobIsNotPublishedNorCaughtUp(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	pauses, err := pause.New(rdb, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pauses.Pause(ctx, pause.Pause{Job: "a", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, everyTen) // a may catch up 25s, b never
	start := func() (*producer.Producer, func() []producer.Published, context.CancelFunc, chan error) {
		var mu sync.Mutex
		var pubs []producer.Published
		p, err := producer.New(producer.Config{
			Brokers: brokers, Jobs: js, Elector: alwaysLeader{}, Clock: clk, Partitions: 2,
			TransactionalID: "test-txn", Logger: slog.New(slog.DiscardHandler), Pauses: pauses,
			OnPublished: func(ps []producer.Published) { mu.Lock(); pubs = append(pubs, ps...); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		return p, func() []producer.Published { mu.Lock(); defer mu.Unlock(); return slices.Clone(pubs) }, cancel, done
	}
	stop := func(cancel context.CancelFunc, done chan error) {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("producer did not stop")
		}
	}

	p1, pubs1, cancel1, done1 := start()
	testenv.Eventually(t, 20*time.Second, func() bool { return p1.Status().Leading && len(p1.Status().Next) > 0 }, "p1 not leading")
	clk.Set(t0.Add(5 * time.Second)) // 10:00:10
	testenv.Eventually(t, 10*time.Second, func() bool { return len(pubs1()) == 1 }, "b@10:00:10 not published")
	testenv.Eventually(t, 10*time.Second, func() bool { return p1.Status().Last["a"].Equal(t0.Add(5 * time.Second)) }, "state of paused a did not advance")
	stop(cancel1, done1)

	// New leader after an outage: a's :20 and :30 are within its catch-up
	// limit but were skipped while paused, so they are not caught up. b's
	// :30 is within the misfire grace (10s) of the takeover at :32, so it
	// is; b's :20 is not.
	clk.Set(t0.Add(27 * time.Second)) // 10:00:32
	p2, pubs2, cancel2, done2 := start()
	defer func() { stop(cancel2, done2) }()
	testenv.Eventually(t, 20*time.Second, func() bool { return p2.Status().Leading && len(p2.Status().Next) > 0 }, "p2 not leading")
	if _, err := pauses.Resume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(35 * time.Second)) // 10:00:40
	testenv.Eventually(t, 10*time.Second, func() bool { return len(pubs2()) == 3 }, "windows at 10:00:40 not published after resume")

	ids, _ := windowIDs(t, brokers)
	want := []string{"a@2026-11-22T10:00:40Z", "b@2026-11-22T10:00:10Z", "b@2026-11-22T10:00:30Z", "b@2026-11-22T10:00:40Z"}
	if !slices.Equal(ids, want) {
		t.Fatalf("windows topic holds %v, want %v", ids, want)
	}
}
