package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/pause"
)

// Errors of ResumeCatchup that callers branch on.
var (
	// ErrResumedMeanwhile: the job was paused when the resume began and
	// resumed by someone else before this resume (wraps pause.ErrNotPaused).
	ErrResumedMeanwhile = fmt.Errorf("operator: resumed meanwhile: %w", pause.ErrNotPaused)
)

// CatchupSpec chooses a resume with a catch-up for ResumeCatchup.
type CatchupSpec struct {
	// Job is the job's name.
	Job string
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
	Job            string    `json:"job"`
	PausedSince    time.Time `json:"paused_since"`
	ResumedAt      time.Time `json:"resumed_at,omitzero"`
	SkippedWindows int       `json:"skipped_windows"`
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

// ResumeCatchup resumes spec.Job and, with spec.Catchup, publishes the
// windows that fell due while it was paused (as kjobctl resume --catchup
// does). pause.ErrNotPaused if it is not paused, ErrResumedMeanwhile if it
// was resumed by someone else meanwhile, a *TooManyWindowsError before
// anything changes, a *CatchupError if it was resumed but not caught up.
func (o *Operator) ResumeCatchup(ctx context.Context, spec CatchupSpec) (*ResumeResult, error) {
	if err := need("resume", part("Pauses", o.cfg.Pauses == nil),
		part("Store", spec.Catchup && o.cfg.Store == nil), part("Published", spec.Catchup && o.cfg.Published == nil),
		part("Publisher", spec.Catchup && spec.Execute && o.cfg.Publisher == nil)); err != nil {
		return nil, err
	}
	j, err := o.Job(ctx, spec.Job)
	if err != nil {
		return nil, err
	}
	maxWindows := spec.MaxWindows
	if maxWindows <= 0 {
		maxWindows = MaxBackfill
	}
	now := o.cfg.Now().UTC()
	p, paused, err := o.cfg.Pauses.Get(ctx, j.Name)
	if err != nil {
		return nil, err
	}
	if !paused {
		return nil, fmt.Errorf("job %s: %w", j.Name, pause.ErrNotPaused)
	}
	// The windows the producer skipped: starts in [since, now].
	skipped := func(until time.Time) []time.Time {
		return j.Windows(p.Since.Add(-time.Nanosecond), until, maxWindows+1)
	}
	if spec.Catchup {
		if n := len(skipped(now)); n > maxWindows {
			return nil, &TooManyWindowsError{Job: j.Name, Since: p.Since, Max: maxWindows, Windows: n}
		}
	}
	publish := func(starts []time.Time, execute bool) (*BackfillResult, error) {
		br := &BackfillResult{Job: j.Name, From: fmtTime(p.Since), To: fmtTime(now)}
		w := Windows{Job: j, Starts: starts, Trigger: jobmsg.TriggerCatchup, Execute: execute, Hold: spec.Hold, NewProgress: spec.NewProgress}
		if w.Hold <= 0 {
			w.Hold = 2 * time.Minute
		}
		err := PublishWindows(ctx, PublishConfig{Client: o.cfg.Publisher, Store: o.cfg.Store, Published: o.cfg.Published, Topic: o.cfg.Topic,
			Namespace: o.cfg.Namespace, Now: o.cfg.Now}, w, br)
		return br, err
	}
	res := &ResumeResult{Job: j.Name, PausedSince: p.Since, CaughtUp: []string{}, Executed: !spec.Catchup || spec.Execute}
	if spec.Catchup && !spec.Execute {
		starts := skipped(now)
		res.SkippedWindows = len(starts)
		br, err := publish(starts, false)
		if err != nil {
			return nil, err
		}
		res.Catchup, res.CaughtUp = br, br.Published
		return res, nil
	}
	if _, err := o.cfg.Pauses.ResumeAt(ctx, j.Name, now); err != nil {
		if errors.Is(err, pause.ErrNotPaused) {
			return nil, fmt.Errorf("job %s: %w", j.Name, ErrResumedMeanwhile)
		}
		return nil, err
	}
	res.ResumedAt = now
	starts := skipped(now)
	res.SkippedWindows = len(starts)
	if spec.Catchup && len(starts) > 0 {
		br, err := publish(starts, true)
		if err != nil {
			return res, &CatchupError{Job: j.Name, From: p.Since, To: now.Add(time.Nanosecond), Err: err}
		}
		res.Catchup, res.CaughtUp = br, br.Published
	}
	return res, nil
}
