package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/store/dlq"
)

// Headers the worker adds to a dead-lettered record: internal/store/dlq defines the
// dead letter (its headers, bounds and decoding); these names are kept for
// existing callers.
const (
	// HeaderDLQReason is dlq.HeaderReason.
	HeaderDLQReason = dlq.HeaderReason
	// HeaderDLQTopic is dlq.HeaderTopic.
	HeaderDLQTopic = dlq.HeaderTopic
	// HeaderDLQPartition is dlq.HeaderPartition.
	HeaderDLQPartition = dlq.HeaderPartition
	// HeaderDLQOffset is dlq.HeaderOffset.
	HeaderDLQOffset = dlq.HeaderOffset
	// HeaderDLQAttempts is dlq.HeaderAttempts.
	HeaderDLQAttempts = dlq.HeaderAttempts
	// HeaderDLQWorker is dlq.HeaderWorker.
	HeaderDLQWorker = dlq.HeaderWorker
	// HeaderDLQTime is dlq.HeaderTime.
	HeaderDLQTime = dlq.HeaderTime
)

// errLetterRefused is wrapped by deadLetter's error when the dead-letter
// topic refused even a minimal letter for a reason retrying cannot change
// (a max.message.bytes below a few hundred bytes, a record the broker
// calls invalid). deadLetter has logged it at ERROR with the original's
// coordinates; the caller settles the window as dead-lettered and moves
// on, and the original record stays in the windows topic at its offset.
var errLetterRefused = errors.New("worker: the dead-letter topic refused even a minimal dead letter")

// deadLetterRecord builds the dead letter of rec (internal/store/dlq: it always fits
// under the broker's default limits).
func (w *Worker) deadLetterRecord(rec *kgo.Record, reason string, attempts int, at time.Time) *kgo.Record {
	return dlq.New(w.cfg.DeadLetterTopic, rec, w.letterMeta(reason, attempts, at))
}

func (w *Worker) letterMeta(reason string, attempts int, at time.Time) dlq.Meta {
	return dlq.Meta{Reason: reason, Attempts: attempts, Worker: w.cfg.WorkerID, At: at}
}

// deadLetter produces the dead letter of rec synchronously. It returns nil
// once a letter is acknowledged, ctx.Err() if ctx ends first, or an error
// wrapping errLetterRefused (see there).
//
// Errors that can pass (Kafka unreachable, a leader moving, the topic not
// created yet) and authorization errors (an operator grants the ACL, see
// deploy/SECURITY.md) are retried with backoff until ctx ends: a window is
// not acknowledged without its letter. An error about the letter itself
// (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD and any other
// non-retriable one) is never retried as is: the worker writes a minimal
// letter (dlq.Minimal: reason, origin, size and hash of the value) instead,
// and if that is refused too, gives up with errLetterRefused.
func (w *Worker) deadLetter(ctx context.Context, rec *kgo.Record, reason string, attempts int) error {
	at := w.cfg.Now()
	log := w.log.With("topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "dlq_topic", w.cfg.DeadLetterTopic)
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	logged, minimal := false, false
	w.stalls.letterStarted(rec, time.Now())
	defer w.stalls.letterDone(rec.Partition)
	for {
		// A fresh record per try: producing fills in fields.
		letter := w.deadLetterRecord(rec, reason, attempts, at)
		if minimal {
			letter = dlq.Minimal(w.cfg.DeadLetterTopic, rec, w.letterMeta(reason, attempts, at))
		}
		err := w.consumer.Client().ProduceSync(ctx, letter).FirstErr()
		if err == nil {
			if logged {
				log.Info("dead-letter produced after retries", "minimal", minimal)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if letterRefused(err) {
			if !minimal {
				log.Warn("the dead-letter topic refused the letter; writing a minimal one (reason, origin, value size and SHA-256; no key, value or headers)",
					"err", err, "letter_bytes", dlq.Size(letter))
				minimal = true
				continue
			}
			log.Error("the dead-letter topic refused even a minimal dead letter; settling the window without one: its record stays in the windows topic at this offset until the topic's retention removes it",
				"err", err, "letter_bytes", dlq.Size(letter), "reason", reason)
			return fmt.Errorf("%w: %s[%d]@%d: %w", errLetterRefused, rec.Topic, rec.Partition, rec.Offset, err)
		}
		w.stalls.letterFailing(rec, err)
		if !logged {
			logged = true
			log.Warn("cannot produce dead letter; retrying, the record is not acknowledged meanwhile", "err", err)
		}
		if err := b.Sleep(ctx); err != nil {
			return err
		}
	}
}

// letterRefused reports whether err refuses a letter for what it is, so
// that producing it again cannot succeed: a non-retriable Kafka error
// other than an authorization failure, which an operator can fix.
func letterRefused(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Retriable {
		return false
	}
	switch ke.Code {
	case kerr.TopicAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code,
		kerr.SaslAuthenticationFailed.Code, kerr.GroupAuthorizationFailed.Code:
		return false
	}
	return true
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
