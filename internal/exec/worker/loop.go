package worker

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/stagetrace"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/exec/worker/internal/lanes"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// win is one record of a partition loop, from its arrival until it is
// settled (or the loop ends). Its state is m, the rules' window
// (internal/window): the loop steps it with events and carries out the
// actions it returns (step.go). The other fields are what the shell needs
// to carry them out.
type win struct {
	rec  *kgo.Record
	msg  *jobmsg.Message // nil for a record that is not a window (bad)
	item lanes.Item
	spec machine.Spec // what the rules use of msg (m keeps a pointer to it)
	m    machine.Window

	claim claimOf  // the latest claim answer (logs, Execution)
	att   *attempt // the running attempt
	ran   ran      // the latest attempt, for its reports
	// next is the window this one's completion claims in the same store
	// call (chaining: dedupe.Settlement.Next), while that call is in
	// flight.
	next *win
	x    *winRare // what few windows need; nil for most

	prev, nextLive *win // in loop.live while not final
}

// claimOf is what the loop keeps of a window's latest claim answer
// (dedupe.Claim): what its logs and reports name.
type claimOf struct {
	outcome dedupe.Outcome
	token   int64
	attempt int
}

// winRare is what only a window that waits, is not a window of ours, has
// its settlement refused or is skipped by a replay needs: behind one
// pointer, so that every window of a burst is that much smaller (the
// no-op burst's row: its allocation, and the GC's work, per window).
type winRare struct {
	timer *time.Timer // a Wait in progress
	// answer is the store's error for the settlement being stepped
	// (Settled), which a report of it names.
	answer error
	bad    error       // why the record is not a window of ours
	skip   *replaySkip // the replay its interrupted attempt is skipped for
}

// rare returns wn's winRare, made on first use.
func (wn *win) rare() *winRare {
	if wn.x == nil {
		wn.x = new(winRare)
	}
	return wn.x
}

// answer is the store's error for the settlement being stepped; nil if
// none.
func (wn *win) answer() error {
	if wn.x == nil {
		return nil
	}
	return wn.x.answer
}

// bad is why the record is not a window of ours; nil for a window.
func (wn *win) bad() error {
	if wn.x == nil {
		return nil
	}
	return wn.x.bad
}

// skip is the replay that skips wn's interrupted attempt; nil if none.
func (wn *win) skip() *replaySkip {
	if wn.x == nil {
		return nil
	}
	return wn.x.skip
}

// winList is the loop's windows that are not final, linked through the
// windows themselves: a window joins and leaves it without an allocation.
type winList struct{ head *win }

func (ls *winList) add(wn *win) {
	wn.nextLive = ls.head
	if ls.head != nil {
		ls.head.prev = wn
	}
	ls.head = wn
}

// remove takes wn out, if it is in.
func (ls *winList) remove(wn *win) {
	switch {
	case wn.prev != nil:
		wn.prev.nextLive = wn.nextLive
	case ls.head == wn:
		ls.head = wn.nextLive
	default:
		return // not in
	}
	if wn.nextLive != nil {
		wn.nextLive.prev = wn.prev
	}
	wn.prev, wn.nextLive = nil, nil
}

// all returns the windows in the list, for a step of each that may take
// them out.
func (ls *winList) all() []*win {
	var out []*win
	for wn := ls.head; wn != nil; wn = wn.nextLive {
		out = append(out, wn)
	}
	return out
}

// ran is how the window's latest attempt went, for the reports of it.
type ran struct {
	started, finished time.Time
	err               error
	// notStarted: the claim came back too old to prove (its age), so the
	// attempt ended stepped down before its handler started.
	notStarted time.Duration
}

// loop serves one owned partition: it decodes the partition's records
// into their jobs' lanes, steps each window's rules with what happens to
// it, and carries out what the rules answer: claims and settlements in
// batched store calls, handlers on runners, dead letters, timers, the
// commit point. One goroutine (run) owns all of its state; store calls,
// handlers, dead letters and timers run elsewhere and post what they
// found to the inbox as typed inputs (input), which run turns into the
// windows' events.
type loop struct {
	w     *Worker
	o     *partition.Owned
	ctx   context.Context
	log   *slog.Logger
	n     int32
	rules machine.Rules

	lanes     *lanes.Lanes
	slots     *lanes.Waiter
	slotsHeld int         // slots taken and not released
	ready     *lanes.Fair // active windows waiting for a slot: who gets the next one
	waiting   int         // ready.Waiting() as last added to Worker.waitingSlot
	live      winList     // the windows not final: what a halt or stop steps
	// step's action buffers, a stack: a step takes one and gives it back
	// when its actions are done, so the steps its actions cause (a finish
	// admits the lane's next window) take others, and no step allocates
	// one (the no-op burst's row).
	acts [][]machine.Action
	// The events of every window, passed by pointer so that a step
	// boxes no copy of them (the rules keep nothing of an event): no
	// step that one of them causes is of the same kind.
	ret     machine.Returned    // attemptOver's
	arrived machine.Arrived     // arrive's
	claim   machine.Claimed     // claimEvent's
	grant   machine.SlotGranted // granted's

	// held counts the windows Held (claimed before their start), whose
	// claims the extend tick keeps proven (extendClaims).
	held int
	// untilStart are the windows waiting for their start (published
	// ahead: the producer's PublishLead), by time, on one timer (startAt)
	// rather than one each, so 1,000 windows due at one instant are
	// handled in one turn of the loop (the herd's row): the Waits of Held
	// windows, and the windows of jobs whose overlap policy decides on
	// arrival (skip, latest, replace), which enter their lanes at their
	// start, as if published then, so that a window published ahead
	// neither skips nor cancels a run that would have ended by its start.
	// A stopped Wait stays in until its time; its TimerFired is stale
	// then, and the rules ignore it.
	untilStart startHeap
	startAt    *time.Timer

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
	spare             spares // slices of settle calls that answered, for reuse

	running   map[*attempt]struct{} // attempts whose handler has not returned nor been abandoned
	dog       watchdog              // their deadlines
	deadlines map[int64]*deadline   // their timeouts' contexts, by millisecond (deadlineFor)

	launch  []launch        // attempts started in this turn, to run (dispatch)
	slow    map[string]bool // handlers whose last attempt was not quick (dispatch)
	replies []*reply        // settle calls that answered, being handled (answer)
	fetched []*kgo.Record   // taken from the partition, not yet decoded (arrive)

	halted  bool // start nothing new
	stopped bool // ctx ended: nothing more is committed, in-flight work is cancelled

	done doneLog // the windows completed and not yet logged at info (doneLogged)

	inbox inbox
}

// input is what another goroutine tells the loop: the answer of a store
// call, a dead letter, a handler, or a timer. The loop receives it on its
// own goroutine (receive) and turns it into events.
type input interface{ input() }

// claimAnswer: a ClaimBatch call for batch answered (claimBatch).
type claimAnswer struct {
	batch  []*win
	cs     []dedupe.Claim
	proven time.Time
	err    error
}

// settleAnswer: a Settle call answered (settleBatch).
type settleAnswer struct{ rp *reply }

// letterAnswer: the dead letter of wn was written (err nil) or not.
type letterAnswer struct {
	wn  *win
	err error
}

// handlerReturned: the handler of a returned err (runner.go).
type handlerReturned struct {
	a        *attempt
	err      error
	finished time.Time
	took     time.Duration
}

// abandonDue: a's handler ignored its cancelled context for Grace
// (watchdog.go).
type abandonDue struct{ a *attempt }

// extendAnswered: the partition's extend call is over (extendClaims).
type extendAnswered struct{}

// doneLogDue: the windows completed since the last "windows done" line
// are due to be logged (doneLogged).
type doneLogDue struct{}

// waitOver: the Wait numbered seq of wn ended.
type waitOver struct {
	wn  *win
	seq uint64
}

func (claimAnswer) input()     {}
func (settleAnswer) input()    {}
func (letterAnswer) input()    {}
func (handlerReturned) input() {}
func (abandonDue) input()      {}
func (extendAnswered) input()  {}
func (waitOver) input()        {}
func (doneLogDue) input()      {}

// inbox carries the inputs posted by other goroutines to the loop.
// Posting never blocks, also after the loop has ended (the inputs are
// then never received).
type inbox struct {
	mu   sync.Mutex
	in   []input
	wake chan struct{}
}

func (b *inbox) post(in input) {
	b.mu.Lock()
	b.in = append(b.in, in)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []input {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.in
	b.in = nil
	return in
}

// serve is the partition.ServeFunc.
func (w *Worker) serve(ctx context.Context, o *partition.Owned) {
	l := &loop{
		w:         w,
		o:         o,
		ctx:       ctx,
		n:         o.Partition(),
		log:       w.log.With("partition", o.Partition()),
		rules:     w.rules,
		lanes:     lanes.New(),
		ready:     lanes.NewFair(),
		slots:     w.slots.Waiter(),
		running:   map[*attempt]struct{}{},
		deadlines: map[int64]*deadline{},
		slow:      map[string]bool{},
		inbox:     inbox{wake: make(chan struct{}, 1)},
	}
	l.run()
}

// run is the loop: each turn takes what is ready (fetched records, inputs,
// slots, the extend tick, the partition's end), then decodes records,
// handles answers, starts handlers and sends the store calls that queued.
func (l *loop) run() {
	defer func() {
		l.dog.stop()
		for _, wn := range l.live.all() { // none waits: halt stopped every Wait
			if wn.x != nil && wn.x.timer != nil {
				wn.x.timer.Stop()
			}
		}
		for _, d := range l.deadlines { // none: every attempt ended
			d.cancel()
		}
		if l.startAt != nil {
			l.startAt.Stop()
		}
		if l.done.timer != nil {
			l.done.timer.Stop()
		}
		l.flushDone()
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
			l.receiveAll()
		case <-l.o.Ready():
			l.take()
		case <-l.slots.C():
			l.granted(l.slots.Take())
		case <-tick.C:
			l.extendClaims()
		case <-l.startC():
			l.startsDue()
		case <-halted:
			halted = nil
			l.halt()
		case <-done:
			done = nil
			l.stop()
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
	}
}

// closed is a closed channel: a select case on it is always ready.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// take moves newly fetched records to fetched, where arrive decodes them.
func (l *loop) take() {
	recs := l.o.Take()
	if stagetrace.On() { // the herd's trace (docs/performance.md)
		now := time.Now()
		for _, r := range recs {
			stagetrace.Fetch(r, now)
		}
	}
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
			l.receiveAll()
		case <-l.slots.C():
			l.granted(l.slots.Take())
		case <-l.o.Ready():
			l.take()
		default:
			return
		}
	}
}

func (l *loop) receiveAll() {
	for _, in := range l.inbox.take() {
		l.receive(in)
	}
}

// receive turns an input into the events of its windows.
func (l *loop) receive(in input) {
	switch in := in.(type) {
	case claimAnswer:
		l.claimed(in)
	case settleAnswer:
		l.settling--
		l.inFlightOps -= len(in.rp.batch)
		keep(&l.spare.ss, in.rp.ss)
		keep(&l.spare.runs, in.rp.runs)
		in.rp.ss, in.rp.runs = nil, nil
		l.replies = append(l.replies, in.rp)
	case letterAnswer:
		l.writing = false
		if in.err != nil {
			l.step(in.wn, machine.LetterFailed{})
		} else {
			l.step(in.wn, machine.LetterWritten{})
		}
	case handlerReturned:
		l.returned(in)
	case abandonDue:
		l.abandon(in.a)
	case extendAnswered:
		l.extend = false
	case waitOver:
		in.wn.x.timer = nil // set by wait
		l.step(in.wn, machine.TimerFired{Now: time.Now(), Seq: in.seq})
	case heldExtended:
		l.heldExtended(in)
	case doneLogDue:
		l.done.timer = nil
		l.flushDone()
	}
}

// idle reports whether nothing is in flight: every attempt returned or
// was abandoned, and no store call or dead letter is under way.
func (l *loop) idle() bool {
	return len(l.running) == 0 && l.claiming == 0 && l.settling == 0 && len(l.replies) == 0 && len(l.ops) == 0 && len(l.runs) == 0 && !l.extend && !l.writing && len(l.letters) == 0
}

// halt stops starting windows: the ones not started, waiting for a slot
// or a claim, are left unsettled for the partition's next owner; what
// holds a claim goes on to its answer.
func (l *loop) halt() {
	if !l.halted {
		l.halted = true
		l.slots.Want(0)
	}
	l.fetched = nil    // not decoded: left to the partition's next owner
	l.untilStart = nil // the Halted below leaves New windows and gives Held ones' claims back
	l.endClaims()
	for _, wn := range l.live.all() {
		l.step(wn, machine.Halted{})
	}
}

// stop: the partition's context ended (lost, or revoked past its grace):
// as halt, and nothing more is committed; running handlers, whose
// contexts derive from the partition's, are abandoned if they have not
// returned within Grace.
func (l *loop) stop() {
	if l.stopped {
		return
	}
	l.stopped = true
	if !l.halted {
		l.halted = true
		l.slots.Want(0)
	}
	l.fetched = nil
	l.untilStart = nil
	l.endClaims()
	now := time.Now()
	for a := range l.running {
		a.noteCancelled(monoOf(now))
	}
	for _, wn := range l.live.all() {
		l.step(wn, machine.Stopped{Now: now})
	}
}

// endClaims answers the claims queued and not sent: they never will be.
func (l *loop) endClaims() {
	q := l.claimQ
	l.claimQ = nil
	for _, wn := range q {
		l.step(wn, machine.ClaimFailed{Ended: true})
	}
}

// arriveChunk is how many fetched records arrive decodes at a time: a
// large fetch (thousands of records in a backlog) is decoded a chunk per
// turn of the loop, between the answers of store calls and the returns of
// handlers, rather than holding them all up for milliseconds.
const arriveChunk = 64

// arrive decodes up to arriveChunk fetched records into windows, and
// admits them to their jobs' lanes.
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
		wn := &win{rec: rec, msg: msg}
		l.live.add(wn)
		if err != nil {
			l.poison(wn, err)
			continue
		}
		if stagetrace.On() { // the herd's trace (docs/performance.md)
			stagetrace.Stamp(stagetrace.Published, msg.ScheduledAt, msg.PublishedAt)
			stagetrace.StampFetched(rec, msg.ScheduledAt)
			stagetrace.Stamp(stagetrace.Decoded, msg.ScheduledAt, time.Now())
		}
		wn.item = lanes.Item{Key: msg.Job, Policy: policyOf(msg), Data: wn}
		wn.spec = l.specOf(wn)
		l.arrived = machine.Arrived{Spec: &wn.spec} // by pointer, as attemptOver's Returned
		l.step(wn, &l.arrived)
		if wn.item.Policy != lanes.Queue && wn.item.Policy != lanes.Allow && wn.spec.Start.After(time.Now()) {
			l.untilStartPush(startWait{wn: wn, at: wn.spec.Start, arrive: true})
			continue
		}
		l.apply(l.lanes.Arrive(&wn.item))
	}
	l.slots.Want(l.ready.Startable())
}

// specOf is what wn's record says that the rules use. A window's age
// counts from the later of its published_at and its Kafka timestamp, so a
// record republished by kjobctl dlq redrive is young again. The rules run
// on the real clock; with a Config.Now of its own (tests), the record's
// birth is moved onto the real clock as that clock reads now.
func (l *loop) specOf(wn *win) machine.Spec {
	msg := wn.msg
	born := msg.PublishedAt
	if wn.rec.Timestamp.After(born) {
		born = wn.rec.Timestamp
	}
	if !l.w.realClock {
		born = born.Add(time.Since(l.w.cfg.Now()))
	}
	start := msg.ScheduledAt
	if !l.w.realClock {
		start = start.Add(time.Since(l.w.cfg.Now()))
	}
	p := msg.Policy
	return machine.Spec{MaxAttempts: p.MaxAttempts, Backoff: time.Duration(p.Backoff),
		MaxBackoff: time.Duration(p.MaxBackoff), Timeout: time.Duration(p.Timeout), Born: born, Start: start}
}

// poison dead-letters a record that is not a valid window, or (msg set,
// err ErrForeignNamespace) a window of another deployment, unclaimed.
func (l *loop) poison(wn *win, err error) {
	rec, msg := wn.rec, wn.msg
	wn.rare().bad = err
	reason := "undecodable record: " + err.Error()
	if errors.Is(err, errUnverified) || errors.Is(err, ErrForeignNamespace) {
		reason = err.Error()
	}
	if msg != nil {
		l.log.Error("dead-lettering a window of another deployment without running it", "offset", rec.Offset, "window", msg.ID, "job", msg.Job, "err", err)
	} else {
		l.log.Error("dead-lettering a record that is not a valid window", "offset", rec.Offset, "err", err)
	}
	l.step(wn, machine.Arrived{Invalid: reason})
}

// apply turns a lanes decision into its windows' events.
func (l *loop) apply(d lanes.Decision) {
	for _, dr := range d.Drop {
		wn, by := dr.Item.Data.(*win), dr.By.Data.(*win)
		p := machine.DropSkip
		switch {
		case dr.Superseded:
			p = machine.DropReplace
		case dr.Item.Policy == lanes.Latest:
			p = machine.DropLatest
		}
		l.step(wn, machine.Dropped{By: by.msg.ID, Policy: p})
	}
	for _, c := range d.Cancel {
		l.step(c.Item.Data.(*win), machine.Superseded{By: c.By.Data.(*win).msg.ID, Now: time.Now()})
	}
	for _, it := range d.Start {
		l.step(it.Data.(*win), machine.Admitted{})
	}
}

// granted gives the slots just granted to the windows waiting for one, in
// the order the fair queue gives them (lanes.Fair: each job within its
// max_concurrent, the job holding the fewest slots first).
func (l *loop) granted(n int) {
	l.slotsHeld += n
	now := time.Now()
	for ; n > 0; n-- {
		it := l.ready.Pop()
		if it == nil {
			break
		}
		wn := it.Data.(*win)
		if stagetrace.On() {
			stagetrace.Stamp(stagetrace.SlotGranted, wn.msg.ScheduledAt, now)
		}
		if wn.m.State() == machine.Held { // starts now under its claim: for its reports
			wn.ran = ran{started: now, finished: now, notStarted: now.Sub(wn.m.ProvenAt())}
			if !l.w.realClock {
				wn.ran.started = l.w.cfg.Now()
				wn.ran.finished = wn.ran.started
			}
		}
		l.grant = machine.SlotGranted{Now: now} // by pointer, as attemptOver's Returned
		l.step(wn, &l.grant)
	}
	if n > 0 {
		l.slotsHeld -= n
		l.slots.Release(n)
	}
	l.slots.Want(l.ready.Startable())
}

// claimed turns a claim call's answer into its windows' events.
func (l *loop) claimed(in claimAnswer) {
	l.claiming--
	if in.err != nil {
		ended := l.ctx.Err() != nil
		for _, wn := range in.batch {
			l.step(wn, machine.ClaimFailed{Ended: ended, Err: in.err})
		}
		return
	}
	now := time.Now()
	for i, wn := range in.batch {
		if stagetrace.On() {
			stagetrace.Stamp(stagetrace.Claimed, wn.msg.ScheduledAt, now)
		}
		l.step(wn, l.claimEvent(wn, in.cs[i], in.proven, now))
	}
}

// claimEvent maps the claim c of wn, taken by a call that started at
// proven and answered by now, to its event.
func (l *loop) claimEvent(wn *win, c dedupe.Claim, proven, now time.Time) machine.Event {
	wn.claim = claimOf{outcome: c.Outcome, token: c.Token, attempt: c.Attempt}
	switch c.Outcome {
	case dedupe.Claimed:
		wn.ran = ran{started: now, finished: now, notStarted: now.Sub(proven)}
		if !l.w.realClock {
			wn.ran.started = l.w.cfg.Now()
			wn.ran.finished = wn.ran.started
		}
		// By pointer, as attemptOver's Returned: one fewer boxed event
		// per window claimed by a claim call (the herd, 10,000 in
		// flight); the rules copy a claim taken ahead (the no-op
		// burst's queue lanes).
		l.claim = machine.Claimed{Token: c.Token, Attempt: c.Attempt, ProvenAt: proven, Now: now}
		return &l.claim
	case dedupe.AlreadyDone:
		return machine.AlreadyDone{}
	}
	return machine.Busy{Retry: c.Retry}
}

// chainNext offers the slot of wn, whose attempt succeeded, to the next
// window of its queue lane, whose claim then rides on wn's completion
// (dedupe.Settlement.Next): it starts once wn is done, one store round
// trip after wn's handler returned. It reports whether that window took
// the slot.
func (l *loop) chainNext(wn *win) bool {
	if l.halted {
		return false
	}
	it := l.lanes.Next(&wn.item)
	if it == nil {
		return false
	}
	n := it.Data.(*win)
	if !n.m.Chainable() {
		return false
	}
	l.step(n, machine.ChainOffered{})
	wn.next = n
	return true
}

// finish settles wn's record for the partition's commit point, and
// finishes it in its lane, whose next window may start.
func (l *loop) finish(wn *win) {
	l.o.Settle(wn.rec)
	if wn.item.Active() {
		l.apply(l.lanes.Finish(&wn.item))
		l.slots.Want(l.ready.Startable())
	}
}

// putSlot gives back the slot wn held (its job's, in the fair queue's
// count).
func (l *loop) putSlot(wn *win) {
	startable := l.ready.Startable()
	l.ready.Release(wn.item.Key)
	l.slotsHeld--
	l.slots.Release(1)
	if n := l.ready.Startable(); n != startable && !l.halted {
		l.slots.Want(n) // windows of a job that was at its max_concurrent
	}
}

// wait delivers TimerFired{Seq} to wn after d, unless stopWait comes
// first.
func (l *loop) wait(wn *win, d time.Duration, seq uint64) {
	wn.rare().timer = time.AfterFunc(d, func() { l.inbox.post(waitOver{wn: wn, seq: seq}) })
}

// untilStartPush adds w to untilStart.
func (l *loop) untilStartPush(w startWait) {
	if l.w.herd != nil {
		l.w.herd.expect(w.wn.spec.Start) // the window's start, one instant for a herd: BenchmarkHerd's row
	}
	heap.Push(&l.untilStart, w)
	if l.untilStart[0] == w {
		l.armStart()
	}
}

// armStart sets startAt to the first start waited for.
func (l *loop) armStart() {
	if len(l.untilStart) == 0 {
		return
	}
	d := time.Until(l.untilStart[0].at)
	if l.startAt == nil {
		l.startAt = time.NewTimer(d)
		return
	}
	l.startAt.Reset(d)
}

// startC is startAt's channel while windows wait for their start; nil
// otherwise.
func (l *loop) startC() <-chan time.Time {
	if len(l.untilStart) == 0 || l.startAt == nil {
		return nil
	}
	return l.startAt.C
}

// startsDue handles the windows whose start came: a Held window's Wait
// ends; a window kept out of its lane arrives in it.
func (l *loop) startsDue() {
	now := time.Now()
	arrived := false
	for len(l.untilStart) > 0 && !l.untilStart[0].at.After(now) {
		w := heap.Pop(&l.untilStart).(startWait)
		switch {
		case !w.arrive:
			l.step(w.wn, machine.TimerFired{Now: now, Seq: w.seq})
		case w.wn.m.State() == machine.New: // not left by a halt
			l.apply(l.lanes.Arrive(&w.wn.item))
			arrived = true
		}
	}
	if arrived {
		l.slots.Want(l.ready.Startable())
	}
	l.armStart()
}

// startWait is a window waiting for its start at at: a Held window's Wait
// numbered seq, or (arrive) a window to put in its lane then.
type startWait struct {
	wn     *win
	seq    uint64
	at     time.Time
	arrive bool
}

// startHeap orders the windows waiting for their start (container/heap).
type startHeap []startWait

func (h startHeap) Len() int           { return len(h) }
func (h startHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h startHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *startHeap) Push(x any)        { *h = append(*h, x.(startWait)) }
func (h *startHeap) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	old[n-1] = startWait{}
	*h = old[:n-1]
	return x
}

func (l *loop) stopWait(wn *win) {
	if wn.x != nil && wn.x.timer != nil {
		wn.x.timer.Stop()
		wn.x.timer = nil
	}
}

// letter is a dead letter queued for the partition: they are produced one
// at a time, in the order they were decided.
type letter struct {
	wn       *win
	reason   string
	attempts int
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
	attrs = append(attrs, "offset", wn.rec.Offset)
	if wn.msg != nil {
		attrs = append(attrs, "window", wn.msg.ID, "job", wn.msg.Job)
	}
	if wn.claim.outcome == dedupe.Claimed && wn.claim.token != 0 {
		attrs = append(attrs, "token", wn.claim.token, "attempt", wn.claim.attempt)
	}
	return append(attrs, more...)
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
	return handler.NewJob(wn.msg, wn.claim.attempt, wn.claim.token, l.w.cfg.WorkerID, wn.rec.Partition, wn.rec.Offset)
}
