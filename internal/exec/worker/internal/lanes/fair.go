package lanes

// Fair is a partition's queue of windows waiting for a slot (started by
// their lanes, not yet holding a slot). It decides which window gets the
// next slot the partition is granted, by two rules:
//
//   - a job holds at most its limit of slots at once (the window's
//     max_concurrent; 0 means no limit of its own): its other windows wait
//     even while slots are free, so one job cannot take every slot;
//   - among the jobs with a window waiting and below their limit, the
//     slot goes to the job holding the fewest slots, and among those to
//     the one that has waited longest at that count (round-robin). A job
//     with nothing running is served before any job that has a window
//     running, so a job's backlog never starves another job.
//
// Windows of one job get slots in the order they were pushed. A slot
// stays counted for its job until Release: while the window claims, runs,
// or hands the slot to the next window of its lane (a queue lane's
// chained claim, which needs no Pop).
//
// Like Lanes it holds no I/O and is not safe for concurrent use: one
// partition loop owns it. Push, Pop and Release cost O(1) amortised.
type Fair struct {
	jobs map[string]*fairJob
	// levels[h] lists the jobs holding h slots that may take another now
	// (a window waiting, below their limit), in turn order.
	levels    []fairList
	lowest    int // no level below it lists a job
	startable int // windows that may take a slot now (Startable)
	waiting   int // windows waiting (Waiting)
	free      []*fairJob
}

type fairJob struct {
	key        string
	queue      []*Item // waiting, in push order, from head
	head       int
	held       int
	limit      int // 0: none
	level      int // the level listing it; -1 if none
	prev, next *fairJob
}

// fairList is a doubly linked list of jobs.
type fairList struct{ first, last *fairJob }

func (q *fairList) pushBack(j *fairJob) {
	j.prev, j.next = q.last, nil
	if q.last != nil {
		q.last.next = j
	} else {
		q.first = j
	}
	q.last = j
}

func (q *fairList) remove(j *fairJob) {
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		q.first = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		q.last = j.prev
	}
	j.prev, j.next = nil, nil
}

// NewFair returns an empty queue.
func NewFair() *Fair { return &Fair{jobs: map[string]*fairJob{}} }

// n is the number of windows of j waiting.
func (j *fairJob) n() int { return len(j.queue) - j.head }

// room is how many of j's waiting windows may take a slot now.
func (j *fairJob) room() int {
	n := j.n()
	if j.limit > 0 {
		n = min(n, max(j.limit-j.held, 0))
	}
	return n
}

// unlist takes j out of its level and its windows out of startable, before
// a change to j; relist puts them back after it.
func (f *Fair) unlist(j *fairJob) {
	f.startable -= j.room()
	if j.level >= 0 {
		f.levels[j.level].remove(j)
		j.level = -1
	}
}

func (f *Fair) relist(j *fairJob) {
	r := j.room()
	f.startable += r
	if r > 0 {
		for len(f.levels) <= j.held {
			f.levels = append(f.levels, fairList{})
		}
		f.levels[j.held].pushBack(j)
		j.level = j.held
		f.lowest = min(f.lowest, j.held)
		return
	}
	if j.held == 0 && j.n() == 0 {
		delete(f.jobs, j.key)
		clear(j.queue)
		*j = fairJob{queue: j.queue[:0]}
		f.free = append(f.free, j)
	}
}

func (f *Fair) job(key string) *fairJob {
	j := f.jobs[key]
	if j == nil {
		if n := len(f.free); n > 0 {
			j = f.free[n-1]
			f.free = f.free[:n-1]
		} else {
			j = &fairJob{}
		}
		j.key, j.level = key, -1
		f.jobs[key] = j
	}
	return j
}

// Push queues it for a slot behind the waiting windows of its job; limit
// is its job's limit (the window's max_concurrent, 0 for none). The last
// window pushed sets the job's limit.
func (f *Fair) Push(it *Item, limit int) {
	j := f.job(it.Key)
	f.unlist(j)
	if j.head > 0 && j.head == len(j.queue) {
		clear(j.queue)
		j.queue, j.head = j.queue[:0], 0
	}
	j.queue = append(j.queue, it)
	j.limit = max(limit, 0)
	f.waiting++
	f.relist(j)
}

// Pop returns the window that gets the next slot, which its job now
// holds until Release; nil if no window may take a slot now.
func (f *Fair) Pop() *Item {
	for ; f.lowest < len(f.levels); f.lowest++ {
		j := f.levels[f.lowest].first
		if j == nil {
			continue
		}
		f.unlist(j)
		it := j.queue[j.head]
		j.queue[j.head] = nil
		j.head++
		j.held++
		f.waiting--
		f.relist(j)
		return it
	}
	return nil
}

// Release gives back a slot that a window of job key held.
func (f *Fair) Release(key string) {
	j := f.jobs[key]
	if j == nil || j.held == 0 {
		return
	}
	f.unlist(j)
	j.held--
	f.relist(j)
}

// Remove takes a waiting window out of the queue (a newer window of its
// job replaced it); it reports whether it was waiting.
func (f *Fair) Remove(it *Item) bool {
	j := f.jobs[it.Key]
	if j == nil {
		return false
	}
	for i := j.head; i < len(j.queue); i++ {
		if j.queue[i] == it {
			f.unlist(j)
			copy(j.queue[i:], j.queue[i+1:])
			j.queue[len(j.queue)-1] = nil
			j.queue = j.queue[:len(j.queue)-1]
			f.waiting--
			f.relist(j)
			return true
		}
	}
	return false
}

// Clear takes every waiting window out of the queue and returns them; the
// slots held stay counted until released.
func (f *Fair) Clear() []*Item {
	var out []*Item
	for _, j := range f.jobs {
		if j.n() == 0 {
			continue
		}
		f.unlist(j)
		out = append(out, j.queue[j.head:]...)
		f.waiting -= j.n()
		clear(j.queue)
		j.queue, j.head = j.queue[:0], 0
		f.relist(j)
	}
	return out
}

// Startable returns how many waiting windows may take a slot now: the
// slots the partition should ask for. Windows of a job at its limit are
// not counted.
func (f *Fair) Startable() int { return f.startable }

// Waiting returns how many windows wait for a slot, those of jobs at
// their limit included.
func (f *Fair) Waiting() int { return f.waiting }

// Held returns how many slots the windows of job key hold.
func (f *Fair) Held(key string) int {
	if j := f.jobs[key]; j != nil {
		return j.held
	}
	return 0
}
