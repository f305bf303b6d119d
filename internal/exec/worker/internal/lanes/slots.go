package lanes

import "sync"

// Slots bounds how many windows run at once across a worker's partitions:
// a window holds a slot from the moment it may start (its claim) until its
// handler returns. Partitions that want slots while none are free queue up,
// and freed slots go to them one at a time in turn, so a partition with a
// long backlog gets no more than its share while others wait.
type Slots struct {
	mu      sync.Mutex
	free    int
	waiting []*Waiter // want more than they got, in turn order
}

// NewSlots returns a pool of n slots.
func NewSlots(n int) *Slots { return &Slots{free: n} }

// Waiter is one partition's handle on the pool. Its methods are safe for
// concurrent use, but it is meant for one partition loop.
type Waiter struct {
	s       *Slots
	want    int // slots asked for and not yet granted
	granted int // slots granted and not yet taken
	queued  bool
	c       chan struct{}
}

// Waiter returns a new handle on the pool.
func (s *Slots) Waiter() *Waiter { return &Waiter{s: s, c: make(chan struct{}, 1)} }

// C receives a value when slots were granted: call Take.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Want sets how many slots the partition wants to take now, counting
// those granted and not yet taken: free slots are granted at once, the
// rest as they free up, in turn with the other partitions.
func (w *Waiter) Want(n int) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w.want = max(n-w.granted, 0)
	if w.want > 0 && s.free > 0 && !w.queued {
		k := min(w.want, s.free)
		s.free -= k
		w.want -= k
		w.granted += k
		w.signal()
	}
	if w.want > 0 && !w.queued {
		w.queued = true
		s.waiting = append(s.waiting, w)
	}
}

// Take returns the number of slots granted since the last Take; the
// partition now holds them.
func (w *Waiter) Take() int {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := w.granted
	w.granted = 0
	return n
}

// Release gives back n slots the partition held.
func (w *Waiter) Release(n int) { w.s.release(n) }

// Close leaves the queue and gives back the slots granted and not taken.
func (w *Waiter) Close() {
	s := w.s
	s.mu.Lock()
	n := w.granted
	w.granted, w.want = 0, 0
	if w.queued {
		w.queued = false
		for i, q := range s.waiting {
			if q == w {
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				break
			}
		}
	}
	s.mu.Unlock()
	s.release(n)
}

// release hands n slots to the waiting partitions, one slot per partition
// in turn, and keeps the rest free.
func (s *Slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n > 0 && len(s.waiting) > 0 {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		if w.want <= 0 { // wants nothing any more
			w.queued = false
			continue
		}
		n--
		w.want--
		w.granted++
		w.signal()
		if w.want > 0 {
			s.waiting = append(s.waiting, w)
		} else {
			w.queued = false
		}
	}
	s.free += n
}

// Free returns the number of slots neither held nor granted.
func (s *Slots) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}

func (w *Waiter) signal() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}
