package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/redis/go-redis/v9"
)

// Published remembers which windows an operator's tool published (kjobctl
// backfill and resume --catchup), one Redis key per window id
// ("kjob:{<namespace>}:published:<id>"), so a second run publishes nothing
// new even before the workers ran the first run's windows. The workers'
// done markers (internal/store/dedupe) say which windows ran; these markers say which
// were published. Both expire after the same retention.
//
// A marker is set in two steps: Reserve (SET NX with a short hold) before
// the record is produced, Confirm (SET with the retention) once it is
// acknowledged, so a tool that dies in between leaves markers that expire
// after the hold instead of hiding unpublished windows for days.
type Published struct {
	rdb       redis.UniversalClient
	prefix    string
	retention time.Duration
}

// pipelineChunk bounds the commands sent in one pipeline.
const pipelineChunk = 1000

// Marker values.
const (
	markPending   = "pending"
	markPublished = "published"
)

// NewPublished returns the published-window markers of namespace, kept
// for retention (use the workers' dedupe retention, dedupe.DefaultRetention
// by default).
func NewPublished(rdb redis.UniversalClient, namespace string, retention time.Duration) (*Published, error) {
	switch {
	case rdb == nil:
		return nil, &configerr.Error{Op: "operator: NewPublished", Field: "Redis client", Reason: "is nil"}
	case namespace == "":
		return nil, &configerr.Error{Op: "operator: NewPublished", Field: "namespace", Reason: `is empty; use the deployment's namespace, e.g. "kjob"`}
	case retention <= 0:
		return nil, &configerr.Error{Op: "operator: NewPublished", Field: "retention", Value: retention, Reason: ": want the workers' dedupe retention (e.g. 168h)"}
	}
	return &Published{rdb: rdb, prefix: names.Deployment{Namespace: namespace}.PublishedPrefix(), retention: retention}, nil
}

// Reserve marks ids as being published, in pipelines, with SET NX and a TTL
// of hold: reserved[i] is true if ids[i] had no marker and is now this
// caller's to publish, false if it was published (or is being published)
// before. Confirm the ids once published, Release those that failed.
func (p *Published) Reserve(ctx context.Context, ids []string, hold time.Duration) (reserved []bool, err error) {
	if hold <= 0 {
		return nil, fmt.Errorf("operator: Reserve: hold %v: want a positive duration", hold)
	}
	reserved = make([]bool, 0, len(ids))
	err = p.chunks(ctx, ids, func(pipe redis.Pipeliner, chunk []string) func() error {
		cmds := make([]*redis.BoolCmd, len(chunk))
		for i, id := range chunk {
			cmds[i] = pipe.SetNX(ctx, p.prefix+id, markPending, hold)
		}
		return func() error {
			for _, c := range cmds {
				ok, err := c.Result()
				if err != nil {
					return err
				}
				reserved = append(reserved, ok)
			}
			return nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("operator: reserve published markers: %w", err)
	}
	return reserved, nil
}

// Confirm marks ids published for the retention.
func (p *Published) Confirm(ctx context.Context, ids []string) error {
	return p.set(ctx, "confirm", ids)
}

// Mark marks ids published for the retention, whether or not they had a
// marker (for a deliberate re-publish such as backfill --rerun).
func (p *Published) Mark(ctx context.Context, ids []string) error {
	return p.set(ctx, "mark", ids)
}

func (p *Published) set(ctx context.Context, op string, ids []string) error {
	err := p.chunks(ctx, ids, func(pipe redis.Pipeliner, chunk []string) func() error {
		for _, id := range chunk {
			pipe.Set(ctx, p.prefix+id, markPublished, p.retention)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("operator: %s published markers: %w", op, err)
	}
	return nil
}

// Release deletes the markers of ids (windows whose publish failed).
func (p *Published) Release(ctx context.Context, ids []string) error {
	err := p.chunks(ctx, ids, func(pipe redis.Pipeliner, chunk []string) func() error {
		for _, id := range chunk {
			pipe.Del(ctx, p.prefix+id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("operator: release published markers: %w", err)
	}
	return nil
}

// Marked reports, for each id, whether it has a marker (published, or
// being published).
func (p *Published) Marked(ctx context.Context, ids []string) ([]bool, error) {
	out := make([]bool, 0, len(ids))
	err := p.chunks(ctx, ids, func(pipe redis.Pipeliner, chunk []string) func() error {
		cmds := make([]*redis.IntCmd, len(chunk))
		for i, id := range chunk {
			cmds[i] = pipe.Exists(ctx, p.prefix+id)
		}
		return func() error {
			for _, c := range cmds {
				n, err := c.Result()
				if err != nil {
					return err
				}
				out = append(out, n > 0)
			}
			return nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("operator: read published markers: %w", err)
	}
	return out, nil
}

// chunks sends ids in pipelines of pipelineChunk commands: queue adds the
// commands of one chunk and returns a function that reads their results
// (or nil).
func (p *Published) chunks(ctx context.Context, ids []string, queue func(redis.Pipeliner, []string) func() error) error {
	for len(ids) > 0 {
		n := min(len(ids), pipelineChunk)
		pipe := p.rdb.Pipeline()
		read := queue(pipe, ids[:n])
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if read != nil {
			if err := read(); err != nil {
				return err
			}
		}
		ids = ids[n:]
	}
	return nil
}
