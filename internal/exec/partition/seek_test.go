package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Seek rewinds an owned partition while the consumer runs: the records
// after the target are processed again, in order and contiguously (no
// record fetched at the old position reaches the new goroutine), and the
// committed offset follows.
func TestSeekRewindsWhileRunning(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 2)
	pcl := producer(t, brokers)
	produce(t, pcl, "t", 0, values("a", 0, 50)...)
	l := newLedger()
	c := newConsumer(t, baseConfig(t, brokers, "g", "t", "m1", func(_ context.Context, rec *kgo.Record) error {
		l.add("m1", rec)
		return nil
	}))
	run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool { return committedNow(brokers) == 50 }, "first pass committed")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Records keep arriving while the seek happens.
	produced := make(chan error, 1)
	go func() {
		var recs []*kgo.Record
		for _, v := range values("b", 50, 100) {
			recs = append(recs, &kgo.Record{Topic: "t", Partition: 0, Value: []byte(v)})
		}
		produced <- pcl.ProduceSync(ctx, recs...).FirstErr()
	}()
	if err := c.Seek(ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return committedNow(brokers) == 100 }, "second pass committed")
	l.mu.Lock()
	order := append([]int64(nil), l.order[0]...)
	l.mu.Unlock()
	// The processed offsets: 0..k, then a restart at 10, then 10..99
	// contiguous.
	restart := -1
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			restart = i
			break
		}
	}
	if restart < 0 || order[restart] != 10 {
		t.Fatalf("no restart at offset 10 in %v", order)
	}
	for i := restart + 1; i < len(order); i++ {
		if order[i] != order[i-1]+1 {
			t.Fatalf("after the seek, offset %d follows %d: %v", order[i], order[i-1], order[restart:])
		}
	}
	if order[len(order)-1] != 99 {
		t.Fatalf("last processed offset %d, want 99", order[len(order)-1])
	}

	// A partition that fetched nothing yet can be sought too; one not
	// owned cannot.
	if err := c.Seek(ctx, 1, 0); err != nil {
		t.Fatalf("seek empty partition: %v", err)
	}
	if err := c.Seek(ctx, 5, 0); !errors.Is(err, ErrNotOwned) || err.Error() != "partition: seek t[5]: partition: not owned by this member" {
		t.Fatalf("seek unowned partition: %v", err)
	}
	if err := c.Seek(ctx, 0, -1); err == nil || err.Error() != "partition: seek t[0] to -1: offset must be >= 0" {
		t.Fatalf("seek to -1: %v", err)
	}
}

// committedNow is the group's committed offset of t[0], -1 if none yet.
func committedNow(brokers []string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return -1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		return -1
	}
	o, ok := os.Lookup("t", 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}
