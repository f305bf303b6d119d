package kjob

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
)

// Handler runs job windows. It mirrors net/http's Handler: a Mux routes
// each window to the Handler registered under the window's handler name.
type Handler interface {
	// HandleJob runs one attempt of the window. Returning nil completes the
	// window; an error fails the attempt (it is retried with backoff until
	// the job's max attempts, then dead-lettered), unless it wraps
	// ErrPermanent, which dead-letters at once.
	HandleJob(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// HandleJob calls f(ctx, job).
func (f HandlerFunc) HandleJob(ctx context.Context, job *Job) error { return f(ctx, job) }

// Middleware wraps a Handler, for behaviour around every handler
// (logging, metrics, timeouts).
type Middleware func(Handler) Handler

// ErrPermanent marks a failure that retrying cannot fix; wrap it
// (fmt.Errorf("bad payload: %w", kjob.ErrPermanent)) to skip the
// remaining attempts and dead-letter the window at once.
var ErrPermanent = handler.ErrPermanent

// ErrUnknownHandler is returned by Mux for a window whose handler name is
// not registered. The worker dead-letters such windows.
var ErrUnknownHandler = handler.ErrUnknownHandler

// PanicError is the error of an attempt whose handler panicked: its Value
// is what the handler panicked with, its Stack the panicking goroutine's
// stack trace. The worker turns every panic into one (see Recover).
type PanicError = handler.PanicError

// Trigger says why a window was published.
type Trigger string

// The triggers.
const (
	// TriggerSchedule is a window published at its start time.
	TriggerSchedule Trigger = "schedule"
	// TriggerCatchup is a window missed while no producer led, published
	// late because it was still within the job's catch-up limit.
	TriggerCatchup Trigger = "catchup"
	// TriggerManual is a window an operator asked for ("run now").
	TriggerManual Trigger = "manual"
	// TriggerBackfill is a past window an operator published again.
	TriggerBackfill Trigger = "backfill"
)

// Window is the time range one run of a job covers: [Start, End), where
// End is the next window's start.
type Window struct {
	// Start is the window's first instant (UTC); the window id carries it.
	Start time.Time
	// End is the window's end, exclusive: the next window's start.
	End time.Time
}

// Job is the read-only description of one attempt at one window: the
// window's id and time range, why it was published, the payload, which
// attempt this is and the fencing token of the claim. The worker builds
// it; kjobtest.NewJob builds one for a unit test.
//
// A handler can be started twice for the same window: if a worker dies
// (or is cut off) mid-handler, the window runs again on another worker
// once the claim expires, with a higher FencingToken. A handler with side
// effects outside kjob should pass FencingToken to the system it writes
// to, which rejects writes carrying a token lower than the highest it has
// seen for the job.
type Job struct {
	in *handler.Job
}

// jobOf is the Job of the worker's attempt a.
func jobOf(a *handler.Job) *Job { return &Job{in: a} }

func init() { handler.Public = func(a *handler.Job) any { return jobOf(a) } }

// ID is the window id ("<job>@<start, UTC>", plus a suffix for manual and
// backfill windows). It is the idempotency key.
func (j *Job) ID() string { return j.in.ID() }

// Name is the job's name in the schedules file.
func (j *Job) Name() string { return j.in.Name() }

// Namespace is the deployment the window was published in (a worker runs
// only its own WorkerConfig.Namespace's windows).
func (j *Job) Namespace() string { return j.in.Namespace() }

// HandlerName is the name the Mux routed on.
func (j *Job) HandlerName() string { return j.in.HandlerName() }

// Window is the time range this run covers.
func (j *Job) Window() Window {
	w := j.in.Window()
	return Window{Start: w.Start, End: w.End}
}

// ScheduledAt is when the window was due.
func (j *Job) ScheduledAt() time.Time { return j.in.ScheduledAt() }

// PublishedAt is when the producer published it.
func (j *Job) PublishedAt() time.Time { return j.in.PublishedAt() }

// Trigger says why the window was published.
func (j *Job) Trigger() Trigger { return Trigger(j.in.Trigger()) }

// ScheduleVersion is the version of the job's spec that produced the
// window: 1 for the job as first written, one more with every change
// (the schedule log records each). It is 0 for a window published
// by an operator's own tool or by a kjob from before schedules had
// versions. A handler can log it, or tell apart the windows of the job
// before and after a change of its payload.
func (j *Job) ScheduleVersion() int64 { return j.in.ScheduleVersion() }

// Payload returns a copy of the job's payload (a JSON object).
func (j *Job) Payload() json.RawMessage { return j.in.Payload() }

// DecodePayload unmarshals the payload into v (see DecodeArgs for a
// decode whose errors name the field and dead-letter the window).
func (j *Job) DecodePayload(v any) error { return j.in.DecodePayload(v) }

// Attempt is this attempt's number, starting at 1. It counts attempts that
// crashed too.
func (j *Job) Attempt() int { return j.in.Attempt() }

// MaxAttempts is the job's attempt limit.
func (j *Job) MaxAttempts() int { return j.in.MaxAttempts() }

// Timeout is the job's per-attempt timeout (also the context's deadline).
func (j *Job) Timeout() time.Duration { return j.in.Timeout() }

// FencingToken is the claim's token: it grows with every claim of every
// window of this job, so a downstream store can reject a write from an
// attempt older than the newest it has accepted.
func (j *Job) FencingToken() int64 { return j.in.FencingToken() }

// Worker is the id of the worker running the attempt.
func (j *Job) Worker() string { return j.in.Worker() }

// Partition is the partition of the windows topic that holds the
// window's record.
func (j *Job) Partition() int32 { return j.in.Partition() }

// Offset is the record's offset in its partition.
func (j *Job) Offset() int64 { return j.in.Offset() }

// LogValue groups the job's identifying fields for log/slog: window, job,
// attempt, token.
func (j *Job) LogValue() slog.Value { return j.in.LogValue() }

// Mux routes a job to the handler registered under the job's handler
// name, as http.ServeMux routes requests by path. It is safe for
// concurrent use. The zero value is not usable; use NewMux.
type Mux struct {
	mu         sync.RWMutex
	handlers   map[string]Handler
	middleware []Middleware
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Handle registers h under name. It panics if name is empty, h is nil or
// the name is already registered, as http.ServeMux does: these are
// programming errors found at start-up.
func (m *Mux) Handle(name string, h Handler) {
	if name == "" {
		panic("kjob: Handle with empty name")
	}
	if h == nil {
		panic("kjob: Handle " + name + " with nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[name]; dup {
		panic("kjob: handler " + name + " registered twice")
	}
	m.handlers[name] = h
}

// HandleFunc registers f under name.
func (m *Mux) HandleFunc(name string, f func(context.Context, *Job) error) {
	m.Handle(name, HandlerFunc(f))
}

// handleInternal registers a handler written against the worker's attempt
// (the built-in ones).
func (m *Mux) handleInternal(name string, h handler.Handler) {
	m.Handle(name, HandlerFunc(func(ctx context.Context, j *Job) error { return h.HandleJob(ctx, j.in) }))
}

// Use appends middleware applied to every handler, outermost first.
func (m *Mux) Use(mw ...Middleware) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.middleware = append(m.middleware, mw...)
}

// Has reports whether a handler is registered under name.
func (m *Mux) Has(name string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.handlers[name]
	return ok
}

// Names lists the registered handler names, sorted.
func (m *Mux) Names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.handlers))
	for n := range m.handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HandleJob runs the handler registered for job.HandlerName() through the
// middleware. An unregistered name yields an error wrapping
// ErrUnknownHandler and ErrPermanent.
func (m *Mux) HandleJob(ctx context.Context, job *Job) error {
	m.mu.RLock()
	h, ok := m.handlers[job.HandlerName()]
	mw := m.middleware
	m.mu.RUnlock()
	if !ok {
		return m.unknown(job)
	}
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h.HandleJob(ctx, job)
}

// unknown is the error for a job whose handler is not registered, in a
// function of its own so that HandleJob's frame, which stays on the stack
// of every running handler, holds none of its formatting (see
// handler.Mux.HandleJob).
//
//go:noinline
func (m *Mux) unknown(job *Job) error { return handler.Unknown(job.in, m.Names()) }

// attempts adapts h to the worker, which runs attempts.
func attempts(h Handler) handler.Handler {
	return handler.HandlerFunc(func(ctx context.Context, a *handler.Job) error { return h.HandleJob(ctx, jobOf(a)) })
}

// Recover turns a panic in the handler into a *PanicError, so one bad job
// fails its attempt instead of crashing the worker, and bounds the text of
// the error it returns. A Worker already recovers every handler; use
// Recover around a Handler you call yourself.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, job *Job) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Value: v, Stack: debug.Stack()}
				}
				err = handler.Bound(err)
			}()
			return next.HandleJob(ctx, job)
		})
	}
}

// Timeout bounds every attempt by d, or for d <= 0 by the job's Timeout
// (see Job.Timeout), by cancelling the context passed down. The worker
// already applies the job's timeout; use Timeout with a d > 0 to impose a
// stricter bound.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, job *Job) error {
			limit := d
			if limit <= 0 {
				limit = job.Timeout()
			}
			ctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			return next.HandleJob(ctx, job)
		})
	}
}

// Logging logs the start and end of every attempt with its duration and
// outcome, using the stable keys window, job, attempt, token; an error's
// text is bounded, and a panic's stack is logged under "stack".
func Logging(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, job *Job) error {
			start := time.Now()
			log.DebugContext(ctx, "handler start", "job", job)
			err := next.HandleJob(ctx, job)
			if err != nil {
				log.WarnContext(ctx, "handler failed", append([]any{"job", job, "duration", time.Since(start)}, handler.ErrorAttrs(err)...)...)
			} else {
				log.InfoContext(ctx, "handler done", "job", job, "duration", time.Since(start))
			}
			return err
		})
	}
}
