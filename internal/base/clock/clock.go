// Package clock abstracts time for code that schedules work, so tests drive
// time explicitly instead of sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer kjob uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a real timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a manually advanced clock for tests. Timers fire when Advance or
// Set moves the time to or past their deadline.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// changed is closed and replaced whenever a timer is created, so tests
	// can wait until the code under test is waiting on the clock.
	changed chan struct{}
}

// NewFake returns a Fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t, changed: make(chan struct{})} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.at = f.now.Add(d)
	t.active = true
	f.timers = append(f.timers, t)
	f.fireLocked()
	close(f.changed)
	f.changed = make(chan struct{})
	return t
}

// TimerCreated returns a channel closed the next time a timer is created or
// reset.
func (f *Fake) TimerCreated() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Advance moves the time forward by d, firing due timers.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the time to t (never backwards), firing due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	f.fireLocked()
}

// NextTimer returns the earliest active timer's deadline, if any.
func (f *Fake) NextTimer() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ats []time.Time
	for _, t := range f.timers {
		if t.active {
			ats = append(ats, t.at)
		}
	}
	if len(ats) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	return ats[0], true
}

func (f *Fake) fireLocked() {
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.active {
			continue
		}
		if !t.at.After(f.now) {
			t.active = false
			select {
			case t.c <- f.now:
			default:
			}
			continue
		}
		kept = append(kept, t)
	}
	f.timers = kept
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.at = t.f.now.Add(d)
	if !was {
		t.active = true
		t.f.timers = append(t.f.timers, t)
	}
	t.f.fireLocked()
	close(t.f.changed)
	t.f.changed = make(chan struct{})
	return was
}

// Sleep waits d or until ctx is done, whichever comes first, and returns
// ctx.Err() in the second case (also when d <= 0 and ctx is done).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
