package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/clock"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/partition"
)

// BatchStore is what the worker needs, beyond Store, to batch its store
// round trips; *dedupe.Store implements it. A Store that does not implement
// it gets one window per round trip.
type BatchStore interface {
	Store
	// ClaimBatch claims every id for owner, as Claim would, in one round
	// trip.
	ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error)
	// CompleteBatch completes ids[i] with tokens[i], as Complete would.
	CompleteBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error)
	// ExtendBatch extends the claims ids[i] holds with tokens[i].
	ExtendBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error)
	// UnclaimBatch gives back claims whose attempts never started,
	// without counting an attempt.
	UnclaimBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error)
}

// maxChunkTime bounds how long the windows of one claim round trip take to
// run before the next chunk may be larger: claims taken ahead of their
// turn are held at most about this long (or ClaimExtendInterval/4 if
// shorter) before their window starts.
const maxChunkTime = 100 * time.Millisecond

// processBatch is the partition.BatchFunc: it settles recs in order, as
// process would one by one, but claims and completes windows in batches.
//
// Claiming ahead holds windows before their turn, so chunks grow like TCP's
// slow start: one window, then twice as many as long as a chunk ran within
// maxChunkTime, back to one when a chunk was slow. Scheduled windows (one
// at a time) therefore run as before, while a backlog of quick windows (a
// replay, a backfill) gets hundreds of windows per round trip. Completions
// are queued while handlers succeed and sent together at the end of each
// chunk, before anything waits (a busy window, a retry backoff), and before
// any window is settled another way, so offsets are marked only for
// windows that are done, skipped or dead-lettered, in order.
func (w *Worker) processBatch(ctx context.Context, recs []*kgo.Record) (int, error) {
	bs, ok := w.cfg.Store.(BatchStore)
	if !ok || len(recs) == 1 {
		if err := w.process(ctx, recs[0]); err != nil {
			return 0, err
		}
		return 1, nil
	}
	b := &batch{w: w, bs: bs, recs: recs, pending: make([]finished, 0, len(recs))}
	return b.run(ctx)
}

// batch is one processBatch call.
type batch struct {
	w    *Worker
	bs   BatchStore
	recs []*kgo.Record

	settled int        // leading records settled (returned to partition)
	pending []finished // successful attempts not yet completed, in order
}

// finished is a successful attempt waiting for its Complete.
type finished struct {
	i   int
	msg *jobmsg.Message
	c   dedupe.Claim
	res attemptResult
}

func (b *batch) run(ctx context.Context) (int, error) {
	w := b.w
	budget := min(maxChunkTime, w.cfg.ClaimExtendInterval/4)
	size := w.chunkSize(b.recs[0].Partition, 0)
	defer func() { w.chunkSize(b.recs[0].Partition, size) }()
	for i := 0; i < len(b.recs); {
		if partition.Halted(ctx) || ctx.Err() != nil {
			break
		}
		// Decode the next chunk; undecodable records are dead-lettered
		// in their turn.
		end := min(len(b.recs), i+size)
		msgs := make([]*jobmsg.Message, end-i)
		ids := make([]string, 0, end-i)
		for j := i; j < end; j++ {
			if m, err := w.parse(b.recs[j]); err == nil {
				msgs[j-i] = m
				ids = append(ids, m.ID)
			}
		}
		claims, proven, err := w.claimBatch(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				// An invalid id: settle the chunk one by one, which
				// dead-letters it.
				if err := b.each(ctx, i, end); err != nil {
					return b.settled, err
				}
				i = end
				continue
			}
			break
		}
		start := time.Now()
		next, err := b.chunk(ctx, i, msgs, claims, proven)
		if err != nil {
			return b.settled, err
		}
		// Record each chunk's successes before the next chunk runs, so
		// a success waits for at most one chunk's work.
		if err := b.flush(ctx); err != nil {
			return b.settled, err
		}
		if next < end { // halted or cancelled mid-chunk
			break
		}
		i = end
		if time.Since(start) < budget {
			size = min(2*size, len(b.recs))
		} else {
			size = 1
		}
	}
	if err := b.flush(ctx); err != nil {
		return b.settled, err
	}
	return b.settled, nil
}

// chunkSize returns the chunk size the last batch of partition p ended
// with (1 if none), and records size instead if it is not 0.
func (w *Worker) chunkSize(p int32, size int) int {
	w.chunkMu.Lock()
	defer w.chunkMu.Unlock()
	if size > 0 {
		w.chunks[p] = size
		return size
	}
	return max(1, w.chunks[p])
}

// chunk runs records from, with msgs (nil for undecodable records) and the
// claims of the decodable ones, taken by a call that started at proven, in
// order. It returns the index of the first record it did not start (len of
// the chunk when it ran all).
//
// A claim taken ahead is extended before its window starts if it was last
// proven more than ClaimExtendInterval ago, and a window whose claim is
// not proven recently enough is not started with it (attempt refuses).
func (b *batch) chunk(ctx context.Context, from int, msgs []*jobmsg.Message, claims []dedupe.Claim, proven time.Time) (int, error) {
	w := b.w
	ci := 0 // next claim
	for k, msg := range msgs {
		i := from + k
		if msg == nil {
			if err := b.settleOne(ctx, i, func() error { return w.process(ctx, b.recs[i]) }); err != nil {
				return i, err
			}
			continue
		}
		c := claims[ci]
		ci++
		if partition.Halted(ctx) || ctx.Err() != nil {
			b.unclaim(ctx, claims[ci-1:])
			return i, nil
		}
		if c.Outcome == dedupe.Claimed && time.Since(proven) > w.cfg.ClaimExtendInterval {
			// Earlier windows ran long (or the claim call was slow):
			// keep the claims taken ahead alive. A claim lost meanwhile,
			// or not extended in time, is claimed afresh.
			var lost []bool
			if lost, proven = b.extend(ctx, claims[ci-1:], proven); lost[0] {
				c.Outcome = dedupe.Busy
			}
		}
		if _, old := w.beyondHorizon(b.recs[i], msg); old && c.Outcome == dedupe.Claimed {
			// Dead-lettered instead of run, the one-window way.
			if err := b.settleOne(ctx, i, func() error { return w.window(ctx, b.recs[i], msg, &c, nil) }); err != nil {
				return i, err
			}
			continue
		}
		switch c.Outcome {
		case dedupe.Claimed:
			rec := b.recs[i]
			res := w.attempt(ctx, rec, msg, c, proven, func() *slog.Logger {
				return w.log.With("partition", rec.Partition, "offset", rec.Offset, "window", msg.ID, "job", msg.Job, "token", c.Token, "attempt", c.Attempt)
			})
			if res.err == nil && !res.fenced && !res.abandoned && !res.unproven {
				b.pending = append(b.pending, finished{i: i, msg: msg, c: c, res: res})
				continue
			}
			if err := b.settleOne(ctx, i, func() error { return w.window(ctx, b.recs[i], msg, &c, &res) }); err != nil {
				return i, err
			}
		case dedupe.AlreadyDone:
			if len(b.pending) == 0 && b.settled == i {
				_ = w.window(ctx, b.recs[i], msg, &c, nil) // reports the skip; cannot fail
				b.settled = i + 1
				continue
			}
			b.pending = append(b.pending, finished{i: i, msg: msg, c: c})
		default: // Busy (or a claim lost by extend): wait for it the slow way
			first := &c
			if c.Token == 0 || c.Holder == w.cfg.WorkerID {
				first = nil
			}
			if err := b.settleOne(ctx, i, func() error { return w.window(ctx, b.recs[i], msg, first, nil) }); err != nil {
				return i, err
			}
		}
	}
	return from + len(msgs), nil
}

// settleOne flushes the pending completions, then settles record i with
// settle (one of the one-window paths).
func (b *batch) settleOne(ctx context.Context, i int, settle func() error) error {
	if err := b.flush(ctx); err != nil {
		return err
	}
	if err := settle(); err != nil {
		return err
	}
	b.settled = i + 1
	return nil
}

// flush completes the pending windows in one round trip (reporting the
// skipped ones queued behind them) and advances settled past them. A
// window whose Complete is refused (a newer token claimed it meanwhile) is
// settled again the one-window way.
func (b *batch) flush(ctx context.Context) error {
	if len(b.pending) == 0 {
		return nil
	}
	w := b.w
	var ids []string
	var tokens []int64
	for _, f := range b.pending {
		if f.c.Outcome == dedupe.Claimed {
			ids = append(ids, f.msg.ID)
			tokens = append(tokens, f.c.Token)
		}
	}
	var errs []error
	err := w.settle(ctx, "complete", w.log, func(sctx context.Context) error {
		var err error
		errs, err = b.bs.CompleteBatch(sctx, ids, tokens)
		return err
	})
	if err != nil {
		// Only ctx ended: nothing pending is known to be complete; the
		// next owner re-delivers from the first of them.
		return err
	}
	k, completed := 0, 0
	first, last := b.pending[0], b.pending[len(b.pending)-1]
	debug := w.log.Enabled(ctx, slog.LevelDebug)
	for _, f := range b.pending {
		rec := b.recs[f.i]
		if f.c.Outcome != dedupe.Claimed {
			_ = w.window(ctx, rec, f.msg, &f.c, nil) // reports the skip
			b.settled = f.i + 1
			continue
		}
		err := errs[k]
		k++
		e := Execution{WindowID: f.msg.ID, Job: f.msg.Job, Partition: rec.Partition, Offset: rec.Offset, ScheduledAt: f.msg.ScheduledAt, PublishedAt: f.msg.PublishedAt,
			Attempt: f.c.Attempt, Token: f.c.Token, Started: f.res.started, Finished: f.res.finished}
		if err == nil {
			completed++
			if debug {
				w.log.Debug("window done", "partition", rec.Partition, "offset", rec.Offset, "window", f.msg.ID, "job", f.msg.Job, "token", f.c.Token, "attempt", f.c.Attempt,
					"duration", f.res.finished.Sub(f.res.started), "lateness", f.res.started.Sub(f.msg.ScheduledAt))
			}
			e.Outcome = OutcomeDone
			w.executed(e)
			b.settled = f.i + 1
			continue
		}
		w.log.Warn("handler succeeded but the window is not ours to complete (a zombie attempt: another attempt got there)",
			"window", f.msg.ID, "job", f.msg.Job, "token", f.c.Token, "err", err)
		e.Outcome, e.Err = OutcomeFenced, err
		w.executed(e)
		if err := w.window(ctx, rec, f.msg, nil, nil); err != nil {
			b.pending = b.pending[:0]
			return err
		}
		b.settled = f.i + 1
	}
	b.pending = b.pending[:0]
	if completed > 0 {
		rec := b.recs[first.i]
		w.log.Info("windows done", "partition", rec.Partition, "windows", completed, "from_offset", rec.Offset, "to_offset", b.recs[last.i].Offset,
			"first_window", first.msg.ID, "last_window", last.msg.ID)
	}
	return nil
}

// extend extends the claims taken ahead (those Claimed in claims), last
// proven at proven, and reports which were lost and when the call that
// proved the others started. On a store error, or if the call does not
// answer while the claims are still proven, every one is reported lost
// (claimed afresh later, once the store answers).
func (b *batch) extend(ctx context.Context, claims []dedupe.Claim, proven time.Time) ([]bool, time.Time) {
	lost := make([]bool, len(claims))
	var ids []string
	var tokens []int64
	var at []int
	for j, c := range claims {
		if c.Outcome == dedupe.Claimed {
			ids, tokens, at = append(ids, c.WindowID), append(tokens, c.Token), append(at, j)
		}
	}
	start := time.Now()
	deadline := proven.Add(b.w.proof)
	if !start.Before(deadline) {
		return b.lose(claims, at, lost, nil, ErrClaimUnproven), proven // too late to extend them
	}
	if d := start.Add(storeCallTimeout); d.Before(deadline) {
		deadline = d
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	errs, err := b.bs.ExtendBatch(cctx, ids, tokens)
	cancel()
	if err == nil {
		proven = start
	}
	return b.lose(claims, at, lost, errs, err), proven
}

// lose marks the claims at whose extend failed (errs[k] or err) lost.
func (b *batch) lose(claims []dedupe.Claim, at []int, lost []bool, errs []error, err error) []bool {
	for k, j := range at {
		if err != nil || errs[k] != nil {
			lost[j] = true
			claims[j].Outcome, claims[j].Token = dedupe.Busy, 0
		}
	}
	return lost
}

// unclaim gives back the claims taken ahead for windows that will not
// start here (the partition is being revoked), so their next owner runs
// them at once, with the same attempt number. Failures are logged: those
// claims then expire after the store's claim TTL.
func (b *batch) unclaim(ctx context.Context, claims []dedupe.Claim) {
	var ids []string
	var tokens []int64
	for _, c := range claims {
		if c.Outcome == dedupe.Claimed {
			ids, tokens = append(ids, c.WindowID), append(tokens, c.Token)
		}
	}
	if len(ids) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	if _, err := b.bs.UnclaimBatch(cctx, ids, tokens); err != nil {
		b.w.log.Warn("cannot give back claims taken ahead; they expire after the store's claim TTL", "windows", len(ids), "err", err)
	}
}

// each settles records [from, to) one by one.
func (b *batch) each(ctx context.Context, from, to int) error {
	for i := from; i < to; i++ {
		if err := b.settleOne(ctx, i, func() error { return b.w.process(ctx, b.recs[i]) }); err != nil {
			return err
		}
	}
	return nil
}

// claimBatch calls ClaimBatch until it answers, as claim does for one
// window: store errors are retried with capped backoff. It returns the
// claims and when the call that made them started, ctx.Err() if ctx ends
// first, or a non-retryable error (dedupe.ErrInvalidID).
func (w *Worker) claimBatch(ctx context.Context, ids []string) ([]dedupe.Claim, time.Time, error) {
	if len(ids) == 0 {
		return nil, time.Time{}, nil
	}
	bs := w.cfg.Store.(BatchStore)
	delay := retryMin
	for {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		cs, err := bs.ClaimBatch(cctx, ids, w.cfg.WorkerID)
		cancel()
		if err == nil {
			w.storeUp(w.log)
			return cs, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) {
			return nil, time.Time{}, err
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		w.storeFailed(w.log, "claim", err)
		if err := clock.Sleep(ctx, delay); err != nil {
			return nil, time.Time{}, err
		}
		delay = min(2*delay, retryMax)
	}
}
