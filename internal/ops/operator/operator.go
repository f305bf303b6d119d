package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/schedule"
)

// Errors of Operator that callers branch on.
var (
	// ErrUnknownJob: the job is not in the schedules file.
	ErrUnknownJob = errors.New("operator: unknown job")
	// ErrUnknownLetter: no dead letter has the id.
	ErrUnknownLetter = errors.New("operator: no such dead letter")
	// ErrLeftOut: a redrive left the chosen letter out (its window is done
	// or running, or it was redriven before); RedriveItem.Skip says why.
	ErrLeftOut = errors.New("operator: dead letter left out of the redrive")
)

// Config configures an Operator: the same clients and stores
// kjobctl builds from the deployment's KJOB_* settings.
type Config struct {
	// Jobs are the jobs of the schedules file.
	Jobs []*schedule.Job
	// Topic is the windows topic, DLQTopic the dead-letter topic.
	Topic, DLQTopic string
	// Namespace is the deployment's namespace: it labels the windows the
	// operator publishes. Default names.DefaultNamespace.
	Namespace string
	// Publisher publishes manual windows: it partitions by key as the
	// producer does and signs when the workers require signatures
	// (kjobctl's publisher).
	Publisher *kgo.Client
	// Redriver republishes dead letters: it partitions by key and never
	// signs (kjobctl's redriver).
	Redriver *kgo.Client
	// ReadOpts are the client options that read the dead-letter topic
	// (seed brokers, TLS, SASL).
	ReadOpts []kgo.Opt
	// Store is the idempotency store (window states; a redrive clears one).
	Store interface {
		WindowStore
		Forget(ctx context.Context, id string) error
	}
	// Published are the deployment's published-window markers
	// (NewPublished); optional: Backfill and PlanBackfill need them.
	Published *Published
	// Pauses, Redrives and Replayer are the deployment's.
	Pauses   *pause.Store
	Redrives *Redrives
	Replayer *Replayer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Operator performs the operators' actions (trigger, backfill, pause,
// resume, dead letters and their redrive, replay) for a program such as
// the dashboard, through the same functions kjobctl calls.
type Operator struct{ cfg Config }

// New validates cfg and returns an Operator. A setting it refuses is a
// *configerr.Error.
func New(cfg Config) (*Operator, error) {
	switch {
	case cfg.Topic == "" || cfg.DLQTopic == "":
		return nil, &configerr.Error{Op: "operator", Field: "Config.Topic", Reason: "and DLQTopic are required; set the windows and dead-letter topics", Related: []string{"DLQTopic"}}
	case cfg.Publisher == nil || cfg.Redriver == nil:
		return nil, &configerr.Error{Op: "operator", Field: "Config.Publisher", Reason: "and Redriver are required; pass Kafka clients that partition by key", Related: []string{"Redriver"}}
	case cfg.Store == nil || cfg.Pauses == nil || cfg.Redrives == nil || cfg.Replayer == nil:
		return nil, &configerr.Error{Op: "operator", Field: "Config.Store", Reason: ", Pauses, Redrives and Replayer are required", Related: []string{"Pauses", "Redrives", "Replayer"}}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Operator{cfg: cfg}, nil
}

// Job returns the named job of the schedules file, or ErrUnknownJob.
func (o *Operator) Job(name string) (*schedule.Job, error) {
	i := slices.IndexFunc(o.cfg.Jobs, func(j *schedule.Job) bool { return j.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, name)
	}
	return o.cfg.Jobs[i], nil
}

// Trigger publishes one manual window of job now (see Trigger).
func (o *Operator) Trigger(ctx context.Context, job string) (*jobmsg.Message, *kgo.Record, error) {
	j, err := o.Job(job)
	if err != nil {
		return nil, nil, err
	}
	return Trigger(ctx, o.cfg.Publisher, names.Deployment{Namespace: o.cfg.Namespace, Topic: o.cfg.Topic}, j, nil, o.cfg.Now())
}

// Pause pauses job (Pauses.Pause); pause.ErrAlreadyPaused if it is.
func (o *Operator) Pause(ctx context.Context, job, by string) (pause.Pause, error) {
	if _, err := o.Job(job); err != nil {
		return pause.Pause{}, err
	}
	return o.cfg.Pauses.Pause(ctx, pause.Pause{Job: job, Since: o.cfg.Now().UTC(), By: by})
}

// Resume resumes job without catching up (Pauses.ResumeAt); pause.ErrNotPaused
// if it is not paused.
func (o *Operator) Resume(ctx context.Context, job string) (pause.Pause, error) {
	if _, err := o.Job(job); err != nil {
		return pause.Pause{}, err
	}
	return o.cfg.Pauses.ResumeAt(ctx, job, o.cfg.Now().UTC())
}

// DeadLetters reads the dead letters with their window states and redrive
// records.
func (o *Operator) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	ls, err := ReadDeadLetters(ctx, o.cfg.ReadOpts, o.cfg.DLQTopic)
	if err != nil {
		return nil, err
	}
	if err := AnnotateDeadLetters(ctx, o.cfg.Store, o.cfg.Redrives, o.cfg.DLQTopic, ls); err != nil {
		return nil, err
	}
	return ls, nil
}

// Redrive redrives the dead letter id as kjobctl dlq redrive ID --execute
// does (without --force): ErrUnknownLetter if there is none, ErrLeftOut
// (with the item saying why) if its window is done or running or it was
// redriven before.
func (o *Operator) Redrive(ctx context.Context, id, by string) (RedriveItem, []Redriven, error) {
	ls, err := o.DeadLetters(ctx)
	if err != nil {
		return RedriveItem{}, nil, err
	}
	p, off, err := ParseDeadLetterID(id)
	if err != nil {
		return RedriveItem{}, nil, fmt.Errorf("%w %q: want an id as the list shows it", ErrUnknownLetter, id)
	}
	i := slices.IndexFunc(ls, func(d DeadLetter) bool { return d.Partition == p && d.Offset == off })
	if i < 0 {
		return RedriveItem{}, nil, fmt.Errorf("%w %s in %s", ErrUnknownLetter, id, o.cfg.DLQTopic)
	}
	items := PlanRedrive(ls[i:i+1], false)
	if items[0].Skip != "" {
		return items[0], nil, fmt.Errorf("%w: %s", ErrLeftOut, items[0].Skip)
	}
	out, err := ExecuteRedrive(ctx, RedriveConfig{Client: o.cfg.Redriver, Store: o.cfg.Store, Redrives: o.cfg.Redrives,
		DLQTopic: o.cfg.DLQTopic, Topic: o.cfg.Topic, By: by, Now: o.cfg.Now}, items, false)
	if err != nil {
		return items[0], out, err
	}
	if items[0].Skip != "" {
		return items[0], out, fmt.Errorf("%w: %s", ErrLeftOut, items[0].Skip)
	}
	return items[0], out, nil
}

// PlanReplay plans a replay (Replayer.Plan); nothing changes.
func (o *Operator) PlanReplay(ctx context.Context, spec ReplaySpec) (*ReplayPlan, error) {
	return o.cfg.Replayer.Plan(ctx, spec)
}

// ExecuteReplay executes a plan PlanReplay made (Replayer.Execute).
func (o *Operator) ExecuteReplay(ctx context.Context, plan *ReplayPlan) error {
	return o.cfg.Replayer.Execute(ctx, plan)
}
