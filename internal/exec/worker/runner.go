package worker

import (
	"context"
	"sync"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
)

// stealAfter is how long a handler may run on a shared runner before the
// windows queued behind it on that runner move to goroutines of their
// own: the most a window started together with another job's window
// waits for it.
const stealAfter = time.Millisecond

// quickHandler is how long a handler's last attempt may have run for its
// next windows to share runners: a handler that took longer (I/O, sleeps)
// gets a goroutine per window at once, so windows started with it never
// wait stealAfter behind it.
const quickHandler = 100 * time.Microsecond

// launch is an attempt whose handler is ready to run.
type launch struct {
	a   *attempt
	ctx context.Context
	job *handler.Job
}

// run runs the handler of one attempt and hands its result, and how long
// the handler ran, to the loop.
func (b launch) run() {
	l := b.a.l
	w := l.w
	t := time.Now()
	err := w.h.HandleJob(b.ctx, b.job)
	took := time.Since(t)
	finished := t.Add(took)
	if !w.realClock {
		finished = w.cfg.Now()
	}
	w.running.Add(-1)
	l.inbox.post(handlerReturned{a: b.a, err: err, finished: finished, took: took})
}

// dispatch runs the handlers of the attempts started in this turn of the
// loop. An attempt whose handler's last attempt took quickHandler or more
// gets a goroutine of its own, as does an attempt started alone. Several
// of quick handlers (the windows a settle call's answer lets start at
// once, in a backlog) share one runner goroutine that runs them one after
// the other, which costs far less than a goroutine each when handlers
// return at once; if one of them runs for stealAfter, the ones queued
// behind it get a goroutine each, so a handler that is slow for once
// holds up no other job's window for longer than that.
func (l *loop) dispatch() {
	batch := l.launch[:0]
	for _, b := range l.launch {
		if l.slow[b.job.HandlerName()] {
			go b.run()
			continue
		}
		batch = append(batch, b)
	}
	l.launch = nil
	switch len(batch) {
	case 0:
		return
	case 1:
		go batch[0].run()
		return
	}
	r := &runner{queue: batch, since: time.Now()}
	r.mu.Lock()
	r.timer = time.AfterFunc(stealAfter, r.check)
	r.mu.Unlock()
	go r.run()
}

// runner runs a queue of launches one after the other (dispatch).
type runner struct {
	mu    sync.Mutex
	queue []launch    // not started yet
	since time.Time   // when the handler running now started
	timer *time.Timer // checks that it is not running for stealAfter
	done  bool        // the queue ran out: the runner has exited or is exiting
}

func (r *runner) run() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.done = true
			r.timer.Stop()
			r.mu.Unlock()
			return
		}
		b := r.queue[0]
		r.queue[0] = launch{}
		r.queue = r.queue[1:]
		r.since = time.Now()
		r.mu.Unlock()
		b.run()
	}
}

// check runs on the runner's timer: if the handler running now has run
// for stealAfter, the launches queued behind it get a goroutine each;
// otherwise it looks again stealAfter after that handler started.
func (r *runner) check() {
	r.mu.Lock()
	if r.done || len(r.queue) == 0 {
		r.mu.Unlock()
		return
	}
	if ran := time.Since(r.since); ran < stealAfter {
		r.timer.Reset(stealAfter - ran)
		r.mu.Unlock()
		return
	}
	rest := r.queue
	r.queue = nil
	r.mu.Unlock()
	for _, b := range rest {
		go b.run()
	}
}
