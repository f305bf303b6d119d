package worker

import (
	"runtime"
	"sync"
	"time"
)

// herdGC collects this process's garbage just before a herd: more
// windows held for one start instant than the worker has slots, which
// start in waves as the slots turn over. A collection that runs while
// they start takes a quarter of the CPU and makes the goroutines that
// allocate mark in turn, so on 2 cores it made each wave 2-3 times
// slower: in BenchmarkHerd/jobs=1000 (test/perf, 3 runs of 10 ticks), 11
// of the 13 ticks whose last start came over 11 ms after their start had
// a collection among their starts, none of the 17 others did, and one
// such tick in ten set the p99. Collecting herdGCAhead before the start
// leaves the heap far from the next collection's goal when the herd
// allocates (docs/performance.md, "The evening: a collection before the
// herd").
type herdGC struct {
	threshold int           // windows held for one instant that make a herd
	ahead     time.Duration // how long before the instant to collect
	minGap    time.Duration // the least time between two collections
	gc        func()        // runtime.GC; tests count calls instead

	mu      sync.Mutex
	sweepAt int                   // len(held) at which instants gone by are dropped
	held    map[int64]int         // windows held for each start instant to come (Unix ns)
	armed   map[int64]*time.Timer // the collection set for the instant
	last    time.Time             // when the last collection was started
	stopped bool
	fires   sync.WaitGroup // armed timers not stopped, until their fire returns
}

const (
	// herdGCAhead leaves the collection time to finish before the herd
	// (a few ms for a worker's heap of tens of MB) and comes after the
	// windows were fetched, decoded and claimed, 450-500 ms before
	// their start with the default publish lead.
	herdGCAhead = 100 * time.Millisecond
	// herdGCMinGap bounds the collections herds may cause to one a
	// second: a herd every second gets one each.
	herdGCMinGap = time.Second
)

func newHerdGC(threshold int) *herdGC {
	return &herdGC{threshold: threshold, ahead: herdGCAhead, minGap: herdGCMinGap, gc: runtime.GC,
		sweepAt: 64, held: map[int64]int{}, armed: map[int64]*time.Timer{}}
}

// expect counts one more window waiting for its start at at; the
// threshold-th one for the same instant sets a collection ahead of it,
// if there is still time.
func (h *herdGC) expect(at time.Time) {
	k := at.UnixNano()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) > h.sweepAt { // instants gone by without a herd; amortised: the bound doubles
		now := time.Now().UnixNano()
		for t := range h.held {
			if t < now && h.armed[t] == nil {
				delete(h.held, t)
			}
		}
		h.sweepAt = max(64, 2*len(h.held))
	}
	h.held[k]++
	if h.stopped || h.held[k] < h.threshold || h.armed[k] != nil {
		return
	}
	d := time.Until(at.Add(-h.ahead))
	if d <= 0 { // too late to collect before it
		return
	}
	h.fires.Add(1)
	h.armed[k] = time.AfterFunc(d, func() { h.fire(k) })
}

// stop stops the collections set and waits for one under way: the
// worker's Run returns after it.
func (h *herdGC) stop() {
	h.mu.Lock()
	h.stopped = true
	for k, t := range h.armed {
		if t.Stop() {
			h.fires.Done()
		}
		delete(h.armed, k)
	}
	h.mu.Unlock()
	h.fires.Wait()
}

// fire runs ahead of the herd's instant at (Unix ns).
func (h *herdGC) fire(at int64) {
	defer h.fires.Done()
	h.mu.Lock()
	delete(h.held, at)
	delete(h.armed, at)
	now := time.Now()
	run := !h.stopped && now.Sub(h.last) >= h.minGap // the zero last is long ago
	if run {
		h.last = now
	}
	h.mu.Unlock()
	if run {
		h.gc()
	}
}
