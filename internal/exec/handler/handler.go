// Package handler is the worker's side of the handler API: Job is one
// attempt at one window as the worker runs it (the decoded record, the
// attempt, the claim's token, the worker and the record's place), Handler
// runs attempts, and Mux, Recover, PanicError, ErrPermanent and the error
// bounds are what the worker and the built-in handlers share. Users write
// handlers against the root package (kjob.Job, kjob.Handler, kjob.Mux),
// which adapts them to this one; ErrPermanent, ErrUnknownHandler and
// PanicError are re-exported there, so errors.Is and errors.As see the
// same values on both sides.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
)

// Handler runs job windows.
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

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// ErrPermanent marks a failure that retrying cannot fix; wrap it
// (fmt.Errorf("bad payload: %w", handler.ErrPermanent)) to skip the
// remaining attempts and dead-letter the window at once.
var ErrPermanent = errors.New("permanent failure")

// ErrUnknownHandler is returned by Mux for a window whose handler name is not
// registered. The worker dead-letters such windows.
var ErrUnknownHandler = errors.New("unknown handler")

// Job is the read-only description of one attempt at one window.
type Job struct {
	msg       *jobmsg.Message
	attempt   int
	token     int64
	worker    string
	partition int32
	offset    int64
}

// NewJob builds a Job. The worker calls it; tests of handlers call it to
// build inputs.
func NewJob(msg *jobmsg.Message, attempt int, token int64, worker string, partition int32, offset int64) *Job {
	return &Job{msg: msg, attempt: attempt, token: token, worker: worker, partition: partition, offset: offset}
}

// ID is the window id ("<job>@<start, UTC>", plus a suffix for manual and
// backfill windows). It is the idempotency key.
func (j *Job) ID() string { return j.msg.ID }

// Name is the job's name in the schedules file.
func (j *Job) Name() string { return j.msg.Job }

// Namespace is the deployment the window was published in.
func (j *Job) Namespace() string { return j.msg.Namespace }

// HandlerName is the name the Mux routed on.
func (j *Job) HandlerName() string { return j.msg.Handler }

// Window is the time range this run covers.
func (j *Job) Window() jobmsg.Window { return j.msg.Window }

// ScheduledAt is when the window was due.
func (j *Job) ScheduledAt() time.Time { return j.msg.ScheduledAt }

// PublishedAt is when the producer published it.
func (j *Job) PublishedAt() time.Time { return j.msg.PublishedAt }

// Trigger says why the window was published.
func (j *Job) Trigger() jobmsg.Trigger { return j.msg.Trigger }

// ScheduleVersion is the version of the job's spec that produced the
// window (1 and up); 0 for a window published by an operator's tool or by
// a kjob from before schedules had versions.
func (j *Job) ScheduleVersion() int64 { return j.msg.ScheduleVersion }

// Payload returns a copy of the job's payload (a JSON object).
func (j *Job) Payload() json.RawMessage { return append(json.RawMessage(nil), j.msg.Payload...) }

// RawPayload returns the payload itself, not a copy, for decoders that
// only read it (kjob.Typed); the caller must not modify it.
func (j *Job) RawPayload() json.RawMessage { return j.msg.Payload }

// DecodePayload unmarshals the payload into v.
func (j *Job) DecodePayload(v any) error {
	if err := json.Unmarshal(j.msg.Payload, v); err != nil {
		return fmt.Errorf("job %s: decode payload: %w", j.msg.ID, err)
	}
	return nil
}

// Attempt is this attempt's number, starting at 1. It counts attempts that
// crashed too.
func (j *Job) Attempt() int { return j.attempt }

// MaxAttempts is the job's attempt limit.
func (j *Job) MaxAttempts() int { return j.msg.Policy.MaxAttempts }

// Timeout is the job's per-attempt timeout (also the context's deadline).
func (j *Job) Timeout() time.Duration { return time.Duration(j.msg.Policy.Timeout) }

// FencingToken is the claim's token: it grows with every claim of every
// window of this job, so a downstream store can reject a write from an
// attempt older than the newest it has accepted.
func (j *Job) FencingToken() int64 { return j.token }

// Worker is the id of the worker running the attempt.
func (j *Job) Worker() string { return j.worker }

// Partition and Offset locate the window's record in the topic.
func (j *Job) Partition() int32 { return j.partition }

// Offset is the record's offset in its partition.
func (j *Job) Offset() int64 { return j.offset }

// Message returns a copy of the decoded record (for middleware that needs
// every field).
func (j *Job) Message() jobmsg.Message {
	m := *j.msg
	m.Payload = j.Payload()
	return m
}

// LogValue groups the job's identifying fields for log/slog.
func (j *Job) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("window", j.msg.ID),
		slog.String("job", j.msg.Job),
		slog.Int("attempt", j.attempt),
		slog.Int64("token", j.token),
	)
}

// Mux routes a job to the handler registered under the job's handler name.
// It is safe for concurrent use. The zero value is not usable; use NewMux.
type Mux struct {
	mu         sync.RWMutex
	handlers   map[string]Handler
	middleware []Middleware
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Handle registers h under name. It panics if name is empty, h is nil or the
// name is already registered, as http.ServeMux does: these are programming
// errors found at start-up.
func (m *Mux) Handle(name string, h Handler) {
	if name == "" {
		panic("handler: Handle with empty name")
	}
	if h == nil {
		panic("handler: Handle " + name + " with nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[name]; dup {
		panic("handler: handler " + name + " registered twice")
	}
	m.handlers[name] = h
}

// HandleFunc registers f under name.
func (m *Mux) HandleFunc(name string, f func(context.Context, *Job) error) {
	m.Handle(name, HandlerFunc(f))
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

// unknown is the error for a job whose handler is not registered. It is
// a function of its own so that HandleJob's frame, which stays on the
// stack of every running handler, holds none of its formatting: a
// goroutine whose stack stays under a quarter of its size is shrunk by the
// GC, which with ten thousand windows in flight halves tens of MiB.
//
//go:noinline
func (m *Mux) unknown(job *Job) error { return Unknown(job, m.Names()) }

// Unknown is the error of a mux for a job whose handler is not among the
// known names: it wraps ErrUnknownHandler and ErrPermanent.
func Unknown(job *Job, known []string) error {
	return fmt.Errorf("handler %q (job %s): %w: register it with Mux.Handle; known: %v: %w",
		job.HandlerName(), job.Name(), ErrUnknownHandler, known, ErrPermanent)
}

// PanicError is returned by Recover for a handler that panicked.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the panicking goroutine's stack trace (runtime/debug.Stack).
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Recover turns a panic in the handler into a *PanicError, so one bad job
// fails its attempt instead of crashing the worker, and bounds the text of
// the error it returns (Bound), which the worker logs and stores.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, job *Job) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Value: v, Stack: debug.Stack()}
				}
				err = Bound(err)
			}()
			return next.HandleJob(ctx, job)
		})
	}
}

// Public returns the root package's *kjob.Job for the attempt j. The root
// package sets it when it is initialised; kjobtest, which builds Jobs for
// users' unit tests, calls it, as it cannot reach the root's unexported
// fields (nor may this package import the root).
var Public func(j *Job) any
