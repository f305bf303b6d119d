package schedule

import "encoding/json"

// Spec is one job as written: the keys of one entry of a schedules file's
// "jobs:" list, with every value as the user wrote it (durations and times
// as strings, the payload as a JSON object). It is how a job travels
// outside a file: in the schedules topic, in change requests, in diffs and
// in the Go API. A Spec is not validated; Spec.Job validates it exactly
// as Parse validates a file's entry, and Job.ToSpec turns a validated Job
// back into its canonical Spec.
//
// Its JSON form uses the file's keys, so a spec can be pasted into a file
// (JSON is YAML) and back:
//
//	{"name": "report", "schedule": "30 2 * * *", "timezone": "Europe/Berlin",
//	 "handler": "http", "payload": {"url": "http://127.0.0.1:8080/hook"}}
type Spec struct {
	// Name is the job's name (required), see Job.Name.
	Name string `json:"name" yaml:"name"`
	// Schedule is the cron spec. Exactly one of Schedule and At is set.
	Schedule string `json:"schedule,omitempty" yaml:"schedule,omitempty"`
	// At makes a one-shot job: one window at this instant (RFC 3339, or a
	// local time "2026-12-01T08:00:00" read in Timezone).
	At string `json:"at,omitempty" yaml:"at,omitempty"`
	// Start and End bound the windows of a cron job: none starts before
	// Start or after End, both inclusive (same formats as At). Either may
	// be empty; End before Start is an error.
	Start string `json:"start,omitempty" yaml:"start,omitempty"`
	End   string `json:"end,omitempty" yaml:"end,omitempty"`
	// Jitter is a duration from 0 to 24h: each window is published up to
	// this much after its nominal start, by an offset derived from the job
	// and the nominal start, so every replica and replay agrees (see
	// Job.Offset).
	Jitter string `json:"jitter,omitempty" yaml:"jitter,omitempty"`
	// Timezone is an IANA zone name; empty means UTC.
	Timezone string `json:"timezone,omitempty" yaml:"timezone,omitempty"`
	// Handler names the worker handler (required).
	Handler string `json:"handler" yaml:"handler"`
	// Payload is a JSON object; empty means {}.
	Payload json.RawMessage `json:"payload,omitempty" yaml:"-"`
	// Timeout and Catchup are durations such as "30s".
	Timeout string `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	Catchup string `json:"catchup,omitempty" yaml:"catchup,omitempty"`
	// Retries is the retry policy; nil means the defaults.
	Retries *RetrySpec `json:"retries,omitempty" yaml:"retries,omitempty"`
	// Overlap is queue, skip, latest, replace or allow; empty means queue.
	Overlap string `json:"overlap,omitempty" yaml:"overlap,omitempty"`
	// MaxConcurrent applies to overlap allow only; 0 means the worker's
	// default.
	MaxConcurrent int `json:"max_concurrent,omitempty" yaml:"max_concurrent,omitempty"`
	// Enabled false stops the job's windows; nil means true.
	Enabled *bool `json:"enabled,omitempty" yaml:"enabled,omitempty"`
}

// RetrySpec is a job's "retries:" mapping as written.
type RetrySpec struct {
	MaxAttempts int    `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`
	Backoff     string `json:"backoff,omitempty" yaml:"backoff,omitempty"`
	MaxBackoff  string `json:"max_backoff,omitempty" yaml:"max_backoff,omitempty"`
}
