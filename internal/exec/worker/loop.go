package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/exec/worker/internal/lanes"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
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
	// done is the attempt whose success a completion in flight records.
	done result

	// Chaining (queue lanes): the store call that completes a window
	// also claims the next window of its lane (dedupe.Settlement.Next),
	// on the slot the first one ran on, so the next one starts the moment
	// the first is done, one round trip after its handler returned.
	next      *win      // the window this one's completion claims (in flight)
	chained   bool      // claim holds the claim a predecessor's completion took for it, until its turn
	chainedAt time.Time // when the call that took it started (what proves it)
	unchain   bool      // dropped while its chained claim was in flight: give it back

	sh *shadow // the rules' machine beside it, when shadowOn (shadow.go)
}

type winState uint8

const (
	stNew      winState = iota
	stReady             // waits for a slot (in loop.ready)
	stClaiming          // holds a slot; its claim is queued or in flight
	stRunning           // its attempt runs (holds a slot)
	stSettling          // a store call or a dead letter for it is in flight
	stWaiting           // a backoff or a busy wait before claiming again
	stChaining          // its claim rides on its predecessor's completion (holds a slot)
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
	slotsHeld int         // slots taken and not released
	ready     *lanes.Fair // active windows waiting for a slot: who gets the next one
	waiting   int         // ready.Waiting() as last added to Worker.waitingSlot

	claimQ   []*win // windows with a slot, to claim
	claiming int    // claim calls in flight (at most maxClaimCalls)
	ops      []op   // settlements queued
	settling int    // settle calls in flight (at most maxSettleCalls)
	// inFlightOps counts the settlements of the calls in flight.
	inFlightOps int
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

	// lastOps and lastRuns are how many settlements and runs the last
	// settle call carried: the next batch starts with that capacity
	// instead of growing to it by doubling.
	lastOps, lastRuns int

	running   map[*attempt]struct{} // attempts whose handler has not returned nor been abandoned
	dog       watchdog              // their deadlines
	deadlines map[int64]*deadline   // their timeouts' contexts, by millisecond (deadlineFor)
	timers    map[*time.Timer]struct{}
	chained   map[*win]struct{} // windows holding a chained claim (and a slot) until their turn

	launch  []launch        // attempts started in this turn, to run (dispatch)
	slow    map[string]bool // handlers whose last attempt was not quick (dispatch)
	replies []*reply        // settle calls that answered, being handled (answer)
	fetched []*kgo.Record   // taken from the partition, not yet decoded (arrive)

	halted  bool // start nothing new
	stopped bool // ctx ended: nothing more is committed, in-flight work is cancelled

	inbox inbox

	sh *shadowLoop // when shadowOn (shadow.go)
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
		w:         w,
		o:         o,
		ctx:       ctx,
		n:         o.Partition(),
		log:       w.log.With("partition", o.Partition()),
		lanes:     lanes.New(),
		ready:     lanes.NewFair(),
		slots:     w.slots.Waiter(),
		running:   map[*attempt]struct{}{},
		deadlines: map[int64]*deadline{},
		timers:    map[*time.Timer]struct{}{},
		chained:   map[*win]struct{}{},
		slow:      map[string]bool{},
		inbox:     inbox{wake: make(chan struct{}, 1)},
	}
	if shadowOn {
		l.shInit()
	}
	l.run()
}

func (l *loop) run() {
	defer func() {
		l.dog.stop()
		for t := range l.timers {
			t.Stop()
		}
		for _, d := range l.deadlines { // none: every attempt ended
			d.cancel()
		}
		l.slots.Close()
		l.slots.Release(l.slotsHeld)
		l.w.waitingSlot.Add(int64(-l.waiting))
	}()
	tick := time.NewTicker(l.w.cfg.ClaimExtendInterval)
	defer tick.Stop()
	halted, done := l.o.Halted(), l.ctx.Done()
	for !(l.halted && l.idle()) {
		var more <-chan struct{} // records wait to be decoded, answers to be handled: do not block
		if len(l.fetched) > 0 || len(l.replies) > 0 {
			more = closed
		}
		select {
		case <-more:
		case <-l.inbox.wake:
			for _, f := range l.inbox.take() {
				f()
			}
		case <-l.o.Ready():
			l.take()
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
			if shadowOn {
				at := monoBase.Add(time.Duration(now))
				l.shBroadcast(func(wn *win) machine.Event { return machine.Stopped{Now: wn.mtime(at)} })
			}
		}
		l.drain()
		l.answer()
		l.arrive()
		l.dispatch()
		l.kick()
		if n := l.ready.Waiting(); n != l.waiting {
			l.w.waitingSlot.Add(int64(n - l.waiting))
			l.waiting = n
		}
		if shadowOn {
			l.shCheck()
		}
	}
}

// closed is a closed channel: a select case on it is always ready.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// take moves newly fetched records to fetched, where arrive decodes them.
func (l *loop) take() {
	recs := l.o.Take()
	if !l.halted {
		l.fetched = append(l.fetched, recs...)
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
			l.take()
		default:
			return
		}
	}
}

// idle reports whether nothing is in flight: every attempt returned or
// was abandoned, and no store call or dead letter is under way.
func (l *loop) idle() bool {
	return len(l.running) == 0 && l.claiming == 0 && l.settling == 0 && len(l.replies) == 0 && len(l.ops) == 0 && len(l.runs) == 0 && !l.extend && !l.writing && len(l.letters) == 0
}

// halt stops starting windows: the ones waiting for a slot or a claim
// stay unsettled for the partition's next owner.
func (l *loop) halt() {
	if !l.halted {
		l.halted = true
		l.slots.Want(0)
	}
	l.fetched = nil // not decoded: left to the partition's next owner
	if shadowOn {
		for _, wn := range l.claimQ {
			// Never sent: the shell answers the claim itself.
			l.shStep(wn, machine.ClaimFailed{Ended: true})
		}
		l.shBroadcast(func(*win) machine.Event { return machine.Halted{} })
	}
	for _, it := range l.ready.Clear() {
		it.Data.(*win).state = stDone
		if shadowOn {
			l.shDid(it.Data.(*win), "withdraw-slot")
		}
	}
	for _, wn := range l.claimQ {
		wn.state = stDone
		l.putSlot(wn)
	}
	l.claimQ = nil
	for t := range l.timers {
		t.Stop()
		delete(l.timers, t)
	}
	for wn := range l.chained {
		l.giveBack(wn)
		wn.state = stDone
	}
}

// chainNext picks, for wn whose attempt succeeded, the window its
// completion claims in the same store call (dedupe.Settlement.Next): the
// next window of its queue lane, which starts once wn is done. It reports
// that window, which now holds wn's slot, or nil.
func (l *loop) chainNext(wn *win) *win {
	if l.halted {
		return nil
	}
	it := l.lanes.Next(&wn.item)
	if it == nil {
		return nil
	}
	n := it.Data.(*win)
	if n.state != stNew || n.superseded != "" {
		return nil
	}
	n.state = stChaining
	wn.next = n
	if shadowOn {
		l.shStep(n, machine.ChainOffered{})
	}
	return n
}

// chainAnswered records what the completion of wn did with the claim of
// its next window (chainNext): taken with the call that started at
// proven (c, if ok), or not taken (the completion failed, or the call).
// The next window keeps wn's slot until its turn, which comes when wn is
// finished; a window not claimed gives the slot back and waits in its
// lane to be claimed in its turn.
func (l *loop) chainAnswered(wn *win, c dedupe.Claim, ok bool, proven time.Time) {
	n := wn.next
	wn.next = nil
	if n == nil {
		return
	}
	claimed := ok && c.WindowID != ""
	if shadowOn && n.sh != nil {
		if claimed {
			l.shStep(n, l.shClaimEvent(n, c, proven, time.Now()))
		} else {
			l.shStep(n, machine.AheadRefused{})
		}
	}
	switch {
	case !claimed:
		l.putSlot(n)
	case n.unchain || l.halted:
		// Dropped from its lane meanwhile, or the partition is going.
		l.putSlot(n)
		if c.Outcome == dedupe.Claimed {
			l.unclaim(n, c)
		}
	default:
		n.claim, n.chained, n.chainedAt = c, true, proven
		l.chained[n] = struct{}{}
		return
	}
	n.unchain = false
	if n.state == stChaining {
		n.state = stNew
	}
}

// giveBack returns the chained claim a window holds until its turn, and
// its slot: the window waits in its lane as if never claimed.
func (l *loop) giveBack(wn *win) {
	delete(l.chained, wn)
	c := wn.claim
	wn.chained = false
	wn.state = stNew
	l.putSlot(wn)
	if c.Outcome == dedupe.Claimed {
		l.unclaim(wn, c)
	}
}

// unclaim gives back a claim whose attempt never started, so the next
// claim of its window runs at once with the same attempt number.
func (l *loop) unclaim(wn *win, c dedupe.Claim) {
	if shadowOn {
		l.shDid(wn, fmt.Sprintf("unclaim %d", c.Token))
	}
	l.queue(nil, dedupe.Settlement{ID: c.WindowID, Op: dedupe.OpUnclaim, Token: c.Token}, nil, func(error) {})
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
				if shadowOn && lt.wn != nil {
					if err != nil {
						l.shStep(lt.wn, machine.LetterFailed{})
					} else {
						l.shStep(lt.wn, machine.LetterWritten{})
					}
				}
			})
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
		ss := make([]dedupe.Settlement, len(batch))
		for i, o := range batch {
			ss[i] = o.st
		}
		go func() {
			res, proven, err := l.w.settleBatch(l.ctx, ss, runs)
			l.inbox.post(func() {
				l.settling--
				l.inFlightOps -= len(batch)
				l.replies = append(l.replies, &reply{batch: batch, res: res, proven: proven, err: err})
			})
		}()
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
}

const replyChunk = 32

// answer handles up to replyChunk settlements of the settle calls that
// answered: between chunks the loop takes in the handlers that returned
// and sends their settlements, so that one call is settled while the next
// is under way.
func (l *loop) answer() {
	for n := 0; n < replyChunk && len(l.replies) > 0; {
		rp := l.replies[0]
		for ; rp.next < len(rp.batch) && n < replyChunk; rp.next++ {
			n++
			o := rp.batch[rp.next]
			var r dedupe.Result
			if rp.err != nil {
				r.Err = rp.err
			} else {
				r = rp.res[rp.next]
			}
			if o.st.Next != "" {
				l.chainAnswered(o.wn, r.Next, rp.err == nil && r.Err == nil, rp.proven)
			}
			if shadowOn && o.wn != nil {
				l.shStep(o.wn, shAnswer(r.Err))
			}
			if o.then != nil {
				o.then(r.Err)
			} else {
				l.completed(o.wn, r.Err)
			}
		}
		if rp.next == len(rp.batch) {
			l.doneLogged(rp.batch, rp.res, rp.err)
			l.replies[0] = nil
			l.replies = l.replies[1:]
		}
	}
}

// arriveChunk is how many fetched records arrive decodes at a time: a
// large fetch (thousands of records in a backlog) is decoded a chunk per
// turn of the loop, between the answers of store calls and the returns of
// handlers, rather than holding them all up for milliseconds.
const arriveChunk = 64

// arrive decodes up to arriveChunk fetched records and admits their
// windows to their jobs' lanes.
func (l *loop) arrive() {
	if l.halted || len(l.fetched) == 0 {
		return
	}
	recs := l.fetched[:min(arriveChunk, len(l.fetched))]
	l.fetched = l.fetched[len(recs):]
	if len(l.fetched) == 0 {
		l.fetched = nil // let the fetch's slice go
	}
	for _, rec := range recs {
		msg, err := l.w.parse(rec)
		if err != nil {
			l.poison(rec, msg, err)
			continue
		}
		wn := &win{rec: rec, msg: msg}
		wn.item = lanes.Item{Key: msg.Job, Policy: policyOf(msg), Data: wn}
		if shadowOn {
			l.shArrived(wn)
		}
		l.apply(l.lanes.Arrive(&wn.item))
	}
	l.slots.Want(l.ready.Startable())
}

// apply carries out a lanes decision.
func (l *loop) apply(d lanes.Decision) {
	for _, dr := range d.Drop {
		wn, by := dr.Item.Data.(*win), dr.By.Data.(*win)
		if shadowOn {
			p := machine.DropSkip
			switch {
			case dr.Superseded:
				p = machine.DropReplace
			case dr.Item.Policy == lanes.Latest:
				p = machine.DropLatest
			}
			l.shStep(wn, machine.Dropped{By: by.msg.ID, Policy: p})
		}
		// A policy changed mid-lane: give a chained claim back first.
		switch {
		case wn.state == stChaining && wn.chained:
			l.giveBack(wn)
		case wn.state == stChaining:
			wn.unchain = true // in flight: chainAnswered gives it back
			wn.state = stNew
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
		if shadowOn {
			wn := c.Item.Data.(*win)
			l.shStep(wn, machine.Superseded{By: c.By.Data.(*win).msg.ID, Now: wn.mtime(time.Now())})
		}
		l.supersede(c.Item.Data.(*win), c.By.Data.(*win))
	}
	for _, it := range d.Start {
		if shadowOn {
			l.shStep(it.Data.(*win), machine.Admitted{})
		}
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
		if shadowOn {
			l.shDid(wn, "withdraw-slot")
		}
		l.ready.Remove(&wn.item)
		l.slots.Want(l.ready.Startable())
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
		if wn.chained {
			l.giveBack(wn)
		}
		wn.state = stDone
		return
	}
	if wn.chained {
		// Its predecessor's completion claimed it: it goes on at once,
		// on the slot it holds.
		delete(l.chained, wn)
		c, proven := wn.claim, wn.chainedAt
		wn.chained = false
		wn.state = stClaiming
		l.claimedOne(wn, c, proven)
		return
	}
	if wn.superseded != "" {
		l.settleIdle(wn, dedupe.OpSupersede, wn.superseded)
		return
	}
	wn.state = stReady
	if shadowOn {
		l.shDid(wn, "want-slot")
	}
	l.ready.Push(&wn.item, l.w.maxConcurrent(wn.msg))
	l.slots.Want(l.ready.Startable())
}

// granted moves windows that got a slot from ready to the claim queue, in
// the order the fair queue gives them (lanes.Fair: each job within its
// max_concurrent, the job holding the fewest slots first).
func (l *loop) granted(n int) {
	l.slotsHeld += n
	for ; n > 0; n-- {
		it := l.ready.Pop()
		if it == nil {
			break
		}
		wn := it.Data.(*win)
		wn.state = stClaiming
		l.claimQ = append(l.claimQ, wn)
		if shadowOn {
			l.shStep(wn, machine.SlotGranted{})
			l.shDid(wn, "claim")
		}
	}
	if n > 0 {
		l.slotsHeld -= n
		l.slots.Release(n)
	}
	l.slots.Want(l.ready.Startable())
}

// putSlot gives back the slots the windows wns held (each its job's, in
// the fair queue's count).
func (l *loop) putSlot(wns ...*win) {
	startable := l.ready.Startable()
	for _, wn := range wns {
		l.ready.Release(wn.item.Key)
		if shadowOn {
			l.shDid(wn, "release-slot")
		}
	}
	l.slotsHeld -= len(wns)
	l.slots.Release(len(wns))
	if n := l.ready.Startable(); n != startable && !l.halted {
		l.slots.Want(n) // windows of a job that was at its max_concurrent
	}
}

// claimed handles a claim call's answer for batch.
func (l *loop) claimed(batch []*win, cs []dedupe.Claim, proven time.Time, err error) {
	l.claiming--
	if err != nil {
		l.putSlot(batch...)
		if shadowOn {
			for _, wn := range batch {
				l.shStep(wn, machine.ClaimFailed{Ended: l.ctx.Err() != nil, Err: err})
			}
		}
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
		l.claimedOne(wn, cs[i], proven)
		if shadowOn {
			l.shClaimed(wn, cs[i], proven)
		}
	}
}

// claimedOne handles the claim c of wn, which holds a slot, taken by the
// call that started at proven (a claim call's, or its predecessor's
// completion's): it runs the window, skips it as done, or waits for a
// live claim to end.
func (l *loop) claimedOne(wn *win, c dedupe.Claim, proven time.Time) {
	wn.claim = c
	switch {
	case l.halted:
		l.putSlot(wn)
		wn.state = stDone
		if c.Outcome == dedupe.Claimed {
			// Claimed for a window that will not start here: give it
			// back, so the next owner runs it at once with the same
			// attempt number.
			l.unclaim(wn, c)
		}
	case c.Outcome == dedupe.Claimed && wn.superseded != "":
		l.putSlot(wn)
		l.settleHeld(wn, dedupe.OpSupersede, wn.superseded, nil)
	case c.Outcome == dedupe.Claimed:
		if age, old := l.w.beyondHorizon(wn.rec, wn.msg); old {
			l.putSlot(wn)
			l.tooOld(wn, age)
			return
		}
		if l.exhausted(wn) {
			l.putSlot(wn)
			return
		}
		l.start(wn, proven)
	case c.Outcome == dedupe.AlreadyDone:
		l.putSlot(wn)
		l.report(wn, OutcomeSkippedDone, nil, nil)
		l.finish(wn)
	default: // Busy: another claim is live (or ours, whose reply was lost)
		l.putSlot(wn)
		l.wait(wn, min(max(c.Retry, busyMin), busyMax), func() { l.toReady(wn) })
	}
}

// wait runs then on the loop after d, unless the wait is stopped first.
func (l *loop) wait(wn *win, d time.Duration, then func()) {
	wn.state = stWaiting
	wn.gen++
	gen := wn.gen
	if shadowOn {
		l.shWait(wn, d)
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.inbox.post(func() {
			delete(l.timers, t)
			if wn.gen == gen && wn.state == stWaiting {
				if shadowOn && wn.sh != nil {
					l.shStep(wn, machine.TimerFired{Seq: wn.sh.seq, Now: wn.mtime(time.Now())})
				}
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
	if shadowOn && wn.sh != nil {
		wn.sh.done = true
		l.shDid(wn, "finish")
	}
	l.o.Settle(wn.rec)
	if wn.item.Active() {
		l.apply(l.lanes.Finish(&wn.item))
		l.slots.Want(l.ready.Startable())
	}
}

// poison dead-letters a record that is not a valid window, or (msg set,
// err ErrForeignNamespace) a window of another deployment, unclaimed.
func (l *loop) poison(rec *kgo.Record, msg *jobmsg.Message, err error) {
	reason := "undecodable record: " + err.Error()
	if errors.Is(err, errUnverified) || errors.Is(err, ErrForeignNamespace) {
		reason = err.Error()
	}
	var id, job string
	if msg != nil {
		id, job = msg.ID, msg.Job
		l.log.Error("dead-lettering a window of another deployment without running it", "offset", rec.Offset, "window", id, "job", job, "err", err)
	} else {
		l.log.Error("dead-lettering a record that is not a valid window", "offset", rec.Offset, "err", err)
	}
	l.letters = append(l.letters, letter{rec: rec, reason: reason, then: func(derr error) {
		if derr != nil {
			return // ctx ended: the next owner dead-letters it
		}
		now := l.w.cfg.Now()
		l.w.executed(Execution{WindowID: id, Job: job, Partition: rec.Partition, Offset: rec.Offset, Outcome: OutcomeDeadLettered, Err: err, Started: now, Finished: now})
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
	wn       *win        // the window, for the shadow (nil for a poison record)
}

// logger returns the window's logger (built only when something is
// logged).
func (l *loop) logger(wn *win) *slog.Logger {
	return l.log.With(winAttrs(wn)...)
}

// winAttrs are the log attributes of wn: its record, window and job, and
// its claim's token and attempt while it holds one. A line logged once per
// window passes them to the call itself, which costs less than a logger
// With them.
func winAttrs(wn *win, more ...any) []any {
	attrs := make([]any, 0, 10+len(more))
	attrs = append(attrs, "offset", wn.rec.Offset, "window", wn.msg.ID, "job", wn.msg.Job)
	if wn.claim.Outcome == dedupe.Claimed && wn.claim.Token != 0 {
		attrs = append(attrs, "token", wn.claim.Token, "attempt", wn.claim.Attempt)
	}
	return append(attrs, more...)
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
	if shadowOn {
		l.shDid(wn, fmt.Sprintf("report %s of-attempt=%v", outcome, res != nil))
	}
	if outcome != OutcomeSkippedDone { // a redelivery, not a settlement
		r := dedupe.Run{WindowID: e.WindowID, Job: e.Job, Trigger: string(wn.msg.Trigger), Outcome: outcome, WindowStart: wn.msg.Window.Start,
			Started: e.Started, Finished: e.Finished, Attempt: e.Attempt, Token: e.Token, Worker: l.w.cfg.WorkerID,
			ScheduleVersion: wn.msg.ScheduleVersion}
		if err != nil {
			r.Error = handler.Cut(err.Error(), dedupe.MaxRunErrorBytes)
		}
		if len(l.runs) == 0 {
			l.runsSince = time.Now()
			if l.runs == nil {
				l.runs = make([]dedupe.Run, 0, max(8, l.lastRuns))
			}
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
