// Package stagetrace records, while a trace is on, when windows passed
// each stage of their way from the producer to their handler, as time
// since each window's start, so that the delay of many windows due at once
// (the herd of docs/performance.md) can be split into its stages: was a
// window late because it was published late, fetched late, waited for a
// slot or for its claim?
//
//	t := stagetrace.Start(from, until) // windows starting in [from, until)
//	... the windows run ...
//	t.Stop()
//	for _, s := range t.Stages() { fmt.Println(s) }
//
// The worker stamps every stage; with no trace on, a stamp costs one
// atomic load and allocates nothing. One trace is on at a time, for the
// whole process.
package stagetrace

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stage is one step of a window's way to its handler, in order.
type Stage uint8

const (
	// Published is the producer's published_at: when it took the window
	// into a transaction.
	Published Stage = iota
	// Fetched is when the worker's partition loop took the record from
	// the fetch: the transaction was committed and fetched.
	Fetched
	// Decoded is when the loop decoded the record and gave it to its lane.
	Decoded
	// SlotGranted is when the window got one of the worker's slots
	// (--concurrency).
	SlotGranted
	// ClaimSent is when the claim call carrying the window went out.
	ClaimSent
	// Claimed is when that call's answer reached the loop.
	Claimed
	// Started is when the loop handed the claimed window to a goroutine
	// to run its handler.
	Started
	numStages
)

var stageNames = [numStages]string{"published", "fetched", "decoded", "slot granted", "claim sent", "claimed", "handler started"}

func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return fmt.Sprintf("Stage(%d)", uint8(s))
}

// cur is the trace that is on, nil if none.
var cur atomic.Pointer[Trace]

// Trace collects the stamps of the windows starting in [from, until).
type Trace struct {
	from, until time.Time

	mu      sync.Mutex
	d       [numStages][]time.Duration
	fetched map[any]time.Time // Fetch's notes, until Stamped
}

// Start turns a trace on for the windows starting in [from, until),
// replacing the trace that was on, and returns it.
func Start(from, until time.Time) *Trace {
	t := &Trace{from: from, until: until, fetched: map[any]time.Time{}}
	cur.Store(t)
	return t
}

// Stop turns t off; its stamps stay readable.
func (t *Trace) Stop() { cur.CompareAndSwap(t, nil) }

// On reports whether a trace is on: callers that must do work to stamp
// (other than passing times) check it first.
func On() bool { return cur.Load() != nil }

// Stamp records that the window starting at start passed stage s at at.
func Stamp(s Stage, start, at time.Time) {
	t := cur.Load()
	if t == nil || start.Before(t.from) || !start.Before(t.until) {
		return
	}
	t.mu.Lock()
	t.d[s] = append(t.d[s], at.Sub(start))
	t.mu.Unlock()
}

// Fetch notes that the record key (a *kgo.Record) was fetched at at, before
// its window's start is known; StampFetched stamps it once decoded.
func Fetch(key any, at time.Time) {
	t := cur.Load()
	if t == nil {
		return
	}
	t.mu.Lock()
	t.fetched[key] = at
	t.mu.Unlock()
}

// StampFetched stamps the Fetched stage of the window starting at start,
// whose record key Fetch noted, and forgets the note.
func StampFetched(key any, start time.Time) {
	t := cur.Load()
	if t == nil {
		return
	}
	t.mu.Lock()
	at, ok := t.fetched[key]
	delete(t.fetched, key)
	if ok && !start.Before(t.from) && start.Before(t.until) {
		t.d[Fetched] = append(t.d[Fetched], at.Sub(start))
	}
	t.mu.Unlock()
}

// Summary is one stage's distribution over the traced windows.
type Summary struct {
	Stage Stage
	// N is the number of windows stamped; P50, P99 and Max are nearest
	// rank, since each window's start.
	N             int
	P50, P99, Max time.Duration
}

func (s Summary) String() string {
	if s.N == 0 {
		return fmt.Sprintf("%-16s no samples", s.Stage)
	}
	return fmt.Sprintf("%-16s p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  (%d windows)", s.Stage, ms(s.P50), ms(s.P99), ms(s.Max), s.N)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Stages returns the distribution of each stage, in order.
func (t *Trace) Stages() []Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Summary, 0, numStages)
	for s := range numStages {
		ds := slices.Clone(t.d[s])
		slices.Sort(ds)
		sm := Summary{Stage: s, N: len(ds)}
		if len(ds) > 0 {
			sm.P50, sm.P99, sm.Max = Percentile(ds, 50), Percentile(ds, 99), ds[len(ds)-1]
		}
		out = append(out, sm)
	}
	return out
}

// Percentile is the p-th percentile of sorted ds, nearest rank: the
// smallest value with at least p% of ds at or below it.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(ds))/100)) - 1
	return ds[max(0, min(i, len(ds)-1))]
}
