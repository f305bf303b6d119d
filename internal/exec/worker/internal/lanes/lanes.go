// Package lanes is the worker's scheduler inside a partition: which of a
// partition's windows may start now. Each job (record key) has a lane; a
// window waits in its job's lane only behind windows of the same job, as
// the job's overlap policy says, never behind another job's. Across the
// partitions a worker owns, Slots bounds how many windows run at once and
// hands free slots to the partitions in turn; inside a partition, Fair
// hands them to the jobs, each within its max_concurrent, the job holding
// the fewest first.
//
// The package holds no I/O and no goroutines: the worker's partition loop
// calls it and carries out its decisions (start a window, settle one as
// skipped or superseded, cancel one). Its rules are the overlap policies
// (Temporal's schedule overlap policies, Kubernetes' concurrencyPolicy):
//
//	Queue   (BUFFER_ALL)         one window at a time, in arrival order
//	Skip    (SKIP, Forbid)       a window arriving while one is active is dropped
//	Latest  (BUFFER_ONE)         while one is active only the newest arrival waits;
//	                             older waiting ones are dropped
//	Replace (CANCEL_OTHER, Replace) an arrival cancels the active window and
//	                             drops the waiting ones; it starts once the
//	                             cancelled one has finished
//	Allow   (ALLOW_ALL)          every window starts at once
//
// A window is active from the moment it is started (given to the worker)
// until the worker reports it finished (Finish): while it waits for a
// slot, runs, backs off before a retry or waits for another worker's live
// claim, it is active and holds its lane.
package lanes

import "fmt"

// Policy is a job's overlap policy: what happens to a window of the job
// that arrives while an earlier one is active.
type Policy uint8

// The policies; the zero value is Queue.
const (
	Queue Policy = iota
	Skip
	Latest
	Replace
	Allow
)

// String returns the policy's name as in the schedules file.
func (p Policy) String() string {
	switch p {
	case Queue:
		return "queue"
	case Skip:
		return "skip"
	case Latest:
		return "latest"
	case Replace:
		return "replace"
	case Allow:
		return "allow"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Item is one window in a lane. The worker fills Key, Policy and Data;
// the rest is the lane's.
type Item struct {
	// Key is the lane: the job (the record key).
	Key string
	// Policy is the job's overlap policy as this window carries it.
	Policy Policy
	// Data is the worker's window.
	Data any

	active, cancelled bool
}

// Active reports whether the item was started and has not finished.
func (it *Item) Active() bool { return it.active }

// Drop is an item the worker settles without running it.
type Drop struct {
	Item *Item
	// Superseded is true for a window a newer one replaced (Replace),
	// false for one skipped (Skip, Latest).
	Superseded bool
	// By is the newer item that caused the drop (the active one for Skip).
	By *Item
}

// Decision is what the worker must do after an Arrive or a Finish, in
// this order: settle Drop without running them, cancel Cancel (each
// stays active until the worker finishes it; By is the arrival that
// replaces it), start Start.
type Decision struct {
	Drop   []Drop
	Cancel []Drop
	Start  []*Item
}

type lane struct {
	active  []*Item // started, not finished, in start order
	waiting []*Item // arrived, not started, in arrival order
}

// Lanes are the lanes of one partition. The zero value is not usable;
// create it with New. It is not safe for concurrent use: one partition
// loop owns it.
type Lanes struct {
	lanes map[string]*lane
}

// New returns empty lanes.
func New() *Lanes { return &Lanes{lanes: map[string]*lane{}} }

// Len returns the number of items in the lanes (active or waiting).
func (l *Lanes) Len() int {
	n := 0
	for _, ln := range l.lanes {
		n += len(ln.active) + len(ln.waiting)
	}
	return n
}

// Arrive admits a new window of its lane, arriving in offset order, under
// its own policy.
func (l *Lanes) Arrive(it *Item) Decision {
	ln := l.lanes[it.Key]
	if ln == nil {
		ln = &lane{}
		l.lanes[it.Key] = ln
	}
	var d Decision
	if len(ln.active) == 0 && len(ln.waiting) == 0 || it.Policy == Allow {
		l.start(ln, it, &d)
		return d
	}
	switch it.Policy {
	case Skip:
		by := it
		if len(ln.active) > 0 {
			by = ln.active[len(ln.active)-1]
		} else if len(ln.waiting) > 0 {
			by = ln.waiting[len(ln.waiting)-1]
		}
		d.Drop = append(d.Drop, Drop{Item: it, By: by})
		l.cleanup(it.Key, ln)
	case Latest:
		for _, w := range ln.waiting {
			d.Drop = append(d.Drop, Drop{Item: w, By: it})
		}
		ln.waiting = append(ln.waiting[:0], it)
	case Replace:
		for _, w := range ln.waiting {
			d.Drop = append(d.Drop, Drop{Item: w, Superseded: true, By: it})
		}
		ln.waiting = append(ln.waiting[:0], it)
		for _, a := range ln.active {
			if !a.cancelled {
				a.cancelled = true
				d.Cancel = append(d.Cancel, Drop{Item: a, Superseded: true, By: it})
			}
		}
	default: // Queue
		ln.waiting = append(ln.waiting, it)
	}
	return d
}

// Finish reports that an active item has finished for good (settled, or
// abandoned to the next owner): the next waiting window of its lane may
// start.
func (l *Lanes) Finish(it *Item) Decision {
	var d Decision
	ln := l.lanes[it.Key]
	if ln == nil || !it.active {
		return d
	}
	it.active = false
	for i, a := range ln.active {
		if a == it {
			ln.active = append(ln.active[:i], ln.active[i+1:]...)
			break
		}
	}
	if len(ln.active) == 0 && len(ln.waiting) > 0 {
		next := ln.waiting[0]
		ln.waiting = ln.waiting[1:]
		l.start(ln, next, &d)
		// Windows of Allow that queued behind a stricter window start
		// with it.
		for len(ln.waiting) > 0 && ln.waiting[0].Policy == Allow {
			next = ln.waiting[0]
			ln.waiting = ln.waiting[1:]
			l.start(ln, next, &d)
		}
	}
	l.cleanup(it.Key, ln)
	return d
}

// Next returns the item Finish(it) would start: the first waiting item of
// it's lane, if it is a Queue item and it is the lane's only active item;
// nil otherwise. The worker claims it ahead while it's completion is
// recorded, so it starts the moment it settles.
func (l *Lanes) Next(it *Item) *Item {
	ln := l.lanes[it.Key]
	if ln == nil || !it.active || len(ln.active) != 1 || len(ln.waiting) == 0 || ln.waiting[0].Policy != Queue {
		return nil
	}
	return ln.waiting[0]
}

// Cancelled reports whether the item was cancelled by a newer window
// (Replace).
func (it *Item) Cancelled() bool { return it.cancelled }

func (l *Lanes) start(ln *lane, it *Item, d *Decision) {
	it.active = true
	ln.active = append(ln.active, it)
	d.Start = append(d.Start, it)
}

func (l *Lanes) cleanup(key string, ln *lane) {
	if len(ln.active) == 0 && len(ln.waiting) == 0 {
		delete(l.lanes, key)
	}
}
