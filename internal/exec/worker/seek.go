package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// OutcomeSkippedReplay: an operator's replay moved the partition's offsets
// past the window before it was settled, with the operator's consent
// (SeekSkipping): it is settled as skipped (dedupe.SkippedByReplay, shown
// as "skipped (replay)") and never runs; a running attempt was cancelled.
const OutcomeSkippedReplay = dedupe.RunSkippedReplay

// Seek moves partition n, which this worker must own, to offset and
// commits it, while the worker keeps running: the operators' replay
// (internal/exec/control's Agent calls it). See partition.Consumer.Seek. Moving
// forward past windows that are not settled leaves them unsettled for
// good; SeekSkipping settles them.
func (w *Worker) Seek(ctx context.Context, n int32, offset int64) error {
	return w.consumer.Seek(ctx, n, offset)
}

// ErrSkipBusy is returned (wrapped) by SeekSkipping when windows it must
// skip stayed under a live claim of another attempt until its context
// ended.
var ErrSkipBusy = errors.New("worker: windows to skip are held by a live claim")

// SeekSkipping moves partition n forward from offset from (the committed
// offset the operator's plan saw) to offset, as Seek does, and settles
// every window of the records in [from, offset) that is not settled as
// skipped by the replay (dedupe.SkipForReplay with reason), so none is
// lost: windows never claimed or failed are settled before the seek (so
// they do not start meanwhile), an attempt running when the partition is
// seeked past it is cancelled after Grace (as Seek does) and settled as
// skipped under its own claim instead of released, and what the seek left
// (a retry waiting for its backoff) is settled after it. Each such window
// is reported once with OutcomeSkippedReplay (Config.OnExecuted, so the
// executions metric counts it) and recorded in its job's run history. It
// returns how many windows it settled. With offset <= from it is Seek.
func (w *Worker) SeekSkipping(ctx context.Context, n int32, from, offset int64, reason string) (int, error) {
	if offset <= from || from < 0 {
		return 0, w.Seek(ctx, n, offset)
	}
	reason = dedupe.ReplaySkipReason(reason)
	ws, err := w.windowsIn(ctx, n, from, offset)
	if err != nil {
		return 0, err
	}
	// Attempts of records below offset that end while the seek stops the
	// partition are settled as skipped (attempt.go attemptOver gives the
	// rules Returned.ReplaySkip).
	mark := w.replaySkips.set(n, offset, reason)
	defer w.replaySkips.clear(n, mark)

	skipped := 0
	skip := func(runs []dedupe.Run) ([]string, error) {
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		defer cancel()
		res, err := dedupe.SkipForReplayWith(cctx, w.cfg.Store.Settle, runs, reason, w.cfg.WorkerID)
		for _, id := range res.Skipped {
			w.reportReplaySkip(n, ws.byID[id], reason)
		}
		skipped += len(res.Skipped)
		return res.Busy, err
	}
	// Before the seek: what nobody runs cannot start any more. A live
	// claim (ours, running now) is left to the seek.
	busy, err := skip(ws.runs)
	if err != nil {
		return skipped, fmt.Errorf("worker: skip the windows of %s[%d] at %d-%d: %w", w.cfg.Topic, n, from, offset-1, err)
	}
	if err := w.consumer.Seek(ctx, n, offset); err != nil {
		return skipped, err
	}
	// After it: the attempts the seek ended settled themselves (skipped,
	// or done if they finished within Grace); the windows that were under
	// a live claim before it and are still open (released meanwhile, a
	// claim the seek gave up without running it) are settled now. A claim
	// still live (another worker's zombie attempt) expires within the
	// store's claim TTL unless its holder keeps extending it: wait that
	// long, not forever (the agent applies the next request only after
	// this one).
	wctx, cancel := context.WithTimeout(ctx, 2*w.cfg.Store.ClaimTTL()+w.cfg.Grace)
	defer cancel()
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	for len(busy) > 0 {
		runs := make([]dedupe.Run, 0, len(busy))
		for _, id := range busy {
			runs = append(runs, ws.byID[id].run)
		}
		if busy, err = skip(runs); err != nil {
			return skipped, fmt.Errorf("worker: skip the windows of %s[%d] at %d-%d after the seek: %w", w.cfg.Topic, n, from, offset-1, err)
		}
		if len(busy) == 0 {
			break
		}
		if err := b.Sleep(wctx); err != nil {
			return skipped, fmt.Errorf("%w: %s (the partition was moved; they stay as their holder leaves them: check them with kjobctl history)", ErrSkipBusy, strings.Join(busy, ", "))
		}
	}
	skipped += mark.counted()
	w.log.Info("windows skipped by a replay", "partition", n, "from", from, "offset", offset, "windows", skipped, "status", dedupe.ReplaySkipLabel, "reason", reason)
	return skipped, nil
}

// replayWin is a window of a range a replay skips.
type replayWin struct {
	run    dedupe.Run // its run, for SkipForReplay
	offset int64
}

type replayWins struct {
	runs []dedupe.Run
	byID map[string]replayWin
}

// windowsIn reads the window records of partition n at [from, to) (read
// committed; records that do not verify or decode are not windows).
func (w *Worker) windowsIn(ctx context.Context, n int32, from, to int64) (replayWins, error) {
	out := replayWins{byID: map[string]replayWin{}}
	opts := append([]kgo.Opt{kgo.SeedBrokers(w.cfg.Brokers...)}, w.cfg.ClientOpts...)
	err := kread.Each(ctx, opts, w.cfg.Topic, n, from, to, func(rec *kgo.Record) error {
		m, err := w.parse(rec)
		if err != nil {
			return nil
		}
		if _, ok := out.byID[m.ID]; ok {
			return nil
		}
		r := dedupe.Run{WindowID: m.ID, Job: m.Job, Trigger: string(m.Trigger), WindowStart: m.Window.Start, ScheduleVersion: m.ScheduleVersion}
		out.runs = append(out.runs, r)
		out.byID[m.ID] = replayWin{run: r, offset: rec.Offset}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("worker: read the windows a replay skips: %w", err)
	}
	return out, nil
}

// reportReplaySkip reports a window SkipForReplay settled (its run is in
// the history already).
func (w *Worker) reportReplaySkip(n int32, rw replayWin, reason string) {
	now := w.cfg.Now()
	// At debug: a replay to the end of a backlog may skip many; SeekSkipping
	// logs their count at info.
	w.log.Debug("window skipped", "job", rw.run.Job, "window", rw.run.WindowID, "partition", n, "status", dedupe.ReplaySkipLabel, "reason", reason)
	w.executed(Execution{WindowID: rw.run.WindowID, Job: rw.run.Job, Partition: n, Offset: rw.offset, Outcome: OutcomeSkippedReplay,
		Err: errors.New(reason), Started: now, Finished: now})
}

// replaySkips holds, per partition being seeked by SeekSkipping, the
// offset below which an attempt that ends is settled as skipped.
type replaySkips struct {
	mu sync.Mutex
	m  map[int32]*replaySkip
}

type replaySkip struct {
	below   int64
	reason  string
	settled atomic.Int64 // attempts the loop settled as skipped under it
}

func (sk *replaySkip) counted() int { return int(sk.settled.Load()) }

func (s *replaySkips) set(n int32, below int64, reason string) *replaySkip {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int32]*replaySkip{}
	}
	sk := &replaySkip{below: below, reason: reason}
	s.m[n] = sk
	return sk
}

func (s *replaySkips) clear(n int32, sk *replaySkip) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[n] == sk {
		delete(s.m, n)
	}
}

// lookup returns the replay that moves partition n past the record at
// offset, if one does.
func (s *replaySkips) lookup(n int32, offset int64) (*replaySkip, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sk, ok := s.m[n]
	if !ok || offset >= sk.below {
		return nil, false
	}
	return sk, true
}
