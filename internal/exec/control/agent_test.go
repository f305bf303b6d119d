package control_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// countingSeeker owns partitions 0 and 1 and counts the seeks of each.
type countingSeeker struct {
	mu    sync.Mutex
	seeks map[int32]int
}

func (s *countingSeeker) Assigned() []int32 { return []int32{0, 1} }

func (s *countingSeeker) Seek(ctx context.Context, p int32, offset int64) error {
	s.mu.Lock()
	s.seeks[p]++
	s.mu.Unlock()
	return nil
}

func (s *countingSeeker) count(p int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seeks[p]
}

// The same request id delivered several times (the requester re-sends it
// every few seconds until it sees an ack, and the owner acks only once the
// seek is applied) is applied once: every copy is acknowledged, and the
// partition is seeked exactly once.
func TestAgentAppliesARequestIDOnce(t *testing.T) {
	brokers := testenv.Brokers(t)
	const group, topic, ctl = "g", "w", "w.control"
	seeker := &countingSeeker{seeks: map[int32]int{}}
	a, err := control.NewAgent(control.AgentConfig{Brokers: brokers, Group: group, Topic: topic, Member: "wa", Seeker: seeker,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, acancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	defer func() {
		acancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ctl: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	acks := map[string]int{}
	send := func(id string, p int32) {
		t.Helper()
		req := &control.SeekRequest{ID: id, Group: group, Topic: topic, Offsets: map[int32]int64{p: 7}, IssuedBy: "test", IssuedAt: time.Now()}
		rec, err := req.Record(ctl)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// read collects acks until cond holds or deadline passes.
	read := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s; acks %v", what, acks)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if control.Kind(r) != control.KindSeekAck {
					return
				}
				ack, err := control.ParseSeekAck(r)
				if err != nil {
					t.Fatal(err)
				}
				if ack.Error != "" {
					t.Fatalf("ack with error: %+v", ack)
				}
				acks[ack.RequestID]++
			})
		}
	}
	// The agent reads from the end of the control topic from its start:
	// a probe on partition 1, re-sent until acknowledged, says it is up.
	for acks["probe"] == 0 {
		send("probe", 1)
		until := time.Now().Add(time.Second)
		read("the probe's ack", func() bool { return acks["probe"] > 0 || time.Now().After(until) })
	}

	// The same request four times, then a sentinel: the agent handles
	// requests in order, so once the sentinel is acknowledged every copy
	// before it was handled.
	for range 4 {
		send("r1", 0)
	}
	send("sentinel", 1)
	read("the acks of r1 and the sentinel", func() bool { return acks["sentinel"] > 0 && acks["r1"] >= 4 })
	if n := seeker.count(0); n != 1 {
		t.Fatalf("request r1 delivered 4 times seeked partition 0 %d times, want 1", n)
	}
	if acks["r1"] != 4 {
		t.Fatalf("request r1 delivered 4 times was acknowledged %d times, want 4 (duplicates are acknowledged too)", acks["r1"])
	}
}
