package kread_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func createTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A record written while ListSpansSince lists is at or after the Start it
// lists, so a reader that starts there reads it. The record is written at
// the one moment that matters: the broker has answered the listing by
// timestamp with "nothing at or after it" (the topic holds only an older
// record) and kadm lists the end offset again; that second end, used as
// the start, was past the record (the request a producer leader never
// answered, docs/schedules.md).
func TestListSpansSinceMissesNoRecordWrittenWhileListing(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	const topic = "requests"
	createTopic(t, brokers, topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	now := time.Now()
	produce(t, cl, &kgo.Record{Value: []byte("old"), Timestamp: now.Add(-time.Hour)})

	written := &kgo.Record{Value: []byte("new")}
	var werr error
	done := testenv.WriteWhileListingSince(c, topic, func() {
		werr = cl.ProduceSync(context.Background(), written).FirstErr()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spans, err := kread.ListSpansSince(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, now.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Recv(t, done, 20*time.Second, "the record written during the listing")
	if werr != nil {
		t.Fatal(werr)
	}
	sp := spans[0]
	if sp.Start > written.Offset || sp.Start > sp.End {
		t.Fatalf("listed %+v; the record written during the listing is at offset %d: a reader from Start misses it", sp, written.Offset)
	}
	if sp != (kread.Span{Start: 1, End: 1}) {
		t.Fatalf("listed %+v, want the old record (offset 0) left out and the end listed first, {1 1}", sp)
	}

	// Since before the old record: it is the start; since after
	// everything: the start is the end.
	spans, err = kread.ListSpansSince(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, now.Add(-2*time.Hour))
	if err != nil || spans[0] != (kread.Span{Start: 0, End: 2}) {
		t.Fatalf("since before every record: %+v, %v; want {0 2}", spans, err)
	}
	spans, err = kread.ListSpansSince(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, now.Add(time.Hour))
	if err != nil || spans[0] != (kread.Span{Start: 2, End: 2}) {
		t.Fatalf("since after every record: %+v, %v; want {2 2}", spans, err)
	}
	if _, err := kread.ListSpans(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, "no-such-topic"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("a missing topic: %v, want UnknownTopicOrPartition", err)
	}
}

// A read-committed read up to the listed end (ReadSpans, Backlog) ends
// whatever the last records are: a committed transaction, an aborted one
// (its records are never returned, its marker is), plain records; a
// transaction still open at the listing holds the read until it ends,
// and its records are read if it commits.
func TestReadSpansEndsAfterTransactions(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	const topic = "specs"
	createTopic(t, brokers, topic)
	plain, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.TransactionalID("kread-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inTxn := func(commit bool, values ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			produce(t, txn, &kgo.Record{Value: []byte(v)})
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	readSeen := func(spans kread.Spans, seen func(string)) ([]string, error) {
		var out []string
		err := kread.ReadSpans(ctx, opts, topic, spans, func(r *kgo.Record) error {
			out = append(out, string(r.Value))
			if seen != nil {
				seen(string(r.Value))
			}
			return nil
		})
		return out, err
	}
	read := func(spans kread.Spans) []string {
		t.Helper()
		out, err := readSeen(spans, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	list := func() kread.Spans {
		t.Helper()
		s, err := kread.ListSpans(ctx, opts, topic)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: read %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: read %q, want %q", what, got, want)
			}
		}
	}

	check("an empty topic", read(list()))
	inTxn(true, "a", "b")
	check("ending in a committed transaction", read(list()), "a", "b")
	inTxn(false, "x")
	check("ending in an aborted transaction", read(list()), "a", "b")
	produce(t, plain, &kgo.Record{Value: []byte("c")})
	check("ending in a plain record", read(list()), "a", "b", "c")

	// A transaction open at the listing: the read waits for it.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, txn, &kgo.Record{Value: []byte("d")})
	spans := list()
	type result struct {
		vals []string
		err  error
	}
	got := make(chan result, 1)
	sawC := make(chan struct{})
	go func() {
		vals, err := readSeen(spans, func(v string) {
			if v == "c" {
				close(sawC)
			}
		})
		got <- result{vals, err}
	}()
	testenv.Recv(t, sawC, 20*time.Second, "the reader at the record before the open transaction")
	select {
	case g := <-got:
		t.Fatalf("the read ended with %q (%v) while a transaction it listed was open", g.vals, g.err)
	default:
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	r := testenv.Recv(t, got, 20*time.Second, "the read after the commit")
	if r.err != nil {
		t.Fatal(r.err)
	}
	check("a transaction open at the listing, then committed", r.vals, "a", "b", "c", "d")

	// Backlog: a partition is read once the reader got End-1.
	b := kread.Spans{0: {Start: 0, End: 3}, 1: {Start: 5, End: 5}}.Backlog()
	if b.Read() {
		t.Fatal("a backlog with offsets 0-2 to read is read before any record")
	}
	b.See(&kgo.Record{Partition: 0, Offset: 1})
	if b.Read() {
		t.Fatal("read at offset 1 of 0-2")
	}
	b.See(&kgo.Record{Partition: 0, Offset: 2})
	if !b.Read() {
		t.Fatal("not read at offset 2 of 0-2 (the empty partition 1 has nothing to read)")
	}
}
