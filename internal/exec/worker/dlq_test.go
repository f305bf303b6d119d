package worker

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// kafkaMaxMessageBytes is Kafka's default max.message.bytes, which kfake
// enforces on the whole record batch like Kafka (kfake's 00_produce.go).
const kafkaMaxMessageBytes = 1048588

// dlqTest is one test's broker, Redis, a producer that can write records
// up to the broker's limit, and the log of the worker under test.
type dlqTest struct {
	t       *testing.T
	brokers []string
	store   *dedupe.Store
	raw     *kgo.Client
	logs    *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	dlqTestTopic = "wins"
	dlqTestDLQ   = "wins.dlq"
)

// newDLQTest starts a broker and Redis and creates the windows topic; dlq
// topic configs, if any, create the dead-letter topic with them.
func newDLQTest(t *testing.T, dlqConfigs map[string]*string) *dlqTest {
	t.Helper()
	brokers := testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	store, err := dedupe.New(testenv.NewRedis(t).Client(), dedupe.Config{Namespace: "dlqtest", ClaimTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A client that lets the broker, not franz-go, decide what is too
	// large, and sends records as they are.
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(2<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(raw)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, dlqTestTopic); err != nil {
		t.Fatal(err)
	}
	if dlqConfigs != nil {
		if _, err := adm.CreateTopic(ctx, 1, 1, dlqConfigs, dlqTestDLQ); err != nil {
			t.Fatal(err)
		}
	}
	return &dlqTest{t: t, brokers: brokers, store: store, raw: raw, logs: &lockedBuffer{}}
}

func (d *dlqTest) produce(recs ...*kgo.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.raw.ProduceSync(ctx, recs...).FirstErr()
}

// run starts a worker with an "ok" handler and returns its executions.
func (d *dlqTest) run() *execs {
	x := &execs{}
	mux := handler.NewMux()
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })
	log := slog.New(slog.NewJSONHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(Config{
		Brokers: d.brokers, Topic: dlqTestTopic, Group: "dlqtest", DeadLetterTopic: dlqTestDLQ, Store: d.store, Handler: mux,
		WorkerID: "w1", Grace: 2 * time.Second, ClaimExtendInterval: 100 * time.Millisecond,
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: log, OnExecuted: x.add,
	})
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	d.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				d.t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			d.t.Errorf("Run did not return within 60s of cancel")
		}
	})
	return x
}

// next publishes a valid window after the poison record and returns it.
func (d *dlqTest) next() *jobmsg.Message {
	d.t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	m := &jobmsg.Message{ID: jobmsg.WindowID("next", now), Job: "next", Handler: "ok", Window: jobmsg.Window{Start: now, End: now.Add(time.Minute)},
		ScheduledAt: now, PublishedAt: now, Trigger: jobmsg.TriggerSchedule,
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Second), MaxAttempts: 1, Backoff: 0, MaxBackoff: 0}}
	rec, err := jobmsg.Record(dlqTestTopic, m)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.produce(rec); err != nil {
		d.t.Fatalf("produce the next window: %v", err)
	}
	return m
}

// waitMovedOn waits until the window after the poison record ran and the
// group committed past both.
func (d *dlqTest) waitMovedOn(x *execs, m *jobmsg.Message) {
	d.t.Helper()
	testenv.Eventually(d.t, 60*time.Second, func() bool {
		for _, e := range x.of(m.ID) {
			if e.Outcome == OutcomeDone {
				return true
			}
		}
		return false
	}, "the window after the poison record runs (the partition moved on)")
	testenv.Eventually(d.t, 20*time.Second, func() bool { return d.committed() >= 2 }, "the group commits past the poison record and the next window")
}

func (d *dlqTest) committed() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	os, err := kadm.NewClient(d.raw).FetchOffsets(ctx, "dlqtest")
	if err != nil {
		return -1
	}
	o, ok := os.Lookup(dlqTestTopic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// batchSize is the size of a v2 record batch holding rec alone, as
// franz-go writes it without compression and as the broker measures it.
func batchSize(rec *kgo.Record) int {
	v := func(n int) int { return binary.PutVarint(make([]byte, binary.MaxVarintLen64), int64(n)) }
	body := 1 + v(0) + v(0) // attributes, timestamp delta, offset delta
	if rec.Key == nil {
		body += v(-1)
	} else {
		body += v(len(rec.Key)) + len(rec.Key)
	}
	body += v(len(rec.Value)) + len(rec.Value) + v(len(rec.Headers))
	for _, h := range rec.Headers {
		body += v(len(h.Key)) + len(h.Key) + v(len(h.Value)) + len(h.Value)
	}
	return 61 + v(body) + body
}

// atMaximum pads rec's value with random bytes (not a valid window) until
// its batch is exactly the broker's max.message.bytes.
func atMaximum(t *testing.T, rec *kgo.Record) *kgo.Record {
	t.Helper()
	rec.Topic, rec.Value = dlqTestTopic, nil
	for n := kafkaMaxMessageBytes - batchSize(rec); n > 0; n-- {
		rec.Value = make([]byte, n)
		if batchSize(rec) <= kafkaMaxMessageBytes {
			break
		}
	}
	if _, err := rand.Read(rec.Value); err != nil {
		t.Fatal(err)
	}
	if got := batchSize(rec); got != kafkaMaxMessageBytes {
		t.Fatalf("record batch of %d bytes, want exactly %d", got, kafkaMaxMessageBytes)
	}
	return rec
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A record at the broker's maximum size (and at the maximum with many
// headers) is dead-lettered with a letter that fits, keeps a prefix, the
// size and hash of the value and where the original is, and the partition
// moves on to the next window. Before internal/store/dlq the letter copied the whole
// record, the broker refused it with MESSAGE_TOO_LARGE, and the worker
// retried it forever.
func TestRecordAtBrokerMaximumIsDeadLettered(t *testing.T) {
	for name, rec := range map[string]*kgo.Record{
		"at the maximum": {Key: []byte("huge")},
		"at the maximum with many headers": {Key: []byte("huge"), Headers: func() []kgo.RecordHeader {
			hs := make([]kgo.RecordHeader, 1000)
			for i := range hs {
				hs[i] = kgo.RecordHeader{Key: fmt.Sprintf("x-header-%04d", i), Value: bytes.Repeat([]byte{'h'}, 100)}
			}
			return hs
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDLQTest(t, nil)
			rec = atMaximum(t, rec)
			if err := d.produce(rec); err != nil {
				t.Fatalf("produce a record at the broker's maximum: %v", err)
			}
			over := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: append(bytes.Clone(rec.Value), 0), Headers: rec.Headers}
			if err := d.produce(over); !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("one byte more: err = %v, want MESSAGE_TOO_LARGE: the record is not at the broker's maximum", err)
			}
			m := d.next()
			x := d.run()
			d.waitMovedOn(x, m)

			letters := testenv.ReadCommitted(t, d.brokers, dlqTestDLQ)
			if len(letters) != 1 {
				t.Fatalf("%d dead letters, want 1", len(letters))
			}
			if n := dlq.Size(letters[0]); n > dlq.MaxBytes {
				t.Errorf("letter of %d bytes, above dlq.MaxBytes %d", n, dlq.MaxBytes)
			}
			l, err := dlq.Parse(letters[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := (dlq.Origin{Topic: dlqTestTopic, Partition: 0, Offset: 0}); l.Origin != want {
				t.Errorf("origin %v, want %v", l.Origin, want)
			}
			if l.ValueSize != len(rec.Value) || l.ValueSHA256 != hexSHA256(rec.Value) {
				t.Errorf("value size %d hash %s, want %d %s", l.ValueSize, l.ValueSHA256, len(rec.Value), hexSHA256(rec.Value))
			}
			if !l.ValueTruncated || !bytes.Equal(l.Value, rec.Value[:len(l.Value)]) || len(l.Value) == 0 {
				t.Errorf("letter keeps %d bytes (truncated %v), want a prefix of the value", len(l.Value), l.ValueTruncated)
			}
			if !strings.Contains(l.Reason, "exceeds the limit") {
				t.Errorf("reason %q", l.Reason)
			}
			if len(rec.Headers) > 0 && (l.HeadersDropped == 0 || len(l.Headers)+l.HeadersDropped != len(rec.Headers)) {
				t.Errorf("kept %d and dropped %d of %d headers", len(l.Headers), l.HeadersDropped, len(rec.Headers))
			}
		})
	}
}

// A dead-letter topic whose max.message.bytes refuses the letter gets a
// minimal one; one that refuses even that does not stop the partition:
// the window is settled, an ERROR names the original's coordinates, and
// the next window runs.
func TestRefusedLetterShrinksOrGivesUp(t *testing.T) {
	poison := func() *kgo.Record {
		v := make([]byte, 5000) // random: the worker's client compresses
		if _, err := rand.Read(v); err != nil {
			panic(err)
		}
		return &kgo.Record{Topic: dlqTestTopic, Key: []byte("bad"), Value: v}
	}
	t.Run("minimal letter", func(t *testing.T) {
		limit := "1500"
		d := newDLQTest(t, map[string]*string{"max.message.bytes": &limit})
		rec := poison()
		if err := d.produce(rec); err != nil {
			t.Fatal(err)
		}
		m := d.next()
		d.waitMovedOn(d.run(), m)
		letters := testenv.ReadCommitted(t, d.brokers, dlqTestDLQ)
		if len(letters) != 1 {
			t.Fatalf("%d dead letters, want 1", len(letters))
		}
		l, err := dlq.Parse(letters[0])
		if err != nil {
			t.Fatal(err)
		}
		if !l.Minimal || l.ValueSize != len(rec.Value) || l.ValueSHA256 != hexSHA256(rec.Value) || l.Origin.Offset != 0 {
			t.Errorf("letter: minimal %v, size %d, hash %s, origin %v", l.Minimal, l.ValueSize, l.ValueSHA256, l.Origin)
		}
	})
	t.Run("refused", func(t *testing.T) {
		limit := "100"
		d := newDLQTest(t, map[string]*string{"max.message.bytes": &limit})
		if err := d.produce(poison()); err != nil {
			t.Fatal(err)
		}
		m := d.next()
		x := d.run()
		d.waitMovedOn(x, m)
		if n := len(testenv.ReadCommitted(t, d.brokers, dlqTestDLQ)); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
		if n := x.count(OutcomeDeadLettered); n != 1 {
			t.Errorf("%d dead-lettered executions, want 1 (the window is settled)", n)
		}
		logs := d.logs.String()
		if !strings.Contains(logs, `"level":"ERROR","msg":"the dead-letter topic refused even a minimal dead letter`) ||
			!strings.Contains(logs, `"topic":"wins","partition":0,"offset":0`) {
			t.Errorf("no ERROR naming the original's coordinates in the log:\n%s", logs)
		}
	})
}

func TestLetterRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kerr.MessageTooLarge, true},
		{fmt.Errorf("%w (uncompressed_bytes=1)", kerr.MessageTooLarge), true},
		{kerr.RecordListTooLarge, true},
		{kerr.InvalidRecord, true},
		{kerr.NotLeaderForPartition, false},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.TopicAuthorizationFailed, false},
		{kgo.ErrRecordTimeout, false},
		{context.DeadlineExceeded, false},
	} {
		if got := letterRefused(tc.err); got != tc.want {
			t.Errorf("letterRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
