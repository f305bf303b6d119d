package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/jobsource"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/schedule"
)

// Errors of Operator that callers branch on.
var (
	// ErrUnknownJob: the job is not in the job list (Config.Jobs or
	// JobSource). It is jobsource.ErrUnknownJob.
	ErrUnknownJob = jobsource.ErrUnknownJob
	// ErrUnknownLetter: no dead letter has the id.
	ErrUnknownLetter = errors.New("operator: no such dead letter")
	// ErrLeftOut: a redrive left the chosen letter out (its window is done
	// or running, or it was redriven before); RedriveItem.Skip says why.
	ErrLeftOut = errors.New("operator: dead letter left out of the redrive")
)

// Config configures an Operator: the same clients and stores
// kjobctl builds from the deployment's KJOB_* settings.
type Config struct {
	// Jobs are the deployment's jobs as read once (jobsource.Set.Jobs:
	// the schedules topic's, or a schedules file's).
	Jobs []*schedule.Job
	// JobSource looks the jobs up at every action instead, for a
	// long-running caller (the dashboard: a *jobsource.Follower of the
	// schedules topic). Set Jobs or JobSource, not both.
	JobSource JobSource
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
	// Schedules reads the schedules topic and submits pause and resume
	// changes to the producer leader (a *specs.Client with the caller's
	// actor): Paused and ResumeCatchup need it.
	Schedules Schedules
	// Redrives and Replayer are the deployment's.
	Redrives *Redrives
	Replayer *Replayer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// JobSource looks up one of the deployment's jobs; *jobsource.Follower
// implements it. An unknown job is an error matching ErrUnknownJob.
type JobSource interface {
	Job(ctx context.Context, name string) (*schedule.Job, error)
}

// Operator performs the operators' actions: trigger, backfill (plan and
// execute), pause and resume (with a catch-up), dead letters (list, inspect)
// and their redrive, and replay (plan and execute). kjobctl and the
// dashboard both call it; they only parse their input and render.
type Operator struct{ cfg Config }

// New returns an Operator. It needs Config.Topic; every other part is
// needed only by the actions that use it, and an action whose part is
// missing returns a *configerr.Error naming it (kjobctl builds only what a
// command uses).
func New(cfg Config) (*Operator, error) {
	if cfg.Topic == "" {
		return nil, &configerr.Error{Op: "operator", Field: "Config.Topic", Reason: "is required; set the windows topic"}
	}
	if cfg.JobSource != nil && len(cfg.Jobs) > 0 {
		return nil, &configerr.Error{Op: "operator", Field: "Config.JobSource", Reason: "is set with Config.Jobs; set one: Jobs for a list read once, JobSource for a lookup at every action"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Operator{cfg: cfg}, nil
}

// requirement is a part of Config an action needs, and whether it is
// missing.
type requirement struct {
	field   string
	missing bool
}

// part is the requirement Config.field; missing says it is not set.
func part(field string, missing bool) requirement { return requirement{field, missing} }

// need is a *configerr.Error for the action op naming the first missing
// part, or nil.
func need(op string, parts ...requirement) error {
	for _, p := range parts {
		if p.missing {
			return &configerr.Error{Op: "operator: " + op, Field: "Config." + p.field, Reason: "is not set; this action needs it"}
		}
	}
	return nil
}

// Job returns the named job of the job list, or an error matching
// ErrUnknownJob.
func (o *Operator) Job(ctx context.Context, name string) (*schedule.Job, error) {
	if o.cfg.JobSource != nil {
		return o.cfg.JobSource.Job(ctx, name)
	}
	i := slices.IndexFunc(o.cfg.Jobs, func(j *schedule.Job) bool { return j.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, name)
	}
	return o.cfg.Jobs[i], nil
}

// Trigger publishes one manual window of job now, with payload (nil: the
// job's own), and waits for Kafka to acknowledge it (see the function
// Trigger). It runs whether the job is paused or disabled (Paused tells).
func (o *Operator) Trigger(ctx context.Context, job string, payload json.RawMessage) (*jobmsg.Message, *kgo.Record, error) {
	if err := need("trigger", part("Publisher", o.cfg.Publisher == nil)); err != nil {
		return nil, nil, err
	}
	j, err := o.Job(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	return Trigger(ctx, o.cfg.Publisher, names.Deployment{Namespace: o.cfg.Namespace, Topic: o.cfg.Topic}, j, payload, o.cfg.Now())
}

// DeadLetters reads the dead letters with their window states and redrive
// records.
func (o *Operator) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	if err := need("dead letters", part("DLQTopic", o.cfg.DLQTopic == ""), part("Store", o.cfg.Store == nil), part("Redrives", o.cfg.Redrives == nil)); err != nil {
		return nil, err
	}
	ls, err := ReadDeadLetters(ctx, o.cfg.ReadOpts, o.cfg.DLQTopic)
	if err != nil {
		return nil, err
	}
	if err := AnnotateDeadLetters(ctx, o.cfg.Store, o.cfg.Redrives, o.cfg.DLQTopic, ls); err != nil {
		return nil, err
	}
	return ls, nil
}

// DeadLetter reads the dead letter id (as DeadLetter.ID writes it) with
// its window state and redrive record; ErrUnknownLetter if there is none.
func (o *Operator) DeadLetter(ctx context.Context, id string) (DeadLetter, error) {
	ls, err := o.DeadLetters(ctx)
	if err != nil {
		return DeadLetter{}, err
	}
	i, err := o.find(ls, id)
	if err != nil {
		return DeadLetter{}, err
	}
	return ls[i], nil
}

// find is the index of the letter id in ls, or ErrUnknownLetter.
func (o *Operator) find(ls []DeadLetter, id string) (int, error) {
	p, off, err := ParseDeadLetterID(id)
	if err != nil {
		return -1, fmt.Errorf("%w %q: want an id as the list shows it", ErrUnknownLetter, id)
	}
	i := slices.IndexFunc(ls, func(d DeadLetter) bool { return d.Partition == p && d.Offset == off })
	if i < 0 {
		return -1, fmt.Errorf("%w %s in %s", ErrUnknownLetter, id, o.cfg.DLQTopic)
	}
	return i, nil
}

// PlanRedrive plans the redrive of the dead letters ids (all of them if
// ids is empty), as PlanRedrive does; nothing changes. It returns every
// letter read, too.
func (o *Operator) PlanRedrive(ctx context.Context, ids []string, force bool) ([]RedriveItem, []DeadLetter, error) {
	ls, err := o.DeadLetters(ctx)
	if err != nil {
		return nil, nil, err
	}
	chosen := ls
	if len(ids) > 0 {
		chosen = make([]DeadLetter, 0, len(ids))
		for _, id := range ids {
			i, err := o.find(ls, id)
			if err != nil {
				return nil, ls, err
			}
			chosen = append(chosen, ls[i])
		}
	}
	return PlanRedrive(chosen, force), ls, nil
}

// ExecuteRedrive executes a plan PlanRedrive made (see the function
// ExecuteRedrive); by names who redrives.
func (o *Operator) ExecuteRedrive(ctx context.Context, items []RedriveItem, force bool, by string) ([]Redriven, error) {
	if err := need("redrive", part("Redriver", o.cfg.Redriver == nil), part("Store", o.cfg.Store == nil), part("Redrives", o.cfg.Redrives == nil)); err != nil {
		return nil, err
	}
	return ExecuteRedrive(ctx, RedriveConfig{Client: o.cfg.Redriver, Store: o.cfg.Store, Redrives: o.cfg.Redrives,
		DLQTopic: o.cfg.DLQTopic, Topic: o.cfg.Topic, By: by, Now: o.cfg.Now}, items, force)
}

// Redrive redrives the dead letter id as kjobctl dlq redrive ID --execute
// does (without --force): ErrUnknownLetter if there is none, ErrLeftOut
// (with the item saying why) if its window is done or running or it was
// redriven before.
func (o *Operator) Redrive(ctx context.Context, id, by string) (RedriveItem, []Redriven, error) {
	items, _, err := o.PlanRedrive(ctx, []string{id}, false)
	if err != nil {
		return RedriveItem{}, nil, err
	}
	if items[0].Skip != "" {
		return items[0], nil, fmt.Errorf("%w: %s", ErrLeftOut, items[0].Skip)
	}
	out, err := o.ExecuteRedrive(ctx, items, false, by)
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
	if err := need("replay", part("Replayer", o.cfg.Replayer == nil)); err != nil {
		return nil, err
	}
	return o.cfg.Replayer.Plan(ctx, spec)
}

// ExecuteReplay executes a plan PlanReplay made (Replayer.Execute).
func (o *Operator) ExecuteReplay(ctx context.Context, plan *ReplayPlan) error {
	if err := need("replay", part("Replayer", o.cfg.Replayer == nil)); err != nil {
		return err
	}
	return o.cfg.Replayer.Execute(ctx, plan)
}
