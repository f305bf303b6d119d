package producer

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// txnProducer is a Producer whose topics exist, and a function that opens
// a transactional client as a term does (same options).
func txnProducer(t *testing.T, brokers []string) (*Producer, func() *kgo.Client) {
	t.Helper()
	f, err := schedule.Parse("test.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: h\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Brokers: brokers, Jobs: f.Jobs, Elector: noElector{}, Logger: slog.New(slog.DiscardHandler), TransactionalID: "txn-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ensureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	open := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(p.cfg.TransactionalID),
			kgo.TransactionTimeout(p.cfg.TransactionTimeout), kgo.ProducerLinger(0), kgo.RecordPartitioner(names.Partitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	return p, open
}

type epochs struct {
	ids       map[int64]bool
	rotations int   // producer id changed
	bumps     int   // epoch changed with the same id
	last      int16 // epoch after the last transaction
}

// publishN publishes n windows of job a, one transaction each, through
// the producer's own publish, and follows the producer id and epoch
// after each commit.
func publishN(t *testing.T, p *Producer, cl *kgo.Client, from time.Time, n int) epochs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := epochs{ids: map[int64]bool{id: true}}
	j := p.cfg.Jobs[0]
	for i := range n {
		if err := p.publish(ctx, cl, []window{{job: j, start: from.Add(time.Duration(i) * time.Second), trigger: jobmsg.TriggerSchedule}}, nil); err != nil {
			t.Fatalf("transaction %d (producer id %d, epoch %d): %v", i, id, epoch, err)
		}
		nid, nepoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case nid != id:
			e.rotations++
			if nepoch != 0 {
				t.Errorf("producer id rotated from %d (epoch %d) to %d with epoch %d, want epoch 0", id, epoch, nid, nepoch)
			}
		case nepoch != epoch:
			e.bumps++
		}
		e.ids[nid] = true
		id, epoch = nid, nepoch
	}
	e.last = epoch
	return e
}

// fenceCheck: a new holder of the transactional id fences the old client,
// whose next publish fails with ErrFenced and whose window no
// read-committed reader sees, while the new holder's window is visible.
func fenceCheck(t *testing.T, p *Producer, zombie *kgo.Client, fresh *kgo.Client, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := fresh.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	j := p.cfg.Jobs[0]
	err := p.publish(ctx, zombie, []window{{job: j, start: at, trigger: jobmsg.TriggerSchedule}}, nil)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's publish after a new holder fenced it: %v, want ErrFenced", err)
	}
	t.Logf("the zombie's publish: %v", err)
	if err := p.publish(ctx, fresh, []window{{job: j, start: at.Add(time.Second), trigger: jobmsg.TriggerSchedule}}, nil); err != nil {
		t.Fatalf("the new holder's publish: %v", err)
	}
	seen := map[string]bool{}
	for _, r := range testenv.ReadCommitted(t, p.cfg.Brokers, p.cfg.Topic) {
		if m, err := jobmsg.Unmarshal(r.Value); err == nil {
			seen[m.ID] = true
		}
	}
	if seen[jobmsg.WindowID(j.Name, at)] {
		t.Error("the fenced zombie's window is visible to a read-committed reader")
	}
	if !seen[jobmsg.WindowID(j.Name, at.Add(time.Second))] {
		t.Error("the new holder's window is not visible")
	}
}

// Kafka 4's transaction protocol (KIP-890, transaction.version 2, which
// kfake finalizes by default): every commit bumps the epoch, and the
// producer id rotates when the epoch nears 32,767. A leader publishing a
// window a second does that in 9 hours. More than 32,767 transactions go
// through the producer's own publish across the rotation, and a new
// holder of the transactional id still fences the old one afterwards.
func TestTransactionsAcrossProducerIDRotation(t *testing.T) {
	brokers := testenv.Brokers(t)
	p, open := txnProducer(t, brokers)
	zombie := open()
	const n = 32_800
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	e := publishN(t, p, zombie, t0, n)
	took := time.Since(start)
	t.Logf("%d transactions in %v (%v each): %d producer id rotation(s), %d epoch bumps, last epoch %d",
		n, took.Round(time.Millisecond), (took / n).Round(time.Microsecond), e.rotations, e.bumps, e.last)
	if e.rotations != 1 || len(e.ids) != 2 {
		t.Fatalf("%d rotations over %d producer ids in %d transactions, want the id to rotate once", e.rotations, len(e.ids), n)
	}
	fenceCheck(t, p, zombie, open(), t0.Add(n*time.Second))
}

// Kafka 3.9's transaction protocol (transaction.version 1: EndTxn up to
// v4, no epoch bump per transaction): the broker is pinned to 3.9's API
// versions and features. The epoch stays what InitProducerID gave, and a
// new holder fences the old one.
func TestTransactionsOnKafka39Protocol(t *testing.T) {
	brokers := testenv.Brokers(t, kfake.MaxVersions(kversion.V3_9_0()))
	p, open := txnProducer(t, brokers)
	zombie := open()
	const n = 500
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	e := publishN(t, p, zombie, t0, n)
	if e.rotations != 0 || e.bumps != 0 {
		t.Fatalf("%d rotations and %d epoch bumps in %d transactions: the broker spoke Kafka 4's protocol, not 3.9's", e.rotations, e.bumps, n)
	}
	fenceCheck(t, p, zombie, open(), t0.Add(n*time.Second))
}
