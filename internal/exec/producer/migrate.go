package producer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
)

// LegacyPauses is the Redis pause list of kjob before pauses moved into
// the spec. *pause.Store implements it.
type LegacyPauses interface {
	// List returns every entry, by job.
	List(ctx context.Context) (map[string]pause.Pause, error)
	// Delete removes job's entry (absent: no error).
	Delete(ctx context.Context, job string) error
}

// legacyTimeout bounds each call to the Redis pause list.
const legacyTimeout = 5 * time.Second

// migrationNote is the note of a pause migrated from the Redis pause list.
const migrationNote = "paused before pauses moved into the spec (migrated from the Redis pause list)"

// migrationEdit is the pause edit that migrates lp: the spec pause keeps
// who paused the job and since when (now if the entry does not say).
func migrationEdit(lp pause.Pause, now time.Time) specs.Edit {
	by, since := lp.By, lp.Since.UTC()
	if by == "" {
		by = "unknown (Redis pause list)"
	}
	if since.IsZero() {
		since = now.UTC()
	}
	return specs.Edit{Op: specs.OpPause, Job: lp.Job,
		Note:     fmt.Sprintf("migrated from the Redis pause list: paused by %s since %s", by, since.Format(time.RFC3339)),
		Migrated: &specs.Pause{Note: migrationNote, By: by, At: since}}
}

// migratePauses commits each entry of the Redis pause list whose job is
// in the schedules topic as a spec pause, in transactions of their own
// that publish no window (they run before the term's catch-up, so none of
// the job's windows goes out), then deletes those entries. It returns the
// entries left: jobs the topic does not have (the file import may create
// them paused; dropUnknownPauses handles the rest). An error ends the
// term: the next one lists the entries again, and a job paused already is
// an unchanged edit, so a migration interrupted between its commit and
// the deletes finishes then.
func (p *Producer) migratePauses(ctx context.Context, cl *kgo.Client, snap *specs.Snapshot, live map[string]*liveJob) (map[string]pause.Pause, error) {
	if p.cfg.LegacyPauses == nil {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, legacyTimeout)
	legacy, err := p.cfg.LegacyPauses.List(rctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("read the Redis pause list to move its pauses into the schedules (not leading until it can be read, so that no pause is lifted): %w", err)
	}
	var edits []specs.Edit
	now := p.cfg.Clock.Now()
	for _, job := range slices.Sorted(maps.Keys(legacy)) {
		if live[job] != nil {
			edits = append(edits, migrationEdit(legacy[job], now))
			delete(legacy, job)
		}
	}
	for len(edits) > 0 {
		n := min(len(edits), specs.MaxEdits)
		f := p.cfg.Clock.Now()
		q := &specs.Request{ID: "migration-" + strconv.FormatInt(f.UnixNano(), 36), Namespace: p.cfg.Namespace, Actor: p.actor(),
			Source: specs.Source{Kind: specs.SourceMigration}, Note: "migrated from the Redis pause list", IssuedAt: f, Edits: edits[:n]}
		// Effective PublishLead from now, as every change (apply): an
		// earlier leader's windows published ahead until then stand.
		at := f
		f = f.Add(p.cfg.PublishLead)
		recs, changes, res := p.plan(ctx, q, snap, live, at, f, true)
		if res.Refused != nil {
			return nil, fmt.Errorf("migrate the Redis pause list: the leader refused its own request: %s %s: %s", res.Refused.Kind, res.Refused.Job, res.Refused.Reason)
		}
		rr, err := res.Record(p.cfg.ControlTopic)
		if err != nil {
			return nil, err
		}
		if err := p.publish(ctx, cl, nil, append(recs, rr)); err != nil {
			return nil, fmt.Errorf("migrate the Redis pause list: %w", err)
		}
		p.adopt(q, changes, snap, live, nil, f)
		if err := p.forgetMigrated(ctx, q); err != nil {
			return nil, err
		}
		edits = edits[n:]
	}
	return legacy, nil
}

// forgetMigrated deletes the Redis pause list's entries that q, committed,
// migrated.
func (p *Producer) forgetMigrated(ctx context.Context, q *specs.Request) error {
	for _, e := range q.Edits {
		if e.Migrated == nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, legacyTimeout)
		err := p.cfg.LegacyPauses.Delete(dctx, e.Job)
		cancel()
		if err != nil {
			return fmt.Errorf("migrated the pause of %s into the schedules, but cannot delete it from the Redis pause list (the next term does): %w", e.Job, err)
		}
		p.log.Info("moved a pause from the Redis pause list into the schedules", "job", e.Job, "paused_by", e.Migrated.By,
			"paused_since", e.Migrated.At, "request", q.ID)
	}
	return nil
}

// dropUnknownPauses deletes the entries of the Redis pause list whose job
// is neither in the schedules topic nor to be imported from the file (a
// job deleted, through the API too, or removed from the file): there is
// nothing to pause. An entry of a file job the import did not create (it
// was refused) is kept for the next term.
func (p *Producer) dropUnknownPauses(ctx context.Context, legacy map[string]pause.Pause, snap *specs.Snapshot, live map[string]*liveJob) error {
	imported := map[string]bool{}
	for _, j := range p.cfg.Jobs {
		if _, deleted := snap.Deleted[j.Name]; !deleted {
			imported[j.Name] = true
		}
	}
	for _, job := range slices.Sorted(maps.Keys(legacy)) {
		if live[job] != nil || imported[job] {
			continue
		}
		lp := legacy[job]
		p.log.Warn("the Redis pause list names a job that is neither in the schedules topic nor in the schedules file: dropping its pause",
			"job", job, "paused_by", lp.By, "paused_since", lp.Since)
		dctx, cancel := context.WithTimeout(ctx, legacyTimeout)
		err := p.cfg.LegacyPauses.Delete(dctx, job)
		cancel()
		if err != nil {
			return fmt.Errorf("delete the pause of unknown job %s from the Redis pause list: %w", job, err)
		}
	}
	return nil
}

// adopt makes the leader's view follow req's committed changes: live and
// snap, and the timer heap q (nil before the term built it) gets the next
// window after f of each job that is active now.
func (p *Producer) adopt(req *specs.Request, changes []change, snap *specs.Snapshot, live map[string]*liveJob, q *queue, f time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range changes {
		if c.next == nil {
			delete(live, c.job)
			delete(snap.Jobs, c.job)
			snap.Deleted[c.job] = c.deleted
			p.log.Info("schedule deleted", "job", c.job, "version", c.deleted, "actor", req.Actor, "request", req.ID)
			continue
		}
		live[c.job] = c.next
		delete(snap.Jobs, c.job) // the view holds a valid job in live only (see specView)
		delete(snap.Deleted, c.job)
		if q != nil && c.next.active() {
			q.push(c.next.job, c.next.job.Next(f))
		}
		p.log.Info("schedule changed", "job", c.job, "version", c.next.version, "actor", req.Actor,
			"source", specs.DescribeSource(c.next.origin.source), "request", req.ID, "effective_from", f, "paused", c.next.paused != nil)
	}
}
