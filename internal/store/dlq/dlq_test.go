package dlq_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// kafkaMaxMessageBytes is Kafka's default max.message.bytes (and kfake's).
const kafkaMaxMessageBytes = 1048588

var at = time.Date(2026, 11, 22, 9, 0, 4, 500_000_000, time.UTC)

func random(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func manyHeaders(n, size int) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, n)
	for i := range hs {
		hs[i] = kgo.RecordHeader{Key: fmt.Sprintf("h%04d", i), Value: bytes.Repeat([]byte{'v'}, size)}
	}
	return hs
}

// The bound leaves room for a window the worker can run: its whole value
// fits however large the other parts of the letter are.
func TestBoundKeepsRunnableValuesWhole(t *testing.T) {
	rec := &kgo.Record{
		Topic: strings.Repeat("t", 249), Partition: 1 << 30, Offset: 1 << 60,
		Key:     random(t, 100*dlq.MaxKeyBytes),
		Value:   random(t, jobmsg.MaxValueBytes),
		Headers: manyHeaders(1000, 200),
	}
	l := dlq.New("kjob.windows.dlq", rec, dlq.Meta{Reason: strings.Repeat("r", 1<<20), Worker: strings.Repeat("w", 1<<20), Attempts: 1 << 30, At: at})
	if n := dlq.Size(l); n > dlq.MaxBytes {
		t.Fatalf("Size = %d, above MaxBytes %d", n, dlq.MaxBytes)
	}
	if !bytes.Equal(l.Value, rec.Value) {
		t.Fatalf("a value of jobmsg.MaxValueBytes was cut to %d bytes", len(l.Value))
	}
	if dlq.MaxBytes+1000 > 1000012 {
		t.Fatalf("MaxBytes %d leaves no room under franz-go's default batch limit", dlq.MaxBytes)
	}
}

func TestNewAndParse(t *testing.T) {
	value := []byte(`{"v":1}`)
	rec := &kgo.Record{Topic: "kjob.windows", Partition: 2, Offset: 57, Key: []byte("sync"), Value: value,
		Headers: []kgo.RecordHeader{{Key: "kjob-schema", Value: []byte("1")}, {Key: "kjob-dlq-reason", Value: []byte("forged")}}}
	l, err := dlq.Parse(dlq.New("d", rec, dlq.Meta{Reason: "boom", Attempts: 3, Worker: "worker-1", At: at}))
	if err != nil {
		t.Fatal(err)
	}
	want := dlq.Origin{Topic: "kjob.windows", Partition: 2, Offset: 57}
	switch {
	case l.Reason != "boom":
		t.Errorf("Reason %q: an original header named like the letter's own must not replace it", l.Reason)
	case l.Origin != want:
		t.Errorf("Origin %v, want %v", l.Origin, want)
	case l.Attempts != 3 || l.Worker != "worker-1" || !l.At.Equal(at):
		t.Errorf("Meta %+v", l.Meta)
	case string(l.Key) != "sync" || !bytes.Equal(l.Value, value) || l.ValueSize != len(value) || l.ValueSHA256 != sum(value):
		t.Errorf("key %q value %q size %d hash %s", l.Key, l.Value, l.ValueSize, l.ValueSHA256)
	case len(l.Headers) != 1 || l.Headers[0].Key != "kjob-schema":
		t.Errorf("Headers %v, want the original kjob-schema only", l.Headers)
	case l.HeadersDropped != 1 || l.Complete():
		t.Errorf("HeadersDropped %d, Complete %v: the forged header was left out and counted", l.HeadersDropped, l.Complete())
	}
	if l.Origin.String() != "kjob.windows[2]@57" {
		t.Errorf("Origin.String() = %q", l.Origin)
	}
}

// A value too large for the bound is cut to a prefix; its size and hash
// still identify the original.
func TestOversizedValue(t *testing.T) {
	value := random(t, 1_000_117)
	rec := &kgo.Record{Topic: "kjob.windows", Offset: 9, Key: []byte("k"), Value: value}
	r := dlq.New("d", rec, dlq.Meta{Reason: "too large", At: at})
	if dlq.Size(r) > dlq.MaxBytes {
		t.Fatalf("Size %d > MaxBytes", dlq.Size(r))
	}
	l, err := dlq.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	if !l.ValueTruncated || len(l.Value) != dlq.MaxValuePrefix || !bytes.Equal(l.Value, value[:dlq.MaxValuePrefix]) {
		t.Errorf("ValueTruncated %v, %d bytes kept, want the first %d", l.ValueTruncated, len(l.Value), dlq.MaxValuePrefix)
	}
	if l.ValueSize != len(value) || l.ValueSHA256 != sum(value) {
		t.Errorf("size %d hash %s, want %d %s", l.ValueSize, l.ValueSHA256, len(value), sum(value))
	}
	if l.Complete() || l.Missing() != "value cut to 65536 of 1000117 bytes" {
		t.Errorf("Complete %v, Missing %q", l.Complete(), l.Missing())
	}
}

func TestMinimal(t *testing.T) {
	value := random(t, 5000)
	rec := &kgo.Record{Topic: "kjob.windows", Partition: 1, Offset: 3, Key: []byte("job"), Value: value, Headers: manyHeaders(3, 10)}
	r := dlq.Minimal("d", rec, dlq.Meta{Reason: "refused", Worker: "w", At: at})
	if len(r.Key) != 0 || len(r.Value) != 0 || dlq.Size(r) > 1024 {
		t.Fatalf("minimal letter holds key %d, value %d bytes, size %d", len(r.Key), len(r.Value), dlq.Size(r))
	}
	l, err := dlq.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Minimal || !l.ValueTruncated || !l.KeyTruncated || l.KeySize != 3 || l.HeadersDropped != 3 || l.ValueSize != 5000 || l.ValueSHA256 != sum(value) {
		t.Errorf("parsed minimal letter: %+v", l)
	}
	if l.Origin != (dlq.Origin{Topic: "kjob.windows", Partition: 1, Offset: 3}) || l.Reason != "refused" {
		t.Errorf("origin %v reason %q", l.Origin, l.Reason)
	}
}

// Letters written before the size and hash headers held the whole value.
func TestParseOlderLetter(t *testing.T) {
	r := &kgo.Record{Key: []byte("x"), Value: []byte("not json"), Headers: []kgo.RecordHeader{
		{Key: dlq.HeaderReason, Value: []byte("undecodable")}, {Key: dlq.HeaderTopic, Value: []byte("kjob.windows")},
		{Key: dlq.HeaderPartition, Value: []byte("1")}, {Key: dlq.HeaderOffset, Value: []byte("8")},
	}}
	l, err := dlq.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Complete() || l.ValueSize != 8 || l.ValueSHA256 != sum([]byte("not json")) {
		t.Errorf("%+v", l)
	}
}

func TestParseMalformed(t *testing.T) {
	r := &kgo.Record{Value: []byte("x"), Headers: []kgo.RecordHeader{
		{Key: dlq.HeaderReason, Value: []byte("r")}, {Key: dlq.HeaderTopic, Value: []byte("t")}, {Key: dlq.HeaderPartition, Value: []byte("-1")},
	}}
	l, err := dlq.Parse(r)
	if !errors.Is(err, dlq.ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	for _, want := range []string{"header kjob-dlq-offset missing", `header kjob-dlq-partition = "-1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if l.Reason != "r" || l.Origin.Topic != "t" {
		t.Errorf("Parse did not fill in what it could read: %+v", l)
	}
}

// The broker accepts the letters of records at its maximum size, with a
// client at franz-go's defaults: kfake enforces max.message.bytes like
// Kafka (the whole batch, 1,048,588 bytes by default).
func TestLettersOfMaximalRecordsFitTheBroker(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "d"); err != nil {
		t.Fatal(err)
	}
	big := &kgo.Record{Topic: "w", Value: random(t, kafkaMaxMessageBytes-100)}
	// The broker itself refuses a record with dead-letter headers added
	// to it, as it refused the naive letters that copied the whole record.
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(2<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	naive := &kgo.Record{Topic: "d", Value: big.Value, Headers: []kgo.RecordHeader{{Key: dlq.HeaderReason, Value: bytes.Repeat([]byte{'r'}, 200)}}}
	if err := raw.ProduceSync(ctx, naive).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("naive letter: err = %v, want the broker's MESSAGE_TOO_LARGE (does kfake still enforce max.message.bytes?)", err)
	}
	for name, rec := range map[string]*kgo.Record{
		"max value":           big,
		"max value, headers":  {Topic: "w", Value: random(t, 500_000), Headers: manyHeaders(1000, 500)},
		"one enormous header": {Topic: "w", Headers: []kgo.RecordHeader{{Key: "h", Value: random(t, kafkaMaxMessageBytes-200)}}},
		"enormous key":        {Topic: "w", Key: random(t, kafkaMaxMessageBytes-200)},
	} {
		l := dlq.New("d", rec, dlq.Meta{Reason: "too large", At: at})
		if err := cl.ProduceSync(ctx, l).FirstErr(); err != nil {
			t.Errorf("%s: letter of %d bytes refused: %v", name, dlq.Size(l), err)
		}
	}
}
