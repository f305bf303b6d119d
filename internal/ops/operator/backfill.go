package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/schedule"
)

// Backfill and catch-up: publishing a job's past windows while everything
// runs. (Moved from cmd/kjobctl/publish.go with its behaviour unchanged;
// kjobctl backfill, kjobctl resume --catchup and Operator.Backfill all
// publish through PublishWindows.)

// MaxBackfill bounds the windows of one backfill (and, by default, of one
// catch-up).
const MaxBackfill = 100_000

// ErrPublish wraps a failure after some windows were published: running
// the same backfill again publishes exactly the missing ones.
var ErrPublish = errors.New("publishing stopped")

// ErrInvalidBackfill: a backfill's range is empty, or reaches into the
// future without BackfillSpec.AllowFuture.
var ErrInvalidBackfill = errors.New("invalid backfill")

// ErrTooManyWindows: a backfill's range holds more than MaxBackfill windows.
var ErrTooManyWindows = errors.New("operator: too many windows")

// BackfillResult is what a backfill or catch-up published, or in a dry run
// would publish. kjobctl prints it as its JSON output.
type BackfillResult struct {
	Job     string `json:"job"`
	From    string `json:"from"`
	To      string `json:"to"`
	Trigger string `json:"trigger"`
	Windows int    `json:"windows"`
	// Published lists the windows published (or, in a dry run, to publish).
	Published []string `json:"published"`
	// Skipped lists the windows left out because the workers have a
	// record of them (run, running, failed or dead-lettered).
	Skipped []string `json:"skipped"`
	// PublishedBefore lists the windows left out because an operator's
	// tool published them before and the workers have not run them yet.
	PublishedBefore []string `json:"published_before"`
	Executed        bool     `json:"executed"`
}

// Progress follows the records a backfill produces (kjobctl draws a bar).
type Progress interface {
	// Set says n records are answered by Kafka.
	Set(n int)
	// Finish is called once every record is answered.
	Finish()
}

// Windows is a set of windows of one job for PublishWindows.
type Windows struct {
	// Job is the job, Starts its windows' starts.
	Job    *schedule.Job
	Starts []time.Time
	// Trigger is jobmsg.TriggerBackfill ("#backfill" ids) or
	// jobmsg.TriggerCatchup (the scheduled ids).
	Trigger jobmsg.Trigger
	// Rerun publishes windows that ran or were published before, after
	// clearing their records (the job's token counter is kept).
	Rerun bool
	// Execute publishes; false: a dry run that only fills in the result.
	Execute bool
	// Hold is how long a reserved published marker lives before it is
	// confirmed (set it to the caller's deadline and a minute).
	Hold time.Duration
	// NewProgress, if set, is called with the number of records to
	// produce before producing; it may return nil.
	NewProgress func(total int) Progress
	// Version is the schedule version the windows carry (0: unknown): for
	// a resume's catch-up, the paused version, in force when they fell due.
	Version int64
}

// ID is the window id of start: jobmsg.BackfillID for a backfill, the
// scheduled id (jobmsg.WindowID) for a catch-up.
func (w Windows) ID(start time.Time) string {
	if w.Trigger == jobmsg.TriggerBackfill {
		return jobmsg.BackfillID(w.Job.Name, start)
	}
	return jobmsg.WindowID(w.Job.Name, start)
}

// PublishConfig is what PublishWindows publishes with.
type PublishConfig struct {
	// Client produces the records, partitioned by key as the producer
	// does and signing when the workers require signatures. Needed only
	// to execute.
	Client *kgo.Client
	// Store is the workers' idempotency store, Published the markers of
	// published windows.
	Store     WindowStore
	Published *Published
	// Topic is the windows topic, Namespace the deployment's.
	Topic, Namespace string
	// Now is the clock (PublishedAt of the records). Default time.Now.
	Now func() time.Time
}

// PublishWindows publishes the windows of w that were neither run nor
// published before (all of them with w.Rerun), asynchronously, and fills
// in res. Without w.Execute it only fills in res.
//
// Windows the workers have a record of (dedupe) are left out; so are
// windows whose published marker (Published) is set. Markers are reserved
// before producing and confirmed once Kafka acknowledged the record; a
// window whose produce failed has its marker released, so running the
// same backfill again publishes exactly the missing windows.
func PublishWindows(ctx context.Context, c PublishConfig, w Windows, res *BackfillResult) error {
	res.Trigger, res.Windows, res.Executed = string(w.Trigger), len(w.Starts), w.Execute
	res.Published, res.Skipped, res.PublishedBefore = []string{}, []string{}, []string{}
	if c.Now == nil {
		c.Now = time.Now
	}
	if w.Execute && c.Client == nil {
		return errors.New("operator: publish windows: no Kafka client to publish with")
	}
	ids := make([]string, len(w.Starts))
	for i, s := range w.Starts {
		ids[i] = w.ID(s)
	}
	pub := c.Published
	todo := make([]int, 0, len(ids)) // indexes into ids
	if w.Rerun {
		for i := range ids {
			todo = append(todo, i)
		}
	} else {
		states, err := c.Store.States(ctx, ids)
		if err != nil {
			return err
		}
		var fresh []int
		var freshIDs []string
		for i, id := range ids {
			if _, ok := states[id]; ok {
				res.Skipped = append(res.Skipped, id)
				continue
			}
			fresh = append(fresh, i)
			freshIDs = append(freshIDs, id)
		}
		var free []bool
		if w.Execute {
			// Held for the caller's deadline and a minute: a tool that
			// dies before confirming leaves markers that expire soon.
			free, err = pub.Reserve(ctx, freshIDs, w.Hold)
		} else {
			var marked []bool
			marked, err = pub.Marked(ctx, freshIDs)
			free = make([]bool, len(marked))
			for i, m := range marked {
				free[i] = !m
			}
		}
		if err != nil {
			return err
		}
		for k, i := range fresh {
			if free[k] {
				todo = append(todo, i)
			} else {
				res.PublishedBefore = append(res.PublishedBefore, ids[i])
			}
		}
	}
	// Reserved markers of windows that are not produced (an error before
	// producing) are released at once rather than left to expire.
	produced := false
	if w.Execute && !w.Rerun {
		defer func() {
			if produced {
				return
			}
			reserved := make([]string, len(todo))
			for k, i := range todo {
				reserved[k] = ids[i]
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = pub.Release(rctx, reserved)
		}()
	}
	if !w.Execute {
		for _, i := range todo {
			res.Published = append(res.Published, ids[i])
		}
		return nil
	}
	if w.Rerun {
		// A fresh start: the windows' records are cleared (the job's
		// token counter is kept, so fencing still holds).
		if err := c.Store.ForgetAll(ctx, ids); err != nil {
			return err
		}
	}
	var bar Progress
	if w.NewProgress != nil {
		bar = w.NewProgress(len(todo))
	}
	now := c.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		failed   []string
		done     atomic.Int64
	)
	ok := make([]bool, len(todo))
	produced = true // from here on the callbacks account for every window
	for k, i := range todo {
		id := ids[i]
		_, rec, err := window.Record(w.Job, c.Topic, window.Publication{Start: w.Starts[i], Trigger: w.Trigger, ID: id, PublishedAt: now, Namespace: c.Namespace,
			ScheduleVersion: w.Version})
		if err != nil {
			return err
		}
		wg.Add(1)
		c.Client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err != nil {
				failed = append(failed, id)
			} else {
				ok[k] = true
			}
			mu.Unlock()
			if n := done.Add(1); bar != nil {
				bar.Set(int(n))
			}
		})
	}
	wg.Wait()
	if bar != nil {
		bar.Finish()
	}
	var published []string
	for k, i := range todo {
		if ok[k] {
			published = append(published, ids[i])
		}
	}
	res.Published = append(res.Published, published...)
	// Markers outlive a failure: use a fresh context for them.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var merr error
	if w.Rerun {
		merr = pub.Mark(mctx, published)
	} else {
		merr = pub.Confirm(mctx, published)
	}
	if err := pub.Release(mctx, failed); err != nil && merr == nil {
		merr = err
	}
	if firstErr != nil {
		return fmt.Errorf("%w: published %d of %d windows, then: %w (run the same command again: the published windows are left out)", ErrPublish, len(published), len(todo), firstErr)
	}
	if merr != nil {
		return fmt.Errorf("published %d windows, but could not record them: %w (a second run may publish them again; dedupe still runs each once)", len(published), merr)
	}
	return nil
}

// BackfillWindows are the starts of j's windows in [from, to);
// ErrTooManyWindows if there are more than MaxBackfill.
func BackfillWindows(j *schedule.Job, from, to time.Time) ([]time.Time, error) {
	starts := j.Windows(from.Add(-time.Nanosecond), to.Add(-time.Nanosecond), MaxBackfill+1)
	if len(starts) > MaxBackfill {
		return nil, fmt.Errorf("%w: %s has more than %d windows in [%s, %s); backfill a shorter range", ErrTooManyWindows, j.Name, MaxBackfill,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	return starts, nil
}

// BackfillSpec chooses a backfill for Operator.PlanBackfill and Backfill.
type BackfillSpec struct {
	// Job is the job's name.
	Job string
	// From and To bound the windows' starts: [From, To).
	From, To time.Time
	// Rerun publishes windows that ran or were published before again.
	Rerun bool
	// Catchup publishes under the scheduled ids with trigger=catchup.
	Catchup bool
	// AllowFuture allows a To after now (those windows then run now and
	// again when they fall due).
	AllowFuture bool
	// Hold is how long a reserved published marker lives before it is
	// confirmed (default 2 minutes).
	Hold time.Duration
	// NewProgress, if set, follows the records produced (Windows.NewProgress).
	NewProgress func(total int) Progress
}

// PlanBackfill plans a backfill: what Backfill would publish. Nothing
// changes.
func (o *Operator) PlanBackfill(ctx context.Context, spec BackfillSpec) (*BackfillResult, error) {
	return o.backfill(ctx, spec, false)
}

// Backfill publishes the windows of spec.Job whose start lies in
// [spec.From, spec.To) with trigger=backfill (or catchup), leaving out
// those run or published before unless spec.Rerun, as kjobctl backfill
// --execute does. An error wrapping ErrPublish says some were published.
func (o *Operator) Backfill(ctx context.Context, spec BackfillSpec) (*BackfillResult, error) {
	return o.backfill(ctx, spec, true)
}

func (o *Operator) backfill(ctx context.Context, spec BackfillSpec, execute bool) (*BackfillResult, error) {
	if err := need("backfill", part("Store", o.cfg.Store == nil), part("Published", o.cfg.Published == nil), part("Publisher", execute && o.cfg.Publisher == nil)); err != nil {
		return nil, err
	}
	j, err := o.Job(ctx, spec.Job)
	if err != nil {
		return nil, err
	}
	if !spec.To.After(spec.From) {
		return nil, fmt.Errorf("%w: %s: to %s is not after from %s", ErrInvalidBackfill, j.Name, spec.To.UTC().Format(time.RFC3339), spec.From.UTC().Format(time.RFC3339))
	}
	if now := o.cfg.Now(); spec.To.After(now) && !spec.AllowFuture {
		return nil, fmt.Errorf("%w: %s: to %s is in the future (now %s): windows that have not fallen due would run now and again at their scheduled time",
			ErrInvalidBackfill,
			j.Name, spec.To.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	starts, err := BackfillWindows(j, spec.From, spec.To)
	if err != nil {
		return nil, err
	}
	trigger := jobmsg.TriggerBackfill
	if spec.Catchup {
		trigger = jobmsg.TriggerCatchup
	}
	hold := spec.Hold
	if hold <= 0 {
		hold = 2 * time.Minute
	}
	res := &BackfillResult{Job: j.Name, From: fmtTime(spec.From), To: fmtTime(spec.To)}
	err = PublishWindows(ctx, PublishConfig{Client: o.cfg.Publisher, Store: o.cfg.Store, Published: o.cfg.Published, Topic: o.cfg.Topic,
		Namespace: o.cfg.Namespace, Now: o.cfg.Now}, Windows{Job: j, Starts: starts, Trigger: trigger, Rerun: spec.Rerun, Execute: execute, Hold: hold, NewProgress: spec.NewProgress}, res)
	return res, err
}
