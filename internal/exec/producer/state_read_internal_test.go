package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// fillState creates the state topic and writes batches of perBatch state
// records (one job each, distinct names), one produce batch per call.
func fillState(tb testing.TB, brokers []string, stateTopic string, batches, perBatch int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	if err := topic.Ensure(ctx, kadm.NewClient(cl), topic.Spec{Name: stateTopic, Partitions: 1, ReplicationFactor: 1, Compacted: true}); err != nil {
		tb.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for b := range batches {
		recs := make([]*kgo.Record, 0, perBatch)
		for i := range perBatch {
			job := fmt.Sprintf("job-%06d", b*perBatch+i)
			rec, err := jobmsg.StateRecord(stateTopic, jobmsg.State{Job: job, LastWindow: start, LastID: jobmsg.WindowID(job, start), PublishedAt: start})
			if err != nil {
				tb.Fatal(err)
			}
			recs = append(recs, rec)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
	}
}

func stateReader(tb testing.TB, brokers []string, stall time.Duration, opts ...kgo.Opt) (*Producer, *kgo.Client) {
	tb.Helper()
	p, err := New(Config{Brokers: brokers, Jobs: []*schedule.Job{{Name: "a", Spec: "@every 1s", Handler: "h"}},
		Elector: noElector{}, Logger: slog.New(slog.DiscardHandler), ClientOpts: opts})
	if err != nil {
		tb.Fatal(err)
	}
	p.stateReadStall = stall
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return p, cl
}

// slowFetches makes the broker answer every fetch after delay, as a real
// broker far away or busy would: the state read then lasts about
// delay × fetches.
func slowFetches(c *kfake.Cluster, delay time.Duration) {
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(delay) })
		return nil, nil, false
	})
}

// A state topic that takes far longer to read than the read's bound is
// read to its end as long as records keep arriving: the bound is on a
// stall, not on the read's length (a fixed limit would stop a new leader
// for ever once the state topic outgrew it).
func TestStateReadOutlastsItsBoundWhileItProgresses(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	const batches, perBatch = 30, 20
	fillState(t, brokers, "s", batches, perBatch)
	const stall = 2 * time.Second
	// One batch (about 3 KB) per fetch, each answered 150ms late: about
	// 30 fetches, 4.5s, more than twice the bound.
	p, cl := stateReader(t, brokers, stall, kgo.FetchMaxBytes(1024), kgo.FetchMaxPartitionBytes(1024))
	p.cfg.StateTopic = "s"
	slowFetches(c, 150*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	state, err := p.readState(ctx, cl)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("state read failed after %v (bound %v on no progress): %v", took, stall, err)
	}
	if len(state) != batches*perBatch {
		t.Fatalf("read %d jobs, want %d", len(state), batches*perBatch)
	}
	t.Logf("read %d state records in %v with a %v no-progress bound", len(state), took.Round(time.Millisecond), stall)
	if took <= stall {
		t.Logf("the read was faster than the bound (%v): this run did not exercise a long read", took)
	}
}

// A read that stops receiving records fails after the bound, saying so.
func TestStateReadFailsWhenItStalls(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	fillState(t, brokers, "s", 1, 5)
	p, cl := stateReader(t, brokers, time.Second)
	p.cfg.StateTopic = "s"
	// Every fetch waits until the cluster closes: no progress at all.
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() {
			select {
			case <-stop:
			case <-time.After(time.Minute):
			}
		})
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.readState(ctx, cl)
	if !errors.Is(err, kread.ErrStalled) || !strings.Contains(err.Error(), "no progress for 1s") {
		t.Fatalf("err = %v, want a stall after 1s without progress", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the read ran until the test's own deadline instead of its stall bound")
	}
}
