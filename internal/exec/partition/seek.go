package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNotOwned is returned by Seek when this member does not own the
// partition (never did, or it was revoked or lost meanwhile).
var ErrNotOwned = errors.New("partition: not owned by this member")

// seeker queues Seek requests for the poll loop and wakes a waiting poll.
type seeker struct {
	mu      sync.Mutex
	pending []*seekReq
	wake    context.CancelFunc // cancels the current poll's context
	closed  bool
}

type seekReq struct {
	p      *part
	offset int64
	done   chan error
}

// pollContext returns the context of the next poll: ctx, cancelled early
// when a Seek is queued.
func (s *seeker) pollContext(ctx context.Context) context.Context {
	pctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.wake != nil {
		s.wake()
	}
	s.wake = cancel
	if len(s.pending) > 0 {
		cancel()
	}
	s.mu.Unlock()
	return pctx
}

func (s *seeker) add(r *seekReq) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pending = append(s.pending, r)
	if s.wake != nil {
		s.wake()
	}
	return true
}

func (s *seeker) take() []*seekReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.pending
	s.pending = nil
	return rs
}

// close fails the pending and later requests: the poll loop has stopped.
func (s *seeker) close() {
	s.mu.Lock()
	s.closed = true
	rs := s.pending
	s.pending = nil
	if s.wake != nil {
		s.wake()
	}
	s.mu.Unlock()
	for _, r := range rs {
		r.done <- ErrNotOwned
	}
}

// Seek moves partition n to offset while this member owns it and keeps
// consuming: the partition's goroutine takes no new record, its in-flight
// record may finish within Config.Grace (then its context is cancelled and
// it is not marked), the records fetched but not processed are dropped, the
// fetch position and the group's committed offset are set to offset, and a
// new goroutine processes the partition from there. Rewinding re-delivers
// records already settled (the caller's idempotency, internal/store/dedupe, decides
// whether they run again); seeking forward skips records.
//
// The reset itself runs on the poll loop between two polls, where no
// rebalance callback can run and every batch fetched at the old position
// has been handed to the old goroutine, so no record of the old position
// reaches the new goroutine. Seek returns ErrNotOwned (wrapped) if the
// partition is not this member's or stops being so before the reset, and
// the commit's error if the new offset could not be committed (the fetch
// position is moved regardless; the next commit stores the new position).
func (c *Consumer) Seek(ctx context.Context, n int32, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("partition: seek %s[%d] to %d: offset must be >= 0", c.cfg.Topic, n, offset)
	}
	c.mu.Lock()
	p := c.parts[n]
	closing := c.closing
	c.mu.Unlock()
	if p == nil || closing {
		return fmt.Errorf("partition: seek %s[%d]: %w", c.cfg.Topic, n, ErrNotOwned)
	}
	// Stop the goroutine as a revoke does, without committing its marks:
	// the seek's commit replaces them.
	p.halt()
	grace := time.NewTimer(c.cfg.Grace)
	select {
	case <-p.done:
	case <-grace.C:
		c.log.Warn("seek: grace expired; cancelling the in-flight record", "partition", n, "grace", c.cfg.Grace, "reason", "seek")
		p.cancel()
	}
	grace.Stop()
	p.wait()

	r := &seekReq{p: p, offset: offset, done: make(chan error, 1)}
	if !c.seeks.add(r) {
		return fmt.Errorf("partition: seek %s[%d]: consumer stopped: %w", c.cfg.Topic, n, ErrNotOwned)
	}
	// The poll loop answers every queued request (close fails the rest).
	if err := <-r.done; err != nil {
		return fmt.Errorf("partition: seek %s[%d] to %d: %w", c.cfg.Topic, n, offset, err)
	}
	c.log.Info("partition seeked", "partition", n, "offset", offset, "reason", "seek")
	return nil
}

// applySeeks runs on the poll loop, after a poll's records were handed out
// and before AllowRebalance.
func (c *Consumer) applySeeks() {
	for _, r := range c.seeks.take() {
		r.done <- c.applySeek(r)
	}
}

func (c *Consumer) applySeek(r *seekReq) error {
	p, n := r.p, r.p.n
	p.mu.Lock()
	lost := p.lost
	p.mu.Unlock()
	c.mu.Lock()
	owned := !lost && !c.closing && c.parts[n] == p
	c.mu.Unlock()
	p.cancel()
	if !owned {
		// A revoke or loss took the partition while its goroutine
		// stopped; the callback forgot (or forgets) the part.
		return ErrNotOwned
	}
	c.remove([]*part{p})

	to := map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: {n: {Epoch: -1, Offset: r.offset}}}
	// SetOffsets applies only to partitions kgo tracks as consumed; a mark
	// creates the entry for a partition that fetched nothing yet (marks
	// never move an existing entry backwards, so this is harmless).
	c.cl.MarkCommitOffsets(to)
	c.cl.SetOffsets(to)
	cctx, cancel := context.WithTimeout(c.base, commitTimeout)
	var cerr error
	c.cl.CommitOffsetsSync(cctx, to, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, pr := range t.Partitions {
				if e := kerr.ErrorForCode(pr.ErrorCode); e != nil {
					cerr = e
				}
			}
		}
	})
	cancel()

	c.mu.Lock()
	if !c.closing {
		c.startLocked(n)
	}
	c.mu.Unlock()
	if cerr != nil {
		return fmt.Errorf("commit: %w", cerr)
	}
	return nil
}
