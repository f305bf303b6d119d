package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestWorkerOnRedisCluster runs a worker against a real three-master Redis
// Cluster: a backlog mixing 20 jobs (so many hash slots) goes through the
// batched claim and completion path, and every window runs exactly once.
func TestWorkerOnRedisCluster(t *testing.T) {
	cluster := testenv.NewRedisCluster(t)
	rdb := cluster.Client()
	brokers := testenv.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "cluster", ClaimTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "cluster.windows"
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if resp, err := kadm.NewClient(prod).CreateTopic(ctx, 2, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	var want []string
	now := time.Now().UTC().Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 200 {
		job := fmt.Sprintf("job-%02d", i%20)
		start := now.Add(-time.Duration(i/20+1) * time.Minute)
		m := &jobmsg.Message{
			ID: jobmsg.WindowID(job, start), Job: job, Handler: "count",
			Window:      jobmsg.Window{Start: start, End: start.Add(time.Minute)},
			ScheduledAt: start, PublishedAt: now, Trigger: jobmsg.TriggerSchedule,
			Policy: jobmsg.Policy{Timeout: jobmsg.Duration(5 * time.Second), MaxAttempts: 3,
				Backoff: jobmsg.Duration(10 * time.Millisecond), MaxBackoff: jobmsg.Duration(50 * time.Millisecond)},
		}
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		want = append(want, m.ID)
	}

	var mu sync.Mutex
	runs := map[string]int{}
	mux := handler.NewMux()
	mux.HandleFunc("count", func(_ context.Context, j *handler.Job) error {
		mu.Lock()
		runs[j.ID()]++
		mu.Unlock()
		return nil
	})
	w, err := worker.New(worker.Config{Brokers: brokers, Topic: topic, Group: "cluster-workers", Store: store, Handler: mux,
		WorkerID: "w1", ClaimExtendInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	testenv.Eventually(t, 45*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(want)
	}, "not every window ran on the cluster")
	for _, id := range want {
		st, err := store.State(ctx, id)
		if err != nil || st.Status != dedupe.StatusDone {
			t.Fatalf("window %s: state %+v, %v; want done", id, st, err)
		}
	}
	wcancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("window %s ran %d times", id, n)
		}
	}
}
