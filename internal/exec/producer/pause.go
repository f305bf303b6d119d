package producer

import (
	"context"
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
