package worker

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dedupe"
)

// DefaultStallAfter is Config.StallAfter when it is zero.
const DefaultStallAfter = 30 * time.Second

// stallReportEvery is how often a worker writes its stalls to the store
// (StallReporter); each record lapses 3 reports later unless renewed.
const stallReportEvery = 5 * time.Second

// StallReporter is implemented by a Store (*dedupe.Store does) that keeps
// the workers' stalls where operators' tools read them (kjobctl status,
// the dashboard). A Store without it leaves stalls to /readyz and the
// metric.
type StallReporter interface {
	ReportStalls(ctx context.Context, worker string, stalls []dedupe.Stall) error
}

// stalls tracks what keeps a partition's commit point from moving: a dead
// letter the broker does not take, per partition, and an unreachable
// store, for every owned partition.
type stalls struct {
	mu        sync.Mutex
	letters   map[int32]dedupe.Stall // a dead letter that keeps failing
	storeErr  string                 // why the store is unreachable
	storeDown time.Time              // since when; zero while it answers
}

// letterStarted records that rec's dead letter is being produced: until
// letterDone, the partition's commit point cannot pass rec.
func (s *stalls) letterStarted(rec *kgo.Record, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.letters == nil {
		s.letters = map[int32]dedupe.Stall{}
	}
	s.letters[rec.Partition] = dedupe.Stall{Partition: rec.Partition, Offset: rec.Offset, Since: now,
		Reason: "its dead letter is not acknowledged by the broker (the dead-letter topic does not take it)"}
}

// letterFailing records why rec's dead letter was not written (err).
func (s *stalls) letterFailing(rec *kgo.Record, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.letters[rec.Partition]; ok && st.Offset == rec.Offset {
		st.Reason = "its dead letter cannot be written: " + err.Error()
		s.letters[rec.Partition] = st
	}
}

// letterDone records that partition p's dead letter was written (or its
// partition let go of it).
func (s *stalls) letterDone(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.letters, p)
}

func (s *stalls) store(err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.storeDown, s.storeErr = time.Time{}, ""
		return
	}
	if s.storeDown.IsZero() {
		s.storeDown = now
	}
	s.storeErr = err.Error()
}

// Stalled returns the partitions this worker owns whose commit point has
// not been able to move for at least Config.StallAfter because settling
// their oldest unsettled record keeps failing: its dead letter is refused
// or cannot be produced, or the idempotency store does not answer. A
// handler that runs long is not a stall. /readyz, the
// kjob_partition_stalled_seconds metric and (through the store) kjobctl
// status and the dashboard report them.
func (w *Worker) Stalled() []dedupe.Stall {
	now := time.Now()
	w.stalls.mu.Lock()
	defer w.stalls.mu.Unlock()
	var out []dedupe.Stall
	for _, st := range w.stalls.letters {
		if now.Sub(st.Since) >= w.cfg.StallAfter {
			st.Worker = w.cfg.WorkerID
			out = append(out, st)
		}
	}
	if !w.stalls.storeDown.IsZero() && now.Sub(w.stalls.storeDown) >= w.cfg.StallAfter {
		for _, p := range w.consumer.Assigned() {
			if _, dup := w.stalls.letters[p]; dup {
				continue
			}
			out = append(out, dedupe.Stall{Worker: w.cfg.WorkerID, Partition: p, Offset: -1, Since: w.stalls.storeDown,
				Reason: "the idempotency store (Redis) does not answer: " + w.stalls.storeErr})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// StallError returns an error describing the stalled partitions, or nil:
// what /readyz answers.
func (w *Worker) StallError() error {
	st := w.Stalled()
	if len(st) == 0 {
		return nil
	}
	s := st[0]
	more := ""
	if len(st) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(st)-1)
	}
	return fmt.Errorf("partition %d cannot move since %s (offset %d): %s%s", s.Partition, s.Since.UTC().Format(time.RFC3339), s.Offset, s.Reason, more)
}

// reportStalls writes this worker's stalls to the store every
// stallReportEvery until ctx is done, then clears them.
func (w *Worker) reportStalls(ctx context.Context) {
	r, ok := w.cfg.Store.(StallReporter)
	if !ok {
		return
	}
	t := time.NewTicker(stallReportEvery)
	defer t.Stop()
	reported := false
	for {
		st := w.Stalled()
		if len(st) > 0 || reported {
			until := time.Now().Add(3 * stallReportEvery)
			for i := range st {
				st[i].Until = until
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
			if err := r.ReportStalls(cctx, w.cfg.WorkerID, st); err == nil {
				reported = len(st) > 0
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			if reported {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
				_ = r.ReportStalls(cctx, w.cfg.WorkerID, nil)
				cancel()
			}
			return
		case <-t.C:
		}
	}
}
