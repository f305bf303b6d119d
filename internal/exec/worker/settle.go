package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/stagetrace"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// op is a settlement queued for the partition's next settle call: of wn,
// whose rules get the answer as Settled (nil: an unclaim, whose answer
// nothing waits for).
type op struct {
	st dedupe.Settlement
	wn *win
}

// queue adds a settlement of wn (nil for none) to the next settle call.
func (l *loop) queue(wn *win, st dedupe.Settlement) {
	if l.ops == nil {
		l.ops = l.spare.opsOf(max(8, l.lastOps))
	}
	l.ops = append(l.ops, op{st: st, wn: wn})
}

// The run history is written with the settle calls: a run waits until
// historyDelay after the oldest unrecorded one (or maxPendingRuns are
// waiting), so that in a backlog each job's runs are packed into few
// members and the history costs little per run.
const (
	historyDelay   = 100 * time.Millisecond
	maxPendingRuns = 4096
)

// maxSettleCalls bounds the settle calls a partition has in flight. In a
// backlog of queue lanes each lane waits a settle call per window (its
// next window is claimed by its completion); with more than one call in
// flight the store settles one group of lanes while the loop starts and
// runs the windows of another, instead of the two taking turns. A call
// goes out while others are in flight only with at least half as many
// settlements as they carry, so the lanes form a few large groups rather
// than a stream of calls of a window or two.
const maxSettleCalls = 3

// maxClaimCalls bounds the claim calls a partition has in flight: a
// second one lets windows that became ready meanwhile be claimed without
// waiting for the first to return.
const maxClaimCalls = 2

// kick sends what the windows' rules asked for in this turn: the queued
// claims in one ClaimBatch call, the next dead letter, and the queued
// settlements (with the run history that is due) in one Settle call, each
// within its bound of calls in flight; what queues meanwhile goes
// together in the next. The answers come back to the inbox.
func (l *loop) kick() {
	if l.claiming < maxClaimCalls && len(l.claimQ) > 0 && !l.halted {
		l.claiming++
		batch := l.claimQ
		l.claimQ = nil
		ids := make([]string, len(batch))
		for i, wn := range batch {
			ids[i] = wn.msg.ID
		}
		if stagetrace.On() { // the herd's trace (docs/performance.md)
			now := time.Now()
			for _, wn := range batch {
				stagetrace.Stamp(stagetrace.ClaimSent, wn.msg.ScheduledAt, now)
			}
		}
		go func() {
			cs, proven, err := l.w.claimBatch(l.ctx, ids)
			l.inbox.post(claimAnswer{batch: batch, cs: cs, proven: proven, err: err})
		}()
	}
	if !l.writing && len(l.letters) > 0 {
		l.writing = true
		lt := l.letters[0]
		l.letters = l.letters[1:]
		go func() {
			err := l.w.deadLetter(l.ctx, lt.wn.rec, lt.reason, lt.attempts)
			if errors.Is(err, errLetterRefused) {
				err = nil // logged; the window is settled without its letter
			}
			l.inbox.post(letterAnswer{wn: lt.wn, err: err})
		}()
	}
	historyDue := len(l.runs) > 0 && (l.flushRuns || l.halted || len(l.runs) >= maxPendingRuns || time.Since(l.runsSince) >= historyDelay)
	enough := l.settling == 0 || len(l.ops) >= max(1, l.inFlightOps/2)
	if l.settling < maxSettleCalls && enough && (len(l.ops) > 0 || historyDue && len(l.runs) > 0 && (l.flushRuns || l.halted)) {
		l.settling++
		l.inFlightOps += len(l.ops)
		batch := l.ops
		l.ops, l.lastOps = nil, len(batch)
		var runs []dedupe.Run
		if historyDue {
			runs, l.runs, l.flushRuns, l.lastRuns = l.runs, nil, false, len(l.runs)
		}
		ss := l.spare.settlementsOf(len(batch))[:len(batch)]
		for i, o := range batch {
			ss[i] = o.st
		}
		go func() {
			res, proven, err := l.w.settleBatch(l.ctx, ss, runs)
			l.inbox.post(settleAnswer{&reply{batch: batch, res: res, proven: proven, err: err, ss: ss, runs: runs}})
		}()
	}
	if l.settling == 0 && len(l.ops) == 0 && len(l.runs) == 0 && len(l.replies) == 0 {
		l.spare = spares{}
	}
}

// reply is a settle call's answer, handled replyChunk settlements at a
// time (answer).
type reply struct {
	batch  []op
	res    []dedupe.Result
	proven time.Time
	err    error
	next   int // the next settlement to handle

	// ss and runs are what the call sent, given back to the loop's spare
	// slices once it answered (spares).
	ss   []dedupe.Settlement
	runs []dedupe.Run
}

// spares keeps the slices of the last settle call that answered for the
// next one, as the run history's: a burst's settle calls carry a
// settlement (twice: as the loop's op and as the call's Settlement) and a
// run per window, a few hundred bytes the collector no longer has to
// clear and mark per window (the no-op burst row, test/perf
// BenchmarkBurst). The kick that finds nothing to send and no settle call
// in flight drops them, so a quiet partition holds none.
type spares struct {
	ops  []op
	ss   []dedupe.Settlement
	runs []dedupe.Run
}

// opsOf returns an empty slice of ops with room for at least n.
func (s *spares) opsOf(n int) []op { return take(&s.ops, n) }

// settlementsOf returns an empty slice of settlements with room for at
// least n.
func (s *spares) settlementsOf(n int) []dedupe.Settlement { return take(&s.ss, n) }

// runsOf returns an empty slice of runs with room for at least n.
func (s *spares) runsOf(n int) []dedupe.Run { return take(&s.runs, n) }

// take returns *spare emptied, and forgets it, if it has room for n;
// otherwise a new slice.
func take[T any](spare *[]T, n int) []T {
	if s := *spare; cap(s) >= n {
		*spare = nil
		return s[:0]
	}
	return make([]T, 0, n)
}

// keep makes s the spare if it is larger than the one kept, cleared so
// that it holds on to nothing it pointed to.
func keep[T any](spare *[]T, s []T) {
	if cap(s) > cap(*spare) {
		clear(s[:cap(s)])
		*spare = s[:0]
	}
}

const replyChunk = 32

// answer turns up to replyChunk settlements of the settle calls that
// answered into their windows' Settled events: between chunks the loop
// takes in the handlers that returned and sends their settlements, so
// that one call is settled while the next is under way. A completion that
// also claimed the lane's next window (chainNext) answers that window's
// claim first.
func (l *loop) answer() {
	for n := 0; n < replyChunk && len(l.replies) > 0; {
		rp := l.replies[0]
		for ; rp.next < len(rp.batch) && n < replyChunk; rp.next++ {
			n++
			o := rp.batch[rp.next]
			if o.wn == nil {
				continue // an unclaim: nothing waits for it
			}
			var r dedupe.Result
			if rp.err != nil {
				r.Err = rp.err
			} else {
				r = rp.res[rp.next]
			}
			if o.st.Next != "" {
				l.chainAnswered(o.wn, r, rp)
			}
			l.logAnswer(o, r.Err)
			if r.Err != nil {
				o.wn.rare().answer = r.Err
			}
			l.step(o.wn, settled(r.Err))
			if o.wn.x != nil {
				o.wn.x.answer = nil
			}
		}
		if rp.next == len(rp.batch) {
			l.doneLogged(rp.batch, rp.res, rp.err)
			keep(&l.spare.ops, rp.batch)
			l.replies[0] = nil
			l.replies = l.replies[1:]
		}
	}
}

// chainAnswered gives the next window of wn's lane, which held wn's slot
// while wn's completion claimed it, that claim's answer.
func (l *loop) chainAnswered(wn *win, r dedupe.Result, rp *reply) {
	n := wn.next
	wn.next = nil
	if n == nil {
		return
	}
	if rp.err != nil || r.Err != nil || r.Next.WindowID == "" {
		l.step(n, machine.AheadRefused{})
		return
	}
	l.step(n, l.claimEvent(n, r.Next, rp.proven, time.Now()))
}

// settled maps a settlement's answer to its event.
func settled(err error) machine.Settled {
	switch {
	case err == nil:
		return machine.Settled{Answer: machine.Accepted}
	case errors.Is(err, dedupe.ErrAlreadyDone):
		return machine.Settled{Answer: machine.WasDone}
	case errors.Is(err, dedupe.ErrFenced):
		return machine.Settled{Answer: machine.NotOurs}
	case errors.Is(err, dedupe.ErrBusy):
		return machine.Settled{Answer: machine.ClaimLive}
	}
	return machine.Settled{Answer: machine.NoAnswer}
}

// logAnswer logs a settlement's answer that is news and that no report
// names.
func (l *loop) logAnswer(o op, err error) {
	if err == nil || errors.Is(err, dedupe.ErrAlreadyDone) {
		return
	}
	switch o.st.Op {
	case dedupe.OpDeadLetter:
		l.logger(o.wn).Warn("cannot mark the dead-lettered window settled; a redelivered record of it would run again", "err", err)
	case dedupe.OpRelease:
		if errors.Is(err, dedupe.ErrFenced) {
			l.logger(o.wn).Warn("release refused: the window is no longer ours", "err", err)
		} else {
			l.logger(o.wn).Warn("cannot release the claim; it expires after the store's claim TTL", "err", err)
		}
	case dedupe.OpSkip:
		if o.wn.skip() != nil {
			l.logger(o.wn).Warn("cannot settle the window a replay skips; the replay settles it after the seek", "err", err)
		}
	}
}

// doneLogEvery is how often a partition's loop logs the windows it
// completed, at info: a window completed when none was for doneLogEvery
// is logged at once, alone ("window done", with its duration and
// lateness); the windows completed within doneLogEvery after it are
// counted and logged together in one "windows done" line when it has
// passed. A backlog of 100,000 windows logged a line per settle call
// (about 3,000) before, which cost the worker 4% of its CPU in
// BenchmarkBurst (test/perf), the no-op burst's row, and told an operator
// nothing more. Each window is still logged at debug as it is settled.
const doneLogEvery = time.Second

// doneLog is what a loop has completed and not yet logged at info.
type doneLog struct {
	n           int         // windows completed since the last line
	first, last string      // the first and last of them
	at          time.Time   // when the last line was logged
	timer       *time.Timer // logs the n windows when doneLogEvery has passed since at
}

// doneLogged logs, at info, the windows a settle call completed (see
// doneLogEvery).
func (l *loop) doneLogged(batch []op, res []dedupe.Result, err error) {
	if err != nil || l.w.log.Enabled(l.ctx, slog.LevelDebug) { // each was logged at debug
		return
	}
	var first, last *op
	n := 0
	for i := range batch {
		o := &batch[i]
		if o.st.Op != dedupe.OpComplete || res[i].Err != nil {
			continue
		}
		n++
		if first == nil {
			first = o
		}
		last = o
	}
	if n == 0 {
		return
	}
	d := &l.done
	quiet := d.n == 0 && time.Since(d.at) >= doneLogEvery
	if quiet && n == 1 {
		// The window's attributes go with the call, not through l.logger.
		r := first.wn.ran
		l.log.Info("window done", winAttrs(first.wn, "duration", r.finished.Sub(r.started), "lateness", r.started.Sub(first.wn.msg.ScheduledAt))...)
		d.at = time.Now()
		return
	}
	if d.n == 0 {
		d.first = first.wn.msg.ID
	}
	d.n += n
	d.last = last.wn.msg.ID
	switch {
	case quiet:
		l.flushDone()
	case d.timer == nil:
		d.timer = time.AfterFunc(doneLogEvery-time.Since(d.at), func() { l.inbox.post(doneLogDue{}) })
	}
}

// flushDone logs the windows completed and not yet logged, if any.
func (l *loop) flushDone() {
	d := &l.done
	if d.n == 0 {
		return
	}
	l.log.Info("windows done", "windows", d.n, "first_window", d.first, "last_window", d.last)
	d.n, d.first, d.last, d.at = 0, "", "", time.Now()
}

// claimBatch calls ClaimBatch until it answers: store errors (Redis down)
// are retried with capped exponential backoff, logged once per outage. It
// returns the claims and when the call that made them started (what a
// Claimed claim is proven from), ctx.Err() if ctx ends first, or a
// non-retryable error (dedupe.ErrInvalidID).
func (w *Worker) claimBatch(ctx context.Context, ids []string) ([]dedupe.Claim, time.Time, error) {
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	for {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		cs, err := w.cfg.Store.ClaimBatch(cctx, ids, w.cfg.WorkerID)
		cancel()
		if err == nil {
			w.storeUp(w.log)
			return cs, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) || errors.Is(err, dedupe.ErrInvalidRun) {
			return nil, time.Time{}, err
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		w.storeFailed(w.log, "claim", err)
		if err := b.Sleep(ctx); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// settleBatch calls Store.Settle until it answers. Its first try runs even
// if ctx is already done (results are worth recording on the way out);
// retries stop when ctx is done, returning ctx.Err(). It also returns when
// the call that answered started: what proves the claims it chained
// (dedupe.Settlement.Next).
func (w *Worker) settleBatch(ctx context.Context, ss []dedupe.Settlement, runs []dedupe.Run) ([]dedupe.Result, time.Time, error) {
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	for {
		start := time.Now()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		res, err := w.cfg.Store.Settle(cctx, ss, runs...)
		cancel()
		if err == nil {
			w.storeUp(w.log)
			return res, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) || errors.Is(err, dedupe.ErrInvalidRun) {
			// Cannot happen with decoded windows; answer each with the
			// error so nothing loops on it.
			res = make([]dedupe.Result, len(ss))
			for i := range res {
				res[i].Err = err
			}
			return res, start, nil
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		w.storeFailed(w.log, "settle", err)
		if err := b.Sleep(ctx); err != nil {
			return nil, time.Time{}, err
		}
	}
}

func (w *Worker) storeFailed(log *slog.Logger, op string, err error) {
	w.stalls.store(err, time.Now())
	if w.storeDown.CompareAndSwap(false, true) {
		log.Error("idempotency store unavailable; not running windows nor committing past them until it answers", "op", op, "err", err)
	}
}

func (w *Worker) storeUp(log *slog.Logger) {
	if w.storeDown.CompareAndSwap(true, false) {
		w.stalls.store(nil, time.Time{})
		log.Info("idempotency store answers again")
	}
}
