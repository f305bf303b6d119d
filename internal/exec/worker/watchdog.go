package worker

import (
	"sync"
	"time"
)

// watchdog is a partition loop's one timer for the deadlines of its
// running attempts: each claim's step-down deadline (its keepalive's
// Deadline) and each handler's abandonment deadline (Grace after its
// context was done). It fires at the earliest of them, on a goroutine of
// its own, so stepping down never waits for the loop; one timer per
// partition instead of one per attempt keeps ten thousand windows in
// flight from holding ten thousand timers.
//
// Extends move step-down deadlines later without telling the watchdog:
// it then fires early, finds nothing due, and sets itself for the new
// earliest deadline (at most every extend interval or so). A deadline
// that moves earlier (a handler cancelled, whose abandonment is then due
// Grace later) pokes it.
type watchdog struct {
	mu      sync.Mutex
	atts    []*attempt // watched; attempt.dog is the index
	timer   *time.Timer
	at      int64 // mono the timer is set for; 0 when it is not set
	stopped bool
}

// watch adds a, whose earliest deadline is at (mono).
func (d *watchdog) watch(a *attempt, at int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a.dog = len(d.atts)
	d.atts = append(d.atts, a)
	d.setLocked(at)
}

// unwatch removes a (its attempt ended).
func (d *watchdog) unwatch(a *attempt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := a.dog
	if i < 0 || i >= len(d.atts) || d.atts[i] != a {
		return
	}
	last := len(d.atts) - 1
	d.atts[i] = d.atts[last]
	d.atts[i].dog = i
	d.atts[last] = nil
	d.atts = d.atts[:last]
	a.dog = -1
}

// poke makes sure the watchdog fires by at (mono): a watched attempt's
// deadline moved earlier.
func (d *watchdog) poke(at int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setLocked(at)
}

// setLocked sets the timer for at unless it is set for earlier already.
func (d *watchdog) setLocked(at int64) {
	if d.stopped || d.at != 0 && d.at <= at {
		return
	}
	d.at = at
	wait := time.Duration(max(at-mono(), 0))
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
		return
	}
	d.timer.Reset(wait)
}

// fire runs on the timer: every attempt whose claim was not proven since
// steps down (its keepalive expires and cancels its handler); every
// handler past its abandonment deadline is handed to the loop to be
// abandoned; then the timer is set for the next deadline.
func (d *watchdog) fire() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.at = 0
	due := make([]*attempt, len(d.atts))
	copy(due, d.atts)
	d.mu.Unlock()

	// Outside the lock: a step-down cancels a handler, which pokes the
	// watchdog.
	t := time.Now()
	now := monoOf(t)
	for _, a := range due {
		if a.stopped.Load() {
			continue
		}
		a.claim.Check(t)
		if a.abandonAt() <= now && a.abandoning.CompareAndSwap(false, true) {
			a.l.inbox.post(abandonDue{a})
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	next := int64(0)
	for _, a := range d.atts {
		if a.abandoning.Load() || a.stopped.Load() {
			continue
		}
		if at := a.deadline(); next == 0 || at < next {
			next = at
		}
	}
	if next != 0 {
		d.setLocked(next)
	}
}

// stop releases the timer; the watchdog fires no more.
func (d *watchdog) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}
