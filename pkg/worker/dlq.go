package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/clock"
)

// Headers the worker adds to a dead-lettered record. The record keeps the
// original key, value and headers.
const (
	// HeaderDLQReason is why the window was dead-lettered: the decode
	// error, or the last attempt's error.
	HeaderDLQReason = "kjob-dlq-reason"
	// HeaderDLQTopic is the topic the record was read from.
	HeaderDLQTopic = "kjob-dlq-topic"
	// HeaderDLQPartition is the partition it was read from (decimal).
	HeaderDLQPartition = "kjob-dlq-partition"
	// HeaderDLQOffset is its offset in that partition (decimal).
	HeaderDLQOffset = "kjob-dlq-offset"
	// HeaderDLQAttempts is how many attempts ran (decimal; 0 for a record
	// that could not be decoded).
	HeaderDLQAttempts = "kjob-dlq-attempts"
	// HeaderDLQWorker is the WorkerID that dead-lettered it.
	HeaderDLQWorker = "kjob-dlq-worker"
	// HeaderDLQTime is when it was dead-lettered (RFC 3339 with
	// nanoseconds, UTC).
	HeaderDLQTime = "kjob-dlq-time"
)

// maxReasonBytes caps the reason header.
const maxReasonBytes = 4 << 10

// deadLetterRecord builds the dead letter of rec.
func (w *Worker) deadLetterRecord(rec *kgo.Record, reason string, attempts int, at time.Time) *kgo.Record {
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes] + "..."
	}
	hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+7)
	hs = append(hs, rec.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.FormatInt(int64(rec.Partition), 10))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(attempts))},
		kgo.RecordHeader{Key: HeaderDLQWorker, Value: []byte(w.cfg.WorkerID)},
		kgo.RecordHeader{Key: HeaderDLQTime, Value: []byte(at.UTC().Format(time.RFC3339Nano))},
	)
	return &kgo.Record{
		Topic:     w.cfg.DeadLetterTopic,
		Key:       rec.Key,
		Value:     rec.Value,
		Headers:   hs,
		Timestamp: at,
	}
}

// deadLetter produces the dead letter of rec synchronously, retrying until
// it is acknowledged (nil) or ctx is done (ctx.Err()): a window is never
// acknowledged without its dead letter.
func (w *Worker) deadLetter(ctx context.Context, rec *kgo.Record, reason string, attempts int) error {
	at := w.cfg.Now()
	delay := retryMin
	logged := false
	for {
		// A fresh record per try: producing fills in fields.
		err := w.consumer.Client().ProduceSync(ctx, w.deadLetterRecord(rec, reason, attempts, at)).FirstErr()
		if err == nil {
			if logged {
				w.log.Info("dead-letter produced after retries", "partition", rec.Partition, "offset", rec.Offset)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !logged {
			logged = true
			w.log.Warn("cannot produce dead letter; retrying, the record is not acknowledged meanwhile",
				"topic", w.cfg.DeadLetterTopic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
		}
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, retryMax)
	}
}

// errUnverified marks a record Config.Verify refused.
var errUnverified = errors.New("record refused by verification")

// verify runs Config.Verify, if set.
func (w *Worker) verify(rec *kgo.Record) error {
	if w.cfg.Verify == nil {
		return nil
	}
	if err := w.cfg.Verify(rec); err != nil {
		return fmt.Errorf("%w: %w", errUnverified, err)
	}
	return nil
}
