package producer

import (
	"container/heap"
	"time"

	"github.com/kjob/kjob/schedule"
)

// queue is a min-heap of each job's next window start: the producer's timer
// is always set for the top, so cost per tick is O(log jobs), not O(jobs).
type queue struct {
	h entries
	// valid reports whether an entry's job is still current (see term);
	// nil: every entry is.
	valid func(*schedule.Job) bool
}

type entry struct {
	job   *schedule.Job
	start time.Time // the window's nominal start: its identity
	at    time.Time // when it is due: start plus the job's jitter offset
}

type entries []entry

func (e entries) Len() int           { return len(e) }
func (e entries) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e entries) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *entries) Push(x any)        { *e = append(*e, x.(entry)) }
func (e *entries) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func newQueue() *queue { return &queue{} }

// push adds the job's next window, starting at start; a zero time (no
// future window) is dropped. The window is due start + j.Offset(start):
// a job with jitter is published up to that much after its start, by an
// offset every replica and replay agrees on (schedule.Job.Offset).
func (q *queue) push(j *schedule.Job, start time.Time) {
	if start.IsZero() {
		return
	}
	heap.Push(&q.h, entry{job: j, start: start, at: start.Add(j.Offset(start))})
}

func (q *queue) peek() (time.Time, bool) {
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}

// pop removes the first due window and returns its job and start.
func (q *queue) pop() (*schedule.Job, time.Time) {
	e := heap.Pop(&q.h).(entry)
	return e.job, e.start
}

func (q *queue) snapshot() map[string]time.Time {
	m := make(map[string]time.Time, len(q.h))
	for _, e := range q.h {
		if q.valid != nil && !q.valid(e.job) {
			continue
		}
		m[e.job.Name] = e.start
	}
	return m
}
