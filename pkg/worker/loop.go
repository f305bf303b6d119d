package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/partition"
	"github.com/kjob/kjob/pkg/worker/internal/lanes"
)

// win is one window record of a partition loop, from its arrival until it
// is settled (or the loop ends).
type win struct {
	rec  *kgo.Record
	msg  *jobmsg.Message
	item lanes.Item

	state winState
	claim dedupe.Claim // the latest claim; Claimed while held
	att   *attempt     // the running attempt
	timer *time.Timer  // a wait before claiming or settling again
	gen   int          // bumped when a wait is cancelled: its wake is stale
	// superseded, when set, is why a newer window of the job replaced this
	// one (overlap policy replace): whatever it is doing, it ends as
	// superseded rather than retried.
	superseded string

	// Claiming ahead (queue lanes): while a window's completion is being
	// recorded, the next window of its job is claimed with the slot the
	// first one ran on, so it starts the moment the first is settled.
	ahead     bool      // claimed (or being claimed) ahead of its turn
	held      bool      // ahead, and its claim is in hand (state stHeld)
	proven    time.Time // when the call that took the held claim started
	aheadDone bool      // the claim ahead found it done: skip it in its turn
	next      *win      // the window claimed ahead on this one's behalf
}

type winState uint8

const (
	stNew      winState = iota
	stReady             // waits for a slot (in loop.ready)
	stClaiming          // holds a slot; its claim is queued or in flight
	stRunning           // its attempt runs (holds a slot)
	stSettling          // a store call or a dead letter for it is in flight
	stWaiting           // a backoff or a busy wait before claiming again
	stHeld              // claimed ahead of its turn, holding a slot
	stDone              // settled (or left to the partition's next owner)
)

// loop serves one owned partition: it decodes the partition's records into
// its jobs' lanes, starts windows as slots free up, runs their attempts,
// and settles them, until the partition is halted and the work in flight
// is over, or its context ends. One goroutine (serve) owns all of its
// state; handlers, store calls, dead letters and timers run elsewhere and
// report back by posting a function to the inbox, which serve runs.
type loop struct {
	w   *Worker
	o   *partition.Owned
	ctx context.Context
	log *slog.Logger
	n   int32

	lanes     *lanes.Lanes
	slots     *lanes.Waiter
	slotsHeld int    // slots taken and not released
	ready     []*win // active windows waiting for a slot, in turn

	claimQ   []*win // windows with a slot, to claim
	claiming int    // claim calls in flight (at most maxClaimCalls)
	ops      []op   // settlements queued
	settling bool   // a settle call is in flight
	// runs are the settlements reported and not yet recorded in the jobs'
	// run history: they go with a settle call once they are historyDelay
	// old (so a backlog's runs of one job are packed together), or on
	// their own at the next extend tick when none comes.
	runs      []dedupe.Run
	runsSince time.Time // when the oldest of runs was reported
	flushRuns bool
	extend    bool // an extend call is in flight
	letters   []letter
	writing   bool // a dead letter is being produced

	running map[*attempt]struct{} // attempts whose handler has not returned nor been abandoned
	timers  map[*time.Timer]struct{}
	held    map[*win]struct{} // windows claimed ahead, claim in hand

	halted  bool // start nothing new
	stopped bool // ctx ended: nothing more is committed, in-flight work is cancelled

	inbox inbox
}

// inbox carries functions posted by other goroutines to the loop. Posting
// never blocks, also after the loop has ended (the functions are then
// never run).
type inbox struct {
	mu   sync.Mutex
	fs   []func()
	wake chan struct{}
}

func (b *inbox) post(f func()) {
	b.mu.Lock()
	b.fs = append(b.fs, f)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	fs := b.fs
	b.fs = nil
	return fs
}

// serve is the partition.ServeFunc.
func (w *Worker) serve(ctx context.Context, o *partition.Owned) {
	l := &loop{
		w:       w,
		o:       o,
		ctx:     ctx,
		n:       o.Partition(),
		log:     w.log.With("partition", o.Partition()),
		lanes:   lanes.New(),
		slots:   w.slots.Waiter(),
		running: map[*attempt]struct{}{},
		timers:  map[*time.Timer]struct{}{},
		held:    map[*win]struct{}{},
		inbox:   inbox{wake: make(chan struct{}, 1)},
	}
	l.run()
}

func (l *loop) run() {
	defer func() {
		for t := range l.timers {
			t.Stop()
		}
		l.slots.Close()
		l.slots.Release(l.slotsHeld)
	}()
	tick := time.NewTicker(l.w.cfg.ClaimExtendInterval)
	defer tick.Stop()
	halted, done := l.o.Halted(), l.ctx.Done()
	for !(l.halted && l.idle()) {
		select {
		case <-l.inbox.wake:
			for _, f := range l.inbox.take() {
				f()
			}
		case <-l.o.Ready():
			if !l.halted {
				l.arrive(l.o.Take())
			}
		case <-l.slots.C():
			l.granted(l.slots.Take())
		case <-tick.C:
			l.extendClaims()
		case <-halted:
			halted = nil
			l.halt()
		case <-done:
			done = nil
			l.stopped = true
			l.halt()
			// Every handler's context is cancelled with ours: each is
			// abandoned if it has not returned within Grace.
			now := mono()
			for a := range l.running {
				a.noteCancelled(now)
			}
		}
		l.drain()
		l.kick()
	}
}

// drain handles whatever else is ready without waiting, so that the calls
// kick sends carry everything that queued meanwhile.
func (l *loop) drain() {
	for {
		select {
		case <-l.inbox.wake:
			for _, f := range l.inbox.take() {
				f()
			}
		case <-l.slots.C():
			l.granted(l.slots.Take())
		case <-l.o.Ready():
			if !l.halted {
				l.arrive(l.o.Take())
			}
		default:
			return
		}
	}
}

// idle reports whether nothing is in flight: every attempt returned or
// was abandoned, and no store call or dead letter is under way.
func (l *loop) idle() bool {
	return len(l.running) == 0 && l.claiming == 0 && !l.settling && len(l.ops) == 0 && len(l.runs) == 0 && !l.extend && !l.writing && len(l.letters) == 0
}

// halt stops starting windows: the ones waiting for a slot or a claim
// stay unsettled for the partition's next owner.
func (l *loop) halt() {
	if !l.halted {
		l.halted = true
		l.slots.Want(0)
	}
	for _, wn := range l.ready {
		wn.state = stDone
	}
	l.ready = nil
	for _, wn := range l.claimQ {
		wn.state = stDone
		l.putSlot(1)
	}
	l.claimQ = nil
	for t := range l.timers {
		t.Stop()
		delete(l.timers, t)
	}
	for wn := range l.held {
		l.giveBack(wn)
		wn.state = stDone
	}
}

// giveBack returns the claim a window holds ahead of its turn, and its
// slot: the window waits in its lane as if never claimed.
func (l *loop) giveBack(wn *win) {
	delete(l.held, wn)
	wn.ahead, wn.held = false, false
	wn.state = stNew
	l.putSlot(1)
	l.queue(nil, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpUnclaim, Token: wn.claim.Token}, nil, func(error) {})
}

// claimAhead claims, with the slot of wn's finished attempt, the window
// that starts in wn's lane once wn is settled; it reports whether it did
// (then the slot passed to that window).
func (l *loop) claimAhead(wn *win) bool {
	if l.halted {
		return false
	}
	it := l.lanes.Next(&wn.item)
	if it == nil {
		return false
	}
	n := it.Data.(*win)
	if n.state != stNew || n.ahead || n.aheadDone || n.superseded != "" {
		return false
	}
	n.ahead, n.state = true, stClaiming
	l.claimQ = append(l.claimQ, n)
	wn.next = n
	return true
}

// dropAhead undoes claimAhead when wn turns out not to be settled (its
// completion was refused): the window claimed ahead gives its claim and
// slot back, now or when its claim call returns.
func (l *loop) dropAhead(wn *win) {
	n := wn.next
	wn.next = nil
	if n == nil || !n.ahead || n.item.Active() {
		return
	}
	switch n.state {
	case stHeld:
		l.giveBack(n)
	case stClaiming:
		n.ahead = false
		for i, q := range l.claimQ {
			if q == n { // not sent yet
				l.claimQ = append(l.claimQ[:i], l.claimQ[i+1:]...)
				n.state = stNew
				l.putSlot(1)
				break
			}
		}
		// in flight: claimed gives it back
	}
}

// The run history is written with the settle calls: a run waits until
// historyDelay after the oldest unrecorded one (or maxPendingRuns are
// waiting), so that in a backlog each job's runs are packed into few
// members and the history costs little per run.
const (
	historyDelay   = 100 * time.Millisecond
	maxPendingRuns = 4096
)

// maxClaimCalls bounds the claim calls a partition has in flight: a
// second one lets windows that became ready meanwhile be claimed without
// waiting for the first to return.
const maxClaimCalls = 2

// kick sends the queued claims and settlements, one call of each kind in
// flight at a time: what queues while one is in flight goes together in
// the next.
func (l *loop) kick() {
	if l.claiming < maxClaimCalls && len(l.claimQ) > 0 && !l.halted {
		l.claiming++
		batch := l.claimQ
		l.claimQ = nil
		ids := make([]string, len(batch))
		for i, wn := range batch {
			ids[i] = wn.msg.ID
		}
		go func() {
			cs, proven, err := l.w.claimBatch(l.ctx, ids)
			l.inbox.post(func() { l.claimed(batch, cs, proven, err) })
		}()
	}
	if !l.writing && len(l.letters) > 0 {
		l.writing = true
		lt := l.letters[0]
		l.letters = l.letters[1:]
		go func() {
			err := l.w.deadLetter(l.ctx, lt.rec, lt.reason, lt.attempts)
			if errors.Is(err, errLetterRefused) {
				err = nil // logged; the window is settled without its letter
			}
			l.inbox.post(func() {
				l.writing = false
				lt.then(err)
			})
		}()
	}
	historyDue := len(l.runs) > 0 && (l.flushRuns || l.halted || len(l.runs) >= maxPendingRuns || time.Since(l.runsSince) >= historyDelay)
	if !l.settling && (len(l.ops) > 0 || historyDue && len(l.runs) > 0 && (l.flushRuns || l.halted)) {
		l.settling = true
		batch := l.ops
		l.ops = nil
		var runs []dedupe.Run
		if historyDue {
			runs, l.runs, l.flushRuns = l.runs, nil, false
		}
		ss := make([]dedupe.Settlement, len(batch))
		for i, o := range batch {
			ss[i] = o.st
		}
		go func() {
			errs, err := l.w.settleBatch(l.ctx, ss, runs)
			l.inbox.post(func() {
				l.settling = false
				for i, o := range batch {
					e := err
					if err == nil {
						e = errs[i]
					}
					o.then(e)
				}
				l.doneLogged(batch, errs, err)
			})
		}()
	}
}

// arrive decodes newly fetched records and admits their windows to their
// jobs' lanes.
func (l *loop) arrive(recs []*kgo.Record) {
	for _, rec := range recs {
		msg, err := l.w.parse(rec)
		if err != nil {
			l.poison(rec, err)
			continue
		}
		wn := &win{rec: rec, msg: msg}
		wn.item = lanes.Item{Key: msg.Job, Policy: policyOf(msg), Data: wn}
		l.apply(l.lanes.Arrive(&wn.item))
	}
	l.slots.Want(len(l.ready))
}

// apply carries out a lanes decision.
func (l *loop) apply(d lanes.Decision) {
	for _, dr := range d.Drop {
		wn, by := dr.Item.Data.(*win), dr.By.Data.(*win)
		if wn.ahead { // a policy changed mid-lane: give the claim back first
			if wn.held {
				l.giveBack(wn)
			} else {
				wn.ahead = false // in flight: claimed gives it back
			}
		}
		if dr.Superseded {
			l.settleIdle(wn, dedupe.OpSupersede, fmt.Sprintf("superseded by window %s before it started (overlap policy replace)", by.msg.ID))
			continue
		}
		reason := fmt.Sprintf("window %s of the job was still running (overlap policy skip)", by.msg.ID)
		if dr.Item.Policy == lanes.Latest {
			reason = fmt.Sprintf("a newer window %s arrived while it waited (overlap policy latest keeps only the newest)", by.msg.ID)
		}
		l.settleIdle(wn, dedupe.OpSkip, reason)
	}
	for _, c := range d.Cancel {
		l.supersede(c.Item.Data.(*win), c.By.Data.(*win))
	}
	for _, it := range d.Start {
		l.toReady(it.Data.(*win))
	}
}

// supersede ends the active window wn because by, a newer window of its
// job, arrived (overlap policy replace): a running attempt is cancelled
// with cause ErrSuperseded; a window waiting to be claimed is settled as
// superseded at once; a claim or settlement in flight picks the flag up
// when it returns.
func (l *loop) supersede(wn, by *win) {
	wn.superseded = "superseded by newer window " + by.msg.ID + " (overlap policy replace)"
	switch wn.state {
	case stRunning:
		wn.att.supersede()
	case stReady:
		for i, r := range l.ready {
			if r == wn {
				l.ready = append(l.ready[:i], l.ready[i+1:]...)
				break
			}
		}
		l.slots.Want(len(l.ready))
		l.settleIdle(wn, dedupe.OpSupersede, wn.superseded)
	case stWaiting:
		l.stopWait(wn)
		l.settleIdle(wn, dedupe.OpSupersede, wn.superseded)
	}
}

// toReady queues an active window for a slot, unless a newer window
// replaced it meanwhile.
func (l *loop) toReady(wn *win) {
	if l.halted {
		wn.state = stDone
		return
	}
	switch {
	case wn.held && wn.superseded != "":
		delete(l.held, wn)
		wn.held, wn.ahead = false, false
		l.putSlot(1)
		l.settleHeld(wn, dedupe.OpSupersede, wn.superseded, nil)
		return
	case wn.superseded != "":
		l.settleIdle(wn, dedupe.OpSupersede, wn.superseded)
		return
	case wn.held: // claimed ahead: it starts now, on the slot it holds
		delete(l.held, wn)
		wn.held, wn.ahead = false, false
		l.start(wn, wn.proven)
		return
	case wn.ahead && wn.state == stClaiming:
		return // its claim call is in flight: claimed starts it
	case wn.aheadDone:
		wn.aheadDone = false
		l.report(wn, OutcomeSkippedDone, nil, nil)
		l.finish(wn)
		return
	}
	wn.state = stReady
	l.ready = append(l.ready, wn)
	l.slots.Want(len(l.ready))
}

// granted moves windows that got a slot from ready to the claim queue.
func (l *loop) granted(n int) {
	l.slotsHeld += n
	k := min(n, len(l.ready))
	for _, wn := range l.ready[:k] {
		wn.state = stClaiming
		l.claimQ = append(l.claimQ, wn)
	}
	l.ready = l.ready[k:]
	if n > k {
		l.putSlot(n - k)
	}
	l.slots.Want(len(l.ready))
}

func (l *loop) putSlot(n int) {
	l.slotsHeld -= n
	l.slots.Release(n)
}

// claimed handles a claim call's answer for batch.
func (l *loop) claimed(batch []*win, cs []dedupe.Claim, proven time.Time, err error) {
	l.claiming--
	if err != nil {
		l.putSlot(len(batch))
		if l.ctx.Err() != nil || l.halted {
			for _, wn := range batch {
				wn.state = stDone
			}
			return
		}
		// A non-retryable store error: the ids are invalid, which a
		// decoded window's cannot be; dead-letter rather than loop.
		for _, wn := range batch {
			l.deadLetter(wn, "store refused the window: "+err.Error(), 0, 0, err)
		}
		return
	}
	for i, wn := range batch {
		c := cs[i]
		wn.claim = c
		if !wn.item.Active() && !l.halted { // claimed ahead of its turn
			l.claimedAhead(wn, c, proven)
			continue
		}
		wn.ahead = false
		switch {
		case l.halted:
			l.putSlot(1)
			wn.state = stDone
			if c.Outcome == dedupe.Claimed {
				// Claimed for a window that will not start here: give it
				// back, so the next owner runs it at once with the same
				// attempt number.
				l.queue(nil, dedupe.Settlement{ID: c.WindowID, Op: dedupe.OpUnclaim, Token: c.Token}, nil, func(error) {})
			}
		case c.Outcome == dedupe.Claimed && wn.superseded != "":
			l.putSlot(1)
			l.settleHeld(wn, dedupe.OpSupersede, wn.superseded, nil)
		case c.Outcome == dedupe.Claimed:
			if age, old := l.w.beyondHorizon(wn.rec, wn.msg); old {
				l.putSlot(1)
				l.tooOld(wn, age)
				continue
			}
			l.start(wn, proven)
		case c.Outcome == dedupe.AlreadyDone:
			l.putSlot(1)
			l.report(wn, OutcomeSkippedDone, nil, nil)
			l.finish(wn)
		default: // Busy: another claim is live (or ours, whose reply was lost)
			l.putSlot(1)
			l.wait(wn, min(max(c.Retry, busyMin), busyMax), func() { l.toReady(wn) })
		}
	}
}

// claimedAhead handles the claim of a window claimed ahead of its turn
// (claimAhead): it holds a Claimed claim and its slot until its turn;
// anything else gives the slot back, and the window is claimed normally in
// its turn (or skipped, if the claim found it done).
func (l *loop) claimedAhead(wn *win, c dedupe.Claim, proven time.Time) {
	if !wn.ahead { // dropped meanwhile (dropAhead, or its lane dropped it)
		l.putSlot(1)
		if c.Outcome == dedupe.Claimed {
			l.queue(nil, dedupe.Settlement{ID: wn.msg.ID, Op: dedupe.OpUnclaim, Token: c.Token}, nil, func(error) {})
		}
		if wn.state == stClaiming {
			wn.state = stNew
		}
		return
	}
	switch c.Outcome {
	case dedupe.Claimed:
		wn.held, wn.proven, wn.state = true, proven, stHeld
		l.held[wn] = struct{}{}
	case dedupe.AlreadyDone:
		l.putSlot(1)
		wn.ahead, wn.aheadDone, wn.state = false, true, stNew
	default:
		l.putSlot(1)
		wn.ahead, wn.state = false, stNew
	}
}

// wait runs then on the loop after d, unless the wait is stopped first.
func (l *loop) wait(wn *win, d time.Duration, then func()) {
	wn.state = stWaiting
	wn.gen++
	gen := wn.gen
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.inbox.post(func() {
			delete(l.timers, t)
			if wn.gen == gen && wn.state == stWaiting {
				then()
			}
		})
	})
	wn.timer = t
	l.timers[t] = struct{}{}
}

func (l *loop) stopWait(wn *win) {
	wn.gen++
	if wn.timer != nil {
		wn.timer.Stop()
		delete(l.timers, wn.timer)
		wn.timer = nil
	}
}

// finish ends an active window for good: its record is settled for the
// partition's commit point, and the next window of its lane may start.
func (l *loop) finish(wn *win) {
	wn.state = stDone
	l.o.Settle(wn.rec)
	if wn.item.Active() {
		l.apply(l.lanes.Finish(&wn.item))
		l.slots.Want(len(l.ready))
	}
}

// poison dead-letters a record that is not a valid window.
func (l *loop) poison(rec *kgo.Record, err error) {
	reason := "undecodable record: " + err.Error()
	if errors.Is(err, errUnverified) {
		reason = err.Error()
	}
	l.log.Error("dead-lettering a record that is not a valid window", "offset", rec.Offset, "err", err)
	l.letters = append(l.letters, letter{rec: rec, reason: reason, then: func(derr error) {
		if derr != nil {
			return // ctx ended: the next owner dead-letters it
		}
		now := l.w.cfg.Now()
		l.w.executed(Execution{Partition: rec.Partition, Offset: rec.Offset, Outcome: OutcomeDeadLettered, Err: err, Started: now, Finished: now})
		l.o.Settle(rec)
	}})
}

// letter is a dead letter queued for the partition: they are produced one
// at a time, in the order they were decided.
type letter struct {
	rec      *kgo.Record
	reason   string
	attempts int
	then     func(error) // on the loop, with nil once it is written or ctx's error
}

// logger returns the window's logger (built only when something is
// logged).
func (l *loop) logger(wn *win) *slog.Logger {
	log := l.log.With("offset", wn.rec.Offset, "window", wn.msg.ID, "job", wn.msg.Job)
	if wn.claim.Outcome == dedupe.Claimed && wn.claim.Token != 0 {
		log = log.With("token", wn.claim.Token, "attempt", wn.claim.Attempt)
	}
	return log
}

// execution returns the Execution of wn's current claim.
func (l *loop) execution(wn *win, outcome string, err error) Execution {
	e := Execution{WindowID: wn.msg.ID, Job: wn.msg.Job, Partition: wn.rec.Partition, Offset: wn.rec.Offset,
		ScheduledAt: wn.msg.ScheduledAt, PublishedAt: wn.msg.PublishedAt, Outcome: outcome, Err: err}
	if wn.claim.Token != 0 {
		e.Attempt, e.Token = wn.claim.Attempt, wn.claim.Token
	}
	return e
}

// report reports an outcome of wn: of the attempt res describes, or (res
// nil) of a settlement without an attempt.
func (l *loop) report(wn *win, outcome string, err error, res *result) {
	e := l.execution(wn, outcome, err)
	if res != nil {
		e.Started, e.Finished = res.started, res.finished
	} else {
		now := l.w.cfg.Now()
		e.Started, e.Finished = now, now
	}
	l.w.executed(e)
	if outcome != OutcomeSkippedDone { // a redelivery, not a settlement
		r := dedupe.Run{WindowID: e.WindowID, Job: e.Job, Trigger: string(wn.msg.Trigger), Outcome: outcome, WindowStart: wn.msg.Window.Start,
			Started: e.Started, Finished: e.Finished, Attempt: e.Attempt, Token: e.Token, Worker: l.w.cfg.WorkerID}
		if err != nil {
			r.Error = err.Error()
		}
		if len(l.runs) == 0 {
			l.runsSince = time.Now()
		}
		l.runs = append(l.runs, r)
	}
}

// policyOf maps a window's overlap policy to its lane policy (decoding
// makes an absent one queue).
func policyOf(msg *jobmsg.Message) lanes.Policy {
	switch msg.Policy.Overlap {
	case jobmsg.OverlapSkip:
		return lanes.Skip
	case jobmsg.OverlapLatest:
		return lanes.Latest
	case jobmsg.OverlapReplace:
		return lanes.Replace
	case jobmsg.OverlapAllow:
		return lanes.Allow
	}
	return lanes.Queue
}

// jobOf returns the job for a handler attempt.
func (l *loop) jobOf(wn *win) *handler.Job {
	return handler.NewJob(wn.msg, wn.claim.Attempt, wn.claim.Token, l.w.cfg.WorkerID, wn.rec.Partition, wn.rec.Offset)
}
