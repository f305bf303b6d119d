package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// skipPaused marks the windows of paused jobs to be skipped.
func (p *Producer) skipPaused(ctx context.Context, ws []window) {
	if p.cfg.Pauses == nil || len(ws) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	paused, err := p.cfg.Pauses.Paused(pctx)
	cancel()
	p.mu.Lock()
	if err != nil {
		p.log.Warn("cannot read paused jobs; using the last known set", "err", err, "paused", len(p.paused))
		paused = p.paused
	} else {
		p.paused = paused
	}
	p.mu.Unlock()
	for i := range ws {
		ws[i].skip = paused[ws[i].job.Name]
	}
}

// StateRecord is the value of a state-topic record: the last window the
// leader published (or skipped while the job was paused) for one job. The
// state topic is compacted by job name.
//
// A record with an empty LastID is a baseline: no window of the job has
// been published yet, and LastWindow is when a leader first saw the job
// (its windows after that instant are to be published).
type StateRecord struct {
	// Job is the job name (also the record key).
	Job string
	// LastWindow is the start of the job's last window, or for a
	// baseline the instant the job was first seen.
	LastWindow time.Time
	// LastID is that window's id; empty for a baseline.
	LastID string
	// PublishedAt is when the leader wrote the record.
	PublishedAt time.Time
}

// ParseState decodes a state-topic record value, for tools that show what
// the producer last did (kjobctl status, pkg/inspect).
func ParseState(value []byte) (StateRecord, error) {
	var v stateValue
	if err := json.Unmarshal(value, &v); err != nil {
		return StateRecord{}, fmt.Errorf("producer: state record: %w", err)
	}
	if v.Job == "" {
		return StateRecord{}, errors.New("producer: state record: no job name")
	}
	return StateRecord{Job: v.Job, LastWindow: v.LastWindow, LastID: v.LastID, PublishedAt: v.PublishedAt}, nil
}
