package schedule

import (
	"encoding/json"
	"fmt"
	"time"
)

// Defaults applied to fields a job leaves out.
const (
	DefaultTimeout     = time.Minute
	DefaultMaxAttempts = 3
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
)

// MaxPayloadBytes bounds a job's payload once converted to JSON, so that a
// window record stays well below the wire format's size limit.
const MaxPayloadBytes = 64 << 10

// PayloadTooLarge is why a payload of n bytes as JSON is refused, or ""
// when n is within MaxPayloadBytes. The schedules file and a payload given
// to one window (kjobctl trigger --payload) are refused with the same
// words.
func PayloadTooLarge(n int) string {
	if n <= MaxPayloadBytes {
		return ""
	}
	return fmt.Sprintf("is %d bytes as JSON, more than the limit of %d; pass a reference to the data instead", n, MaxPayloadBytes)
}

// Job is one validated job, from a schedules file (Parse) or a Spec
// (Spec.Job).
type Job struct {
	// Name is the job's name: lower-case letters, digits and '-', at most
	// 63 characters, starting and ending with a letter or digit (like a
	// DNS label).
	Name string
	// Spec is the cron spec as written.
	Spec string
	// Timezone is the IANA time zone name as written; "" means UTC.
	Timezone string
	// Location is the loaded time zone (time.UTC when Timezone is "").
	Location *time.Location
	// Handler names the worker handler that runs the job: lower-case
	// letters, digits, '-', '.' and '_'.
	Handler string
	// Payload is the job's payload as a JSON object; "{}" when absent.
	Payload json.RawMessage
	// Timeout bounds one attempt (default 1m); always > 0 and at most
	// 24h, the longest timeout workers accept.
	Timeout time.Duration
	// Catchup is how old a window missed while no producer led may be and
	// still be published (with trigger "catchup") when a leader takes
	// over; 0 (the default) means never. It governs only windows older
	// than the producer's misfire grace (10s by default): windows due
	// within that grace before a takeover, and windows due while a leader
	// was live, are always published.
	Catchup time.Duration
	// Retries is the job's retry policy.
	Retries RetryPolicy
	// Overlap is the job's overlap policy: how its windows may overlap
	// (default OverlapQueue: one at a time, in window order).
	Overlap Overlap
	// MaxConcurrent bounds how many windows of the job one worker runs at
	// once; only with Overlap OverlapAllow (from 1 to 10000). 0 (the
	// default) leaves it to the worker: a quarter of its concurrency.
	MaxConcurrent int
	// Enabled reports whether the producer publishes the job (default true).
	Enabled bool
	// At is the instant of a one-shot job (a file's "at"), which has
	// exactly one window, at At, and no Spec; zero for a cron job.
	At time.Time
	// Start and End bound a cron job's windows: none starts before Start
	// or after End (both inclusive); zero when unset.
	Start, End time.Time
	// Jitter (0 to MaxJitter, default 0) delays the publication of each
	// window by Offset(window start), a fixed fraction of Jitter derived
	// from the job's name and the window's nominal start.
	Jitter time.Duration
	// File is the schedules file the job came from, or the source given
	// to Spec.Job.
	File string
	// Line is the line of the job's mapping in File; 0 for a Spec.
	Line int

	sched Schedule
}

// RetryPolicy says how often and how fast a failing window is retried.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in all, the first included
	// (default 3, from 1 to 100).
	MaxAttempts int
	// Backoff is the delay before the second attempt (default 1s, > 0,
	// at most 24h).
	Backoff time.Duration
	// MaxBackoff caps the delay between attempts (default 1m, >= Backoff,
	// at most 24h).
	MaxBackoff time.Duration
}

// Schedule returns the job's schedule, bounds (At, Start, End) included.
// For a Job that did not come from Parse or Spec.Job it parses Spec in
// Location on each call.
func (j *Job) Schedule() (Schedule, error) {
	var s Schedule
	switch {
	case !j.At.IsZero():
		return once{at: j.At.UTC()}, nil
	case j.sched != nil:
		s = j.sched
	default:
		var err error
		if s, err = ParseSpec(j.Spec, j.Location); err != nil {
			return nil, err
		}
	}
	if j.Start.IsZero() && j.End.IsZero() {
		return s, nil
	}
	return bounded{s: s, start: j.Start, end: j.End}, nil
}

// Next returns the job's first window start strictly after t, in UTC; the
// zero time if there is none (after End, after a one-shot job's At, or,
// for a hand-made Job, if Spec is invalid).
func (j *Job) Next(t time.Time) time.Time {
	s, err := j.Schedule()
	if err != nil {
		return time.Time{}
	}
	return s.Next(t)
}

// Windows returns the window starts w with from < w <= to, in order, at
// most max of them (max <= 0 means no limit): the windows missed between
// two instants, for catch-up.
func (j *Job) Windows(from, to time.Time, max int) []time.Time {
	s, err := j.Schedule()
	if err != nil {
		return nil
	}
	var out []time.Time
	for w := s.Next(from); !w.IsZero() && !w.After(to); w = s.Next(w) {
		if max > 0 && len(out) >= max {
			break
		}
		out = append(out, w)
	}
	return out
}

// once is a one-shot job's schedule: one window, at at.
type once struct{ at time.Time }

func (o once) Next(t time.Time) time.Time {
	if t.Before(o.at) {
		return o.at
	}
	return time.Time{}
}

// bounded drops the windows of s before start and after end (either zero
// for no bound).
type bounded struct {
	s          Schedule
	start, end time.Time
}

func (b bounded) Next(t time.Time) time.Time {
	if !b.start.IsZero() && t.Before(b.start) {
		// The first window at or after start.
		t = b.start.Add(-time.Nanosecond)
	}
	w := b.s.Next(t)
	if w.IsZero() || !b.end.IsZero() && w.After(b.end) {
		return time.Time{}
	}
	return w
}
