package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
)

// Schedules reads the schedules topic and asks the producer leader for
// changes under the caller's authenticated actor; *specs.Client
// implements it. Pauses are spec changes: versioned, in the change log.
type Schedules interface {
	Get(ctx context.Context, job string) (*specs.Record, error)
	Submit(ctx context.Context, edits []specs.Edit, note string) (*specs.Result, error)
}

// ErrNotPaused is returned (wrapped) by ResumeCatchup for a job that is
// not paused.
var ErrNotPaused = errors.New("operator: job is not paused")

// Paused returns job's pause from the schedules topic, nil if it is not
// paused or not in the topic (a job of a schedules file no leader has
// imported yet is not paused).
func (o *Operator) Paused(ctx context.Context, job string) (*specs.Pause, error) {
	if err := need("paused", part("Schedules", o.cfg.Schedules == nil)); err != nil {
		return nil, err
	}
	r, err := o.cfg.Schedules.Get(ctx, job)
	if errors.Is(err, specs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.Paused, nil
}

// CatchupSpec chooses a resume with a catch-up for ResumeCatchup.
type CatchupSpec struct {
	// Job is the job's name.
	Job string
	// Note is the resume's note, recorded in the change log.
	Note string
	// Catchup publishes the windows that fell due while the job was
	// paused, under their scheduled ids with trigger=catchup.
	Catchup bool
	// Execute resumes and publishes; without it (with Catchup) nothing
	// changes and the result is the plan. A resume without Catchup always
	// executes.
	Execute bool
	// MaxWindows refuses a catch-up of more windows (default MaxBackfill).
	MaxWindows int
	// Hold and NewProgress are Windows'.
	Hold        time.Duration
	NewProgress func(total int) Progress
}

// ResumeResult is what a resume did, or in a dry run would do. kjobctl
// prints it as its JSON output.
type ResumeResult struct {
	Job         string    `json:"job"`
	PausedSince time.Time `json:"paused_since"`
	PausedBy    string    `json:"paused_by"`
	PauseNote   string    `json:"pause_note,omitempty"`
	// ResumedAt is the resume's instant F (its EffectiveFrom): the
	// producer publishes the windows after it.
	ResumedAt time.Time `json:"resumed_at,omitzero"`
	// VersionBefore is the paused version, VersionAfter the resume's (0
	// in a dry run).
	VersionBefore int64 `json:"version_before"`
	VersionAfter  int64 `json:"version_after,omitempty"`
	// SkippedWindows counts the windows that fell due while paused (at
	// most MaxWindows + 1).
	SkippedWindows int `json:"skipped_windows"`
	// CaughtUp lists the windows published (or, in a dry run, to publish)
	// by the catch-up.
	CaughtUp []string        `json:"caught_up"`
	Catchup  *BackfillResult `json:"catchup,omitempty"`
	Executed bool            `json:"executed"`
}

// TooManyWindowsError: a catch-up would publish more than MaxWindows
// windows; nothing was changed. It wraps ErrTooManyWindows.
type TooManyWindowsError struct {
	Job   string
	Since time.Time
	// Max is the limit, Windows how many fell due (at least Max+1).
	Max, Windows int
}

func (e *TooManyWindowsError) Error() string {
	return fmt.Sprintf("%s has more than %d windows skipped since %s; nothing was changed", e.Job, e.Max, e.Since.UTC().Format(time.RFC3339))
}

// Unwrap is ErrTooManyWindows.
func (e *TooManyWindowsError) Unwrap() error { return ErrTooManyWindows }

// CatchupError: the job was resumed, but its catch-up failed. Publish the
// rest with a backfill with Catchup of [From, To).
type CatchupError struct {
	Job      string
	From, To time.Time
	Err      error
}

func (e *CatchupError) Error() string {
	return fmt.Sprintf("resumed %s, but the catch-up failed: %v", e.Job, e.Err)
}

// Unwrap is the catch-up's error.
func (e *CatchupError) Unwrap() error { return e.Err }

// ResumeCatchup resumes spec.Job through the producer leader (a resume
// edit expecting the paused version it read, so a change made meanwhile
// is a conflict, specs.ErrConflict, and nothing is resumed twice) and,
// with spec.Catchup, publishes the windows that fell due while it was
// paused: those that start in (the pause's At, the resume's instant F].
// The producer publishes from the first window after F, so the two never
// overlap and none is lost. Without spec.Execute (and with Catchup) it
// changes nothing and returns the plan, counted up to now.
//
// The catch-up is published here, by the caller, and not by the leader in
// the resume's transaction: a catch-up may hold MaxBackfill (100,000)
// windows, which would stretch one transaction past its timeout and hold
// up every other job's windows. Each window has its scheduled id, so a
// catch-up that stops partway (a *CatchupError, naming [From, To)) is
// finished by a backfill with Catchup of that range: the windows run or
// published already are left out.
//
// Errors: ErrNotPaused, an error wrapping specs.ErrNotFound for an
// unknown job, a *TooManyWindowsError before anything changes, a
// *specs.RefusedError from the leader, specs.ErrNoLeader, a *CatchupError
// once resumed.
func (o *Operator) ResumeCatchup(ctx context.Context, spec CatchupSpec) (*ResumeResult, error) {
	if err := need("resume", part("Schedules", o.cfg.Schedules == nil),
		part("Store", spec.Catchup && o.cfg.Store == nil), part("Published", spec.Catchup && o.cfg.Published == nil),
		part("Publisher", spec.Catchup && spec.Execute && o.cfg.Publisher == nil)); err != nil {
		return nil, err
	}
	maxWindows := spec.MaxWindows
	if maxWindows <= 0 {
		maxWindows = MaxBackfill
	}
	rec, err := o.cfg.Schedules.Get(ctx, spec.Job)
	if err != nil {
		return nil, err
	}
	if rec.Paused == nil {
		return nil, fmt.Errorf("job %s (version %d): %w", spec.Job, rec.Version, ErrNotPaused)
	}
	j, err := rec.Spec.Job(fmt.Sprintf("schedules topic: %s v%d", spec.Job, rec.Version))
	if err != nil {
		return nil, fmt.Errorf("job %s version %d does not validate: %w", spec.Job, rec.Version, err)
	}
	since := rec.Paused.At
	// The windows the producer did not publish: starts in (since, until].
	skipped := func(until time.Time) []time.Time { return j.Windows(since, until, maxWindows+1) }
	now := o.cfg.Now().UTC()
	if spec.Catchup {
		if n := len(skipped(now)); n > maxWindows {
			return nil, &TooManyWindowsError{Job: j.Name, Since: since, Max: maxWindows, Windows: n}
		}
	}
	publish := func(starts []time.Time, until time.Time, execute bool) (*BackfillResult, error) {
		br := &BackfillResult{Job: j.Name, From: fmtTime(since), To: fmtTime(until)}
		w := Windows{Job: j, Starts: starts, Trigger: jobmsg.TriggerCatchup, Execute: execute, Hold: spec.Hold, NewProgress: spec.NewProgress,
			Version: rec.Version}
		if w.Hold <= 0 {
			w.Hold = 2 * time.Minute
		}
		err := PublishWindows(ctx, PublishConfig{Client: o.cfg.Publisher, Store: o.cfg.Store, Published: o.cfg.Published, Topic: o.cfg.Topic,
			Namespace: o.cfg.Namespace, Now: o.cfg.Now}, w, br)
		return br, err
	}
	res := &ResumeResult{Job: j.Name, PausedSince: since, PausedBy: rec.Paused.By, PauseNote: rec.Paused.Note, VersionBefore: rec.Version,
		CaughtUp: []string{}, Executed: !spec.Catchup || spec.Execute}
	if !res.Executed {
		starts := skipped(now)
		res.SkippedWindows = len(starts)
		br, err := publish(starts, now, false)
		if err != nil {
			return nil, err
		}
		res.Catchup, res.CaughtUp = br, br.Published
		return res, nil
	}
	v := rec.Version
	out, err := o.cfg.Schedules.Submit(ctx, []specs.Edit{{Op: specs.OpResume, Job: j.Name, Note: spec.Note, ExpectVersion: &v}}, spec.Note)
	if err != nil {
		return nil, err
	}
	res.ResumedAt = out.At.UTC()
	if len(out.Applied) > 0 {
		res.VersionAfter = out.Applied[0].VersionAfter
	}
	starts := skipped(res.ResumedAt)
	res.SkippedWindows = len(starts)
	if !spec.Catchup || len(starts) == 0 {
		return res, nil
	}
	from, to := since.Add(time.Nanosecond), res.ResumedAt.Add(time.Nanosecond) // (since, F] as a backfill's [from, to)
	if len(starts) > maxWindows {                                              // more fell due between the plan and the resume
		return res, &CatchupError{Job: j.Name, From: from, To: to, Err: &TooManyWindowsError{Job: j.Name, Since: since, Max: maxWindows, Windows: len(starts)}}
	}
	br, err := publish(starts, res.ResumedAt, true)
	if err != nil {
		return res, &CatchupError{Job: j.Name, From: from, To: to, Err: err}
	}
	res.Catchup, res.CaughtUp = br, br.Published
	return res, nil
}
