// Package gctune sets the Go collector's target (GOGC) from the live heap,
// for a program whose large heaps are long-lived state (cmd/producer: the
// view of every job). A lower GOGC holds less garbage beside such a heap,
// and costs more collections; a small heap costs little memory at Go's
// default, and its collections compete with the work itself: the
// producer's GOGC 50 made the herd of 1,000 jobs due at once start about
// 12% later at its p99 than GOGC 100 (docs/performance.md, "GOGC by live
// heap"), while 100,000 schedules need 50 to keep their RSS target.
//
// After each collection the tuner reads the live heap
// (runtime/metrics /gc/heap/live:bytes) and sets GOGC to Config.Large's
// percent once the live heap is at least Config.From, and back to
// Config.Small's once it is below half of it, so that a heap near the line
// does not switch at every cycle.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Config is when to use which GOGC.
type Config struct {
	// Small is GOGC while the live heap is small (below From at the
	// start, then below From/2), e.g. Go's default 100.
	Small int
	// Large is GOGC once the live heap reaches From, e.g. 50.
	Large int
	// From is the live heap, in bytes, from which Large applies.
	From uint64
}

// Percent is the GOGC the tuner sets after a collection that found live
// bytes of live heap, while cur is set: Config's rule as a pure function.
func (c Config) Percent(cur int, live uint64) int {
	switch {
	case live >= c.From:
		return c.Large
	case live < c.From/2:
		return c.Small
	}
	return cur // between the two lines: keep what is set
}

// Start sets GOGC to c.Small and tunes it after every collection until
// stop is called. Only one tuner may run in a process: GOGC is process-wide.
func Start(c Config) (stop func()) {
	t := &tuner{c: c, cur: c.Small}
	t.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	debug.SetGCPercent(c.Small)
	t.arm()
	return func() { t.stopped.Store(true) }
}

type tuner struct {
	c       Config
	cur     int // the finalizer goroutine's alone
	sample  []metrics.Sample
	stopped atomic.Bool
}

// sentinel is an object the tuner drops at once: its cleanup runs after
// the collection that found it unreachable. Two pointers keep it out of
// the tiny allocator, whose objects' cleanups may never run.
type sentinel struct{ _ [2]*byte }

// arm drops a new sentinel whose cleanup tunes GOGC and arms the next one.
func (t *tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *tuner) { t.tune() }, t)
}

func (t *tuner) tune() {
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 {
		if p := t.c.Percent(t.cur, v.Uint64()); p != t.cur {
			t.cur = p
			debug.SetGCPercent(p)
		}
	}
	t.arm()
}
