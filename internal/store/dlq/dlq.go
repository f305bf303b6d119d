// Package dlq is the codec of kjob's dead letters: the records a worker
// writes to the dead-letter topic (by default <topic>.dlq) for a window it
// cannot run, and that `kjobctl dlq list`, `show` and `redrive` read. The
// worker writes letters with New (and Minimal), every reader decodes them
// with Parse, so the format is defined here and nowhere else.
//
// A letter is the original record (key, value and headers) plus headers
// named "kjob-dlq-*": why it was dead-lettered (HeaderReason), where the
// original is (HeaderTopic, HeaderPartition, HeaderOffset), how many
// attempts ran, which worker wrote it and when, and the original value's
// size and SHA-256.
//
// # A letter always fits
//
// A broker refuses a record larger than its max.message.bytes (Kafka's
// default is 1,048,588 bytes for the whole record batch; franz-go's
// producer refuses batches over 1,000,012 bytes before sending them). A
// record on the windows topic can be that large, and a letter that copied
// it whole, plus the dead-letter headers, would be refused, and the
// partition behind it would wait forever. So New bounds every part it
// copies, and Size(letter) <= MaxBytes (512 KiB) always holds:
//
//   - the value is copied whole when the letter then fits in MaxBytes
//     (always the case for a value the worker can run: jobmsg.MaxValueBytes
//     is 256 KiB); otherwise only its first MaxValuePrefix bytes are kept,
//     and HeaderTruncated says so;
//   - the key is cut to MaxKeyBytes;
//   - at most MaxHeaders original headers, of at most MaxHeaderBytes in
//     total, are copied; HeaderHeadersDropped counts the ones left out;
//   - the reason is cut to MaxReasonBytes and the worker id to
//     MaxWorkerBytes.
//
// The original value's full size (HeaderValueSize) and SHA-256
// (HeaderValueSHA256) are always recorded, and the original record stays in
// the windows topic at its offset for the topic's retention, so an operator
// can still find and check it. A letter that left something out is not
// Complete, and kjobctl does not redrive it.
//
// If the dead-letter topic has a smaller max.message.bytes than MaxBytes,
// the broker may still refuse a letter; the worker then writes Minimal: the
// reason, the origin and the value's size and hash, without the key, value
// or original headers.
package dlq

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers a dead letter carries besides the original record's own.
const (
	// HeaderPrefix starts the name of every header this package adds. An
	// original header with this prefix is not copied (it would be taken
	// for the letter's own).
	HeaderPrefix = "kjob-dlq-"
	// HeaderReason is why the window was dead-lettered: the decode error,
	// or the last attempt's error.
	HeaderReason = "kjob-dlq-reason"
	// HeaderTopic is the topic the original record was read from.
	HeaderTopic = "kjob-dlq-topic"
	// HeaderPartition is its partition (decimal).
	HeaderPartition = "kjob-dlq-partition"
	// HeaderOffset is its offset in that partition (decimal).
	HeaderOffset = "kjob-dlq-offset"
	// HeaderAttempts is how many attempts ran (decimal; 0 for a record
	// that could not be decoded).
	HeaderAttempts = "kjob-dlq-attempts"
	// HeaderWorker is the id of the worker that dead-lettered it.
	HeaderWorker = "kjob-dlq-worker"
	// HeaderTime is when it was dead-lettered (RFC 3339 with nanoseconds,
	// UTC).
	HeaderTime = "kjob-dlq-time"
	// HeaderValueSize is the original value's size in bytes (decimal).
	HeaderValueSize = "kjob-dlq-value-size"
	// HeaderValueSHA256 is the hex SHA-256 of the original value.
	HeaderValueSHA256 = "kjob-dlq-value-sha256"
	// HeaderKeySize is the original key's size in bytes (decimal), set
	// only when the key was cut.
	HeaderKeySize = "kjob-dlq-key-size"
	// HeaderHeadersDropped is how many original headers were left out
	// (decimal), set only when some were.
	HeaderHeadersDropped = "kjob-dlq-headers-dropped"
	// HeaderTruncated lists, comma-separated, what the letter holds only
	// part of: "value" (a prefix of it, or nothing in a minimal letter)
	// and "key". Absent when the value and key are whole.
	HeaderTruncated = "kjob-dlq-truncated"
	// HeaderMinimal is "true" on a letter written by Minimal.
	HeaderMinimal = "kjob-dlq-minimal"
)

// Bounds of a letter.
const (
	// MaxBytes bounds Size of every letter New builds: half of franz-go's
	// default producer batch limit (1,000,012 bytes) and of Kafka's
	// default max.message.bytes (1,048,588), leaving room for the batch
	// and request overhead, and twice jobmsg.MaxValueBytes, so a window
	// the worker could run keeps its whole value and can be redriven.
	MaxBytes = 512 << 10
	// MaxValuePrefix is how much of a value too large for MaxBytes is
	// kept: enough to see what the record was.
	MaxValuePrefix = 64 << 10
	// MaxKeyBytes bounds the copied key (job names are far shorter).
	MaxKeyBytes = 4 << 10
	// MaxHeaders bounds how many original headers are copied.
	MaxHeaders = 64
	// MaxHeaderBytes bounds the copied original headers' keys and values
	// together.
	MaxHeaderBytes = 64 << 10
	// MaxReasonBytes bounds the reason.
	MaxReasonBytes = 4 << 10
	// MaxWorkerBytes bounds the worker id.
	MaxWorkerBytes = 256
)

// batchOverhead is a v2 record batch's header, which a broker counts
// against max.message.bytes.
const batchOverhead = 61

// ErrMalformed is wrapped by Parse's error for a record that lacks a
// letter's required headers (reason, topic, partition, offset) or has one
// that does not parse.
var ErrMalformed = errors.New("dlq: malformed dead letter")

// Origin locates the original record of a letter.
type Origin struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// String is "topic[partition]@offset".
func (o Origin) String() string { return fmt.Sprintf("%s[%d]@%d", o.Topic, o.Partition, o.Offset) }

// Meta is what a worker adds to the record it dead-letters.
type Meta struct {
	// Reason is why: cut to MaxReasonBytes.
	Reason string
	// Attempts is how many attempts ran (0: the record was not decoded).
	Attempts int
	// Worker is the worker's id: cut to MaxWorkerBytes.
	Worker string
	// At is when; it is also the letter's timestamp.
	At time.Time
}

// Letter is a decoded dead letter.
type Letter struct {
	Meta
	// Origin is where the original record is.
	Origin Origin
	// Key is the original key, or its first MaxKeyBytes if KeyTruncated.
	Key []byte
	// KeySize is the original key's size.
	KeySize int
	// Value is the original value, or a prefix of it if ValueTruncated
	// (empty in a minimal letter).
	Value []byte
	// ValueSize is the original value's size.
	ValueSize int
	// ValueSHA256 is the hex SHA-256 of the original value.
	ValueSHA256 string
	// Headers are the original headers the letter kept, in order.
	Headers []kgo.RecordHeader
	// HeadersDropped counts the original headers left out.
	HeadersDropped int
	// KeyTruncated and ValueTruncated say the letter holds only part of
	// the key or the value.
	KeyTruncated, ValueTruncated bool
	// Minimal marks a letter written by Minimal.
	Minimal bool
}

// Complete reports whether the letter holds the whole original record:
// key, value and headers. Only a complete letter can be republished as
// the original.
func (l *Letter) Complete() bool {
	return !l.KeyTruncated && !l.ValueTruncated && l.HeadersDropped == 0 && !l.Minimal
}

// Missing says, for people, what an incomplete letter left out ("" for a
// complete one), e.g. "value cut to 65536 of 1000117 bytes, 3 headers".
func (l *Letter) Missing() string {
	var parts []string
	if l.ValueTruncated {
		parts = append(parts, fmt.Sprintf("value cut to %d of %d bytes", len(l.Value), l.ValueSize))
	}
	if l.KeyTruncated {
		parts = append(parts, fmt.Sprintf("key cut to %d of %d bytes", len(l.Key), l.KeySize))
	}
	if l.HeadersDropped > 0 {
		n := "headers"
		if l.HeadersDropped == 1 {
			n = "header"
		}
		parts = append(parts, fmt.Sprintf("%d original %s left out", l.HeadersDropped, n))
	}
	return strings.Join(parts, ", ")
}

// New builds the dead letter of rec, for the dead-letter topic topic. It
// keeps rec's key, value and headers within the bounds above, so
// Size(New(...)) <= MaxBytes whatever rec holds.
func New(topic string, rec *kgo.Record, m Meta) *kgo.Record {
	l := base(topic, rec, m)
	var truncated []string
	l.Key = rec.Key
	if len(l.Key) > MaxKeyBytes {
		l.Key = rec.Key[:MaxKeyBytes:MaxKeyBytes]
		l.Headers = append(l.Headers, header(HeaderKeySize, strconv.Itoa(len(rec.Key))))
		truncated = append(truncated, "key")
	}
	kept, dropped, hbytes := 0, 0, 0
	var own []kgo.RecordHeader
	for _, h := range rec.Headers {
		n := len(h.Key) + len(h.Value)
		if strings.HasPrefix(h.Key, HeaderPrefix) || kept == MaxHeaders || hbytes+n > MaxHeaderBytes {
			dropped++
			continue
		}
		own = append(own, h)
		kept++
		hbytes += n
	}
	if dropped > 0 {
		l.Headers = append(l.Headers, header(HeaderHeadersDropped, strconv.Itoa(dropped)))
	}
	// The letter's own headers go last, after the original ones, as they
	// always have.
	l.Headers = append(own, l.Headers...)
	// The value is kept whole if the letter then fits.
	if Size(l)+len(rec.Value)+2*maxVarint+len(HeaderTruncated)+len("value,key") <= MaxBytes {
		l.Value = rec.Value
	} else {
		n := min(len(rec.Value), MaxValuePrefix)
		l.Value = rec.Value[:n:n]
		truncated = append([]string{"value"}, truncated...)
	}
	if len(truncated) > 0 {
		l.Headers = append(l.Headers, header(HeaderTruncated, strings.Join(truncated, ",")))
	}
	return l
}

// Minimal builds the smallest letter of rec: the reason, origin, attempts,
// worker, time, and the value's size and SHA-256, without the key, the
// value or the original headers. A worker writes it when the dead-letter
// topic refuses the letter New built (a max.message.bytes below MaxBytes).
func Minimal(topic string, rec *kgo.Record, m Meta) *kgo.Record {
	l := base(topic, rec, m)
	l.Headers = append(l.Headers, header(HeaderMinimal, "true"))
	if len(rec.Key) > 0 {
		l.Headers = append(l.Headers, header(HeaderKeySize, strconv.Itoa(len(rec.Key))))
	}
	if len(rec.Headers) > 0 {
		l.Headers = append(l.Headers, header(HeaderHeadersDropped, strconv.Itoa(len(rec.Headers))))
	}
	what := "value"
	if len(rec.Key) > 0 {
		what = "value,key"
	}
	l.Headers = append(l.Headers, header(HeaderTruncated, what))
	return l
}

// base is a letter with the dead-letter headers only.
func base(topic string, rec *kgo.Record, m Meta) *kgo.Record {
	sum := sha256.Sum256(rec.Value)
	return &kgo.Record{
		Topic: topic,
		Headers: []kgo.RecordHeader{
			header(HeaderReason, cut(m.Reason, MaxReasonBytes)),
			header(HeaderTopic, rec.Topic),
			header(HeaderPartition, strconv.FormatInt(int64(rec.Partition), 10)),
			header(HeaderOffset, strconv.FormatInt(rec.Offset, 10)),
			header(HeaderAttempts, strconv.Itoa(m.Attempts)),
			header(HeaderWorker, cut(m.Worker, MaxWorkerBytes)),
			header(HeaderTime, m.At.UTC().Format(time.RFC3339Nano)),
			header(HeaderValueSize, strconv.Itoa(len(rec.Value))),
			header(HeaderValueSHA256, hex.EncodeToString(sum[:])),
		},
		Timestamp: m.At,
	}
}

func header(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// cut shortens s to at most n bytes (plus "..."), at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// maxVarint is the longest varint a record field length takes.
const maxVarint = binary.MaxVarintLen32

// Size is an upper bound of r's size as a broker measures it against
// max.message.bytes when r is alone in a record batch (uncompressed): the
// batch header, the record's fixed fields and lengths, key, value and
// headers.
func Size(r *kgo.Record) int {
	n := batchOverhead
	// length, attributes, timestamp delta, offset delta, key length,
	// value length, header count
	n += maxVarint + 1 + binary.MaxVarintLen64 + maxVarint + maxVarint + maxVarint + maxVarint
	n += len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 2*maxVarint + len(h.Key) + len(h.Value)
	}
	return n
}

// Parse decodes a record of the dead-letter topic. It fills in everything
// it can read; the error (wrapping ErrMalformed) names the first required
// header that is missing or does not parse. Letters written before the
// size and hash headers existed held the whole value: Parse then takes
// the size and hash from the value itself.
func Parse(r *kgo.Record) (Letter, error) {
	l := Letter{Key: r.Key, KeySize: len(r.Key), Value: r.Value, ValueSize: -1}
	var problems []string
	seen := map[string]bool{}
	num := func(key, v string, bits int) int64 {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < 0 {
			problems = append(problems, fmt.Sprintf("header %s = %q: want a whole number >= 0", key, v))
		}
		return n
	}
	for _, h := range r.Headers {
		v := string(h.Value)
		if !strings.HasPrefix(h.Key, HeaderPrefix) {
			l.Headers = append(l.Headers, h)
			continue
		}
		seen[h.Key] = true
		switch h.Key {
		case HeaderReason:
			l.Reason = v
		case HeaderTopic:
			l.Origin.Topic = v
		case HeaderPartition:
			l.Origin.Partition = int32(num(h.Key, v, 32))
		case HeaderOffset:
			l.Origin.Offset = num(h.Key, v, 64)
		case HeaderAttempts:
			l.Attempts = int(num(h.Key, v, 32))
		case HeaderWorker:
			l.Worker = v
		case HeaderTime:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				problems = append(problems, fmt.Sprintf("header %s = %q: want an RFC 3339 time", h.Key, v))
			}
			l.At = t
		case HeaderValueSize:
			l.ValueSize = int(num(h.Key, v, 32))
		case HeaderValueSHA256:
			l.ValueSHA256 = v
		case HeaderKeySize:
			l.KeySize = int(num(h.Key, v, 32))
		case HeaderHeadersDropped:
			l.HeadersDropped = int(num(h.Key, v, 32))
		case HeaderTruncated:
			for _, what := range strings.Split(v, ",") {
				switch what {
				case "value":
					l.ValueTruncated = true
				case "key":
					l.KeyTruncated = true
				}
			}
		case HeaderMinimal:
			l.Minimal = v == "true"
		}
	}
	if l.ValueSize < 0 {
		l.ValueSize = len(r.Value)
	}
	if l.ValueSHA256 == "" && !l.ValueTruncated {
		sum := sha256.Sum256(r.Value)
		l.ValueSHA256 = hex.EncodeToString(sum[:])
	}
	if len(l.Value) < l.ValueSize {
		l.ValueTruncated = true
	}
	for _, k := range []string{HeaderReason, HeaderTopic, HeaderPartition, HeaderOffset} {
		if !seen[k] {
			problems = append([]string{"header " + k + " missing"}, problems...)
		}
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("%w: %s", ErrMalformed, strings.Join(problems, "; "))
	}
	return l, nil
}
