package kjobtest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/schedule"
)

// Defaults of the zero fields of Window and JobOptions.
const (
	// DefaultJob is Window.Job when it is empty.
	DefaultJob = "test-job"
	// DefaultWindowLength is End - Start when Window.End is zero.
	DefaultWindowLength = time.Minute
	// DefaultTimeout is Window.Timeout when it is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAttempts is Window.MaxAttempts when it is zero.
	DefaultMaxAttempts = 3
	// DefaultBackoff is Window.Backoff when it is zero: short, so a
	// retried window in a Pipeline is retried at once.
	DefaultBackoff = 10 * time.Millisecond
	// DefaultMaxBackoff is Window.MaxBackoff when it is zero (or Backoff,
	// if that is larger).
	DefaultMaxBackoff = 100 * time.Millisecond
	// DefaultWorker is JobOptions.Worker when it is empty, and the worker
	// id of a Pipeline.
	DefaultWorker = "kjobtest-worker"
)

// defaultStart is NewJob's Window.Start when it is zero.
var defaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Window describes one window of a job, as the producer would publish it:
// which job and handler, the time range it covers, why it was published,
// its payload and its job's policy. Every zero field has a default, so
// Window{} is a valid window of DefaultJob. The same window, with the same
// id, runs at most once: in a Pipeline, a second Publish of it is skipped
// as done.
type Window struct {
	// Job is the job's name, also the record key. Default DefaultJob.
	Job string
	// Handler is the handler name a kjob.Mux routes on. Default Job.
	Handler string
	// Start is the window's start. Default 2026-01-01T00:00:00Z for
	// NewJob (so tests are deterministic); for Pipeline.Publish, the
	// current time, later than every earlier default start of the job in
	// that pipeline, so that each Publish is a new window.
	Start time.Time
	// End is the window's end (exclusive). Default Start +
	// DefaultWindowLength.
	End time.Time
	// Trigger says why the window was published. Default
	// kjob.TriggerSchedule.
	Trigger kjob.Trigger
	// ID is the window id, the idempotency key. Default by Trigger:
	// "<Job>@<Start, RFC 3339 UTC>" for schedule and catchup, with the
	// suffix "#manual-kjobtest" for manual and "#backfill" for backfill.
	ID string
	// ScheduledAt is when the window was due. Default Start.
	ScheduledAt time.Time
	// PublishedAt is when it was published. Default Start for NewJob,
	// the current time for Pipeline.Publish.
	PublishedAt time.Time
	// Payload is the job's payload, which must be a JSON object: a
	// json.RawMessage, []byte or string is taken as JSON text; any other
	// value is encoded with encoding/json (a struct, a map). Default {}.
	Payload any
	// Timeout bounds one attempt of the handler. Default DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts is how many attempts the window gets before it is
	// dead-lettered. Default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the delay before the second attempt, doubling up to
	// MaxBackoff. Default DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps the delay between attempts. Default
	// DefaultMaxBackoff, or Backoff if that is larger.
	MaxBackoff time.Duration
	// Overlap is the job's overlap policy, as the schedules file spells
	// it: what a Pipeline's worker does with this window while an earlier
	// window of the job still runs or waits: "queue", "skip", "latest",
	// "replace" or "allow" (see package schedule). Default "queue".
	Overlap string
	// ScheduleVersion is the version of the job's spec that produced the
	// window (kjob.Job.ScheduleVersion). Default 0: unknown, as for a
	// window an operator's tool published. It may not be negative.
	ScheduleVersion int64
}

// message builds the window's message with the defaults applied (start
// and published are the defaults of Start and PublishedAt) and returns it
// as a worker decodes it from the record: the job w describes builds it
// (window.Message, as the producer's windows), then jobmsg encodes
// and decodes it, so it is exactly what a worker would hand to a handler,
// and invalid fields are reported by jobmsg's validation.
func (w Window) message(start, published time.Time) (*jobmsg.Message, error) {
	if w.Job == "" {
		w.Job = DefaultJob
	}
	if w.Handler == "" {
		w.Handler = w.Job
	}
	if w.Start.IsZero() {
		w.Start = start
	}
	if w.End.IsZero() {
		w.End = w.Start.Add(DefaultWindowLength)
	}
	if w.PublishedAt.IsZero() {
		w.PublishedAt = published
	}
	if w.Timeout == 0 {
		w.Timeout = DefaultTimeout
	}
	if w.MaxAttempts == 0 {
		w.MaxAttempts = DefaultMaxAttempts
	}
	if w.Backoff == 0 {
		w.Backoff = DefaultBackoff
	}
	if w.MaxBackoff == 0 {
		w.MaxBackoff = max(DefaultMaxBackoff, w.Backoff)
	}
	payload, err := payloadJSON(w.Payload)
	if err != nil {
		return nil, err
	}
	job := &schedule.Job{
		Name: w.Job, Handler: w.Handler, Payload: payload, Timeout: w.Timeout, Overlap: schedule.Overlap(w.Overlap),
		Retries: schedule.RetryPolicy{MaxAttempts: w.MaxAttempts, Backoff: w.Backoff, MaxBackoff: w.MaxBackoff},
	}
	m := window.Message(job, window.Publication{
		Start: w.Start, End: w.End, Trigger: jobmsg.Trigger(w.Trigger), ID: w.ID, Nonce: "kjobtest",
		ScheduledAt: w.ScheduledAt, PublishedAt: w.PublishedAt, Namespace: Namespace,
	})
	m.ScheduleVersion = w.ScheduleVersion
	rec, err := jobmsg.Record("", m)
	if err != nil {
		return nil, err
	}
	return jobmsg.FromRecord(rec)
}

// payloadJSON returns Window.Payload as JSON text.
func payloadJSON(p any) (json.RawMessage, error) {
	switch v := p.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case string:
		return json.RawMessage(v), nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("Window.Payload (%T): %w; use a value encoding/json can encode to an object, or JSON text", p, err)
	}
	return b, nil
}

// JobOptions describes a kjob.Job for a unit test of a handler: a
// Window plus the attempt the worker would be making. Every zero field has
// a default.
type JobOptions struct {
	// Window is the window the job runs.
	Window
	// Attempt is the attempt number, from 1. Default 1. It may not
	// exceed Window.MaxAttempts.
	Attempt int
	// FencingToken is the claim's fencing token. Default 1.
	FencingToken int64
	// Worker is the id of the worker running the attempt. Default
	// DefaultWorker.
	Worker string
	// Partition and Offset locate the window's record. Default 0.
	Partition int32
	// Offset is the record's offset in its partition. Default 0.
	Offset int64
}

// NewJob builds the *kjob.Job a worker would hand a handler for o's
// window and attempt, for unit tests of handlers: call the handler (or a
// kjob.Mux) with it directly. Only jobs a worker could deliver are
// built: the window goes through kjob's wire format (jobmsg), so the
// handler sees exactly what it would see in production.
//
// Like httptest.NewRequest, NewJob panics if o describes no valid job
// (the panic names the field, e.g. a Payload that is not a JSON object, an
// End before Start, an Attempt above MaxAttempts): such a mistake is in
// the test, not in the code under test.
func NewJob(o JobOptions) *kjob.Job {
	msg, err := o.Window.message(defaultStart, time.Time{})
	if err != nil {
		panic("kjobtest.NewJob: " + err.Error())
	}
	switch {
	case o.Attempt == 0:
		o.Attempt = 1
	case o.Attempt < 0:
		panic(fmt.Sprintf("kjobtest.NewJob: JobOptions.Attempt = %d; attempts count from 1 (0 picks 1)", o.Attempt))
	}
	if o.Attempt > msg.Policy.MaxAttempts {
		panic(fmt.Sprintf("kjobtest.NewJob: JobOptions.Attempt = %d is above Window.MaxAttempts = %d; a worker never makes that attempt (raise MaxAttempts)",
			o.Attempt, msg.Policy.MaxAttempts))
	}
	switch {
	case o.FencingToken == 0:
		o.FencingToken = 1
	case o.FencingToken < 0:
		panic(fmt.Sprintf("kjobtest.NewJob: JobOptions.FencingToken = %d; tokens count from 1 (0 picks 1)", o.FencingToken))
	}
	if o.Worker == "" {
		o.Worker = DefaultWorker
	}
	return handler.Public(handler.NewJob(msg, o.Attempt, o.FencingToken, o.Worker, o.Partition, o.Offset)).(*kjob.Job)
}
