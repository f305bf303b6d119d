package jobmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
)

// Version is the schema version this package writes and the newest it reads.
const Version = 1

// Header names and values set on every record.
const (
	HeaderSchema      = "kjob-schema"
	HeaderContentType = "content-type"
	ContentType       = "application/json"
)

// MaxValueBytes bounds an encoded value. Larger records are refused by
// Encode and rejected by Decode (the worker dead-letters them).
const MaxValueBytes = 256 << 10

// Trigger says why a window was published.
type Trigger string

// The triggers.
const (
	// TriggerSchedule is a window published at its start time by the leader.
	TriggerSchedule Trigger = "schedule"
	// TriggerCatchup is a window missed while no leader was live, published
	// late because it was still within the job's catch-up limit.
	TriggerCatchup Trigger = "catchup"
	// TriggerManual is a window requested by an operator ("run now").
	TriggerManual Trigger = "manual"
	// TriggerBackfill is a past window republished by an operator.
	TriggerBackfill Trigger = "backfill"
)

// Valid reports whether t is one of the known triggers.
func (t Trigger) Valid() bool {
	switch t {
	case TriggerSchedule, TriggerCatchup, TriggerManual, TriggerBackfill:
		return true
	}
	return false
}

// Window is the time range one run of a job covers: [Start, End), where End
// is the next window's start.
type Window struct {
	// Start is the window's first instant (UTC); the window id carries it.
	Start time.Time `json:"start"`
	// End is the window's end, exclusive: the next window's start.
	End time.Time `json:"end"`
}

// Overlap is a job's overlap policy: what the worker does with a window of
// the job while an earlier window of the same job is still running or
// waiting. Windows of different jobs wait for each other only for a free
// slot of the worker, which goes to the job holding the fewest (see
// Policy.MaxConcurrent); the policy orders the windows of one job (the
// record key). The values follow
// Temporal's schedule overlap policies and Kubernetes' CronJob
// concurrencyPolicy.
type Overlap string

// The overlap policies.
const (
	// OverlapQueue runs the job's windows one at a time, in window order:
	// a window starts only after the previous one is settled (done or
	// dead-lettered). Temporal BUFFER_ALL. The default.
	OverlapQueue Overlap = "queue"
	// OverlapSkip does not run a window that comes up while the job's
	// previous window still runs: it is settled as skipped, with its
	// reason. Temporal SKIP, Kubernetes Forbid.
	OverlapSkip Overlap = "skip"
	// OverlapLatest keeps, while one window runs, only the newest waiting
	// window; older waiting windows are settled as skipped, with their
	// reason. Temporal BUFFER_ONE.
	OverlapLatest Overlap = "latest"
	// OverlapReplace cancels the running window when a newer one comes up
	// (its context's cause is the worker's ErrSuperseded); the cancelled
	// window is settled as superseded and not retried, and the newer one
	// runs once the cancelled one has returned. Temporal CANCEL_OTHER,
	// Kubernetes Replace.
	OverlapReplace Overlap = "replace"
	// OverlapAllow runs the job's windows concurrently, each exactly once.
	// Temporal ALLOW_ALL, Kubernetes Allow.
	OverlapAllow Overlap = "allow"
)

// Overlaps lists the overlap policies, the default first.
var Overlaps = []Overlap{OverlapQueue, OverlapSkip, OverlapLatest, OverlapReplace, OverlapAllow}

// overlapHelp lists the valid overlap values for error messages.
const overlapHelp = "want one of queue (the default), skip, latest, replace, allow"

// Valid reports whether o is one of the five overlap policies. The empty
// value is not valid here, although a record without "overlap" decodes as
// OverlapQueue (see Policy.Overlap).
func (o Overlap) Valid() bool {
	switch o {
	case OverlapQueue, OverlapSkip, OverlapLatest, OverlapReplace, OverlapAllow:
		return true
	}
	return false
}

// Bounds on the policy a record may carry. Anyone who can write to the
// windows topic can set a record's policy, so the worker does not trust it
// blindly: Validate (and so every decode) rejects a policy beyond these
// bounds, and the worker dead-letters such a record with the reason. The
// schedules file parser (schedule) enforces the same constants, so a
// window the producer publishes is always within them.
//
// The values leave room for every realistic schedule while keeping the
// time one window can occupy its job bounded:
//   - MaxTimeout: a window is one cron tick of a job, and a tick whose
//     handler needs more than a day should start that work asynchronously
//     and return. Kubernetes and Temporal leave the deadline unbounded,
//     asynq defaults to 30 minutes and River to 1 minute; a day covers
//     every nightly batch while a record saying 100000h is refused.
//   - MaxAttempts: River and asynq default to 25 attempts, a Kubernetes
//     Job to 7 (backoffLimit 6). 100 is four times the peers' default;
//     with MaxBackoffLimit that is still months of retrying, which is
//     enough for any outage worth waiting out. (Schedules files accepted
//     up to 1000 before this bound existed.)
//   - MaxBackoffLimit: backoff and max_backoff are at most a day. It must
//     stay well below the idempotency store's record retention (7 days
//     by default, internal/store/dedupe), which counts a window's attempts across
//     its retries: a longer wait could outlive the record and restart the
//     count. Kubernetes caps its own Job backoff at 6 minutes.
const (
	// MaxTimeout bounds Policy.Timeout (the schedules file's timeout).
	MaxTimeout = 24 * time.Hour
	// MaxAttempts bounds Policy.MaxAttempts (retries.max_attempts).
	MaxAttempts = 100
	// MaxBackoffLimit bounds Policy.Backoff and Policy.MaxBackoff
	// (retries.backoff and retries.max_backoff).
	MaxBackoffLimit = 24 * time.Hour
	// MaxConcurrentLimit bounds Policy.MaxConcurrent (max_concurrent):
	// a worker never runs more windows at once than its own concurrency
	// anyway; the bound only refuses nonsense.
	MaxConcurrentLimit = 10000
)

// Policy carries the job's execution settings from the schedules file to the
// worker, so workers need no copy of that file.
type Policy struct {
	// Timeout bounds one attempt of the handler.
	Timeout Duration `json:"timeout"`
	// MaxAttempts is how many attempts a window gets before it is
	// dead-lettered (at least 1).
	MaxAttempts int `json:"max_attempts"`
	// Backoff is the delay before the second attempt; it doubles per attempt
	// up to MaxBackoff, with jitter.
	Backoff Duration `json:"backoff"`
	// MaxBackoff caps the delay between attempts.
	MaxBackoff Duration `json:"max_backoff"`
	// Overlap is the job's overlap policy. It is written only when set;
	// a record without it (every record of kjob versions before overlap
	// policies) means OverlapQueue. Unmarshal and FromRecord normalise
	// the absent value: a decoded message's Overlap is always one of the
	// five policies, never "". Validate accepts "" (as OverlapQueue) and
	// rejects any other value outside the five.
	Overlap Overlap `json:"overlap,omitempty"`
	// MaxConcurrent bounds how many windows of the job one worker runs at
	// once (the schedules file's max_concurrent; it matters for
	// OverlapAllow, the only policy that runs a job's windows
	// concurrently). It is written only when set: 0, and a record without
	// it, means the worker's default for the policy. Validate accepts 0
	// to MaxConcurrentLimit.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
}

// Message is one job window on the wire.
type Message struct {
	// V is the schema version; Encode sets it to Version.
	V int `json:"v"`
	// Namespace is the namespace of the deployment that published the
	// window (names.Deployment). A worker runs only its own deployment's
	// windows and dead-letters another's. It is written only when set: a
	// record without it was written by a kjob from before records carried
	// their namespace (see the package doc for what a worker does with
	// one).
	Namespace string `json:"namespace,omitempty"`
	// ID is the window id, unique per window (see WindowID).
	ID string `json:"id"`
	// Job is the job name; also the record key.
	Job string `json:"job"`
	// Handler names the registered handler that runs the window.
	Handler string `json:"handler"`
	// Window is the time range the run covers.
	Window Window `json:"window"`
	// ScheduledAt is when the window was due (its start, or the trigger time
	// for a manual window).
	ScheduledAt time.Time `json:"scheduled_at"`
	// PublishedAt is when the producer published the record.
	PublishedAt time.Time `json:"published_at"`
	// Trigger says why the window was published.
	Trigger Trigger `json:"trigger"`
	// Payload is the job's payload from the schedules file: a JSON object.
	Payload json.RawMessage `json:"payload"`
	// Policy holds the job's timeout and retry settings.
	Policy Policy `json:"policy"`
	// ScheduleVersion is the version of the job's spec that produced the
	// window (internal/store/specs); 0 for a window from a kjob before
	// schedules had versions, or published by an operator's tool.
	ScheduleVersion int64 `json:"schedule_version,omitempty"`
}

// Duration is a time.Duration that encodes as a Go duration string ("30s").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && !bytes.ContainsAny(b[1:n-1], "\\\"") {
		s = string(b[1 : n-1]) // the common case: no escapes to decode
	} else if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"30s\": %w", err)
	}
	*d = Duration(v)
	return nil
}

// WindowID returns the id of the scheduled window of job starting at start:
// "<job>@<start in RFC 3339, UTC>". Catch-up windows share it: a catch-up is
// the same window, published late.
func WindowID(job string, start time.Time) string {
	return job + "@" + start.UTC().Format(time.RFC3339Nano)
}

// ManualID returns the id of a manual trigger of job at time at. nonce tells
// apart two triggers in the same instant (use a random string).
func ManualID(job string, at time.Time, nonce string) string {
	return WindowID(job, at) + "#manual-" + nonce
}

// BackfillID returns the id of a backfilled window. It is deterministic, so
// backfilling the same range twice yields the same ids (and dedupe runs each
// once); it differs from the scheduled window's id so a backfill re-runs a
// window that already ran.
func BackfillID(job string, start time.Time) string {
	return WindowID(job, start) + "#backfill"
}

// JobOfID returns the job name part of a window id.
func JobOfID(id string) (string, bool) {
	job, _, ok := strings.Cut(id, "@")
	return job, ok && job != ""
}

// Errors callers test with errors.Is. Every decoding error also matches
// ErrInvalid.
var (
	// ErrInvalid matches every error of Decode and Validate.
	ErrInvalid = errors.New("jobmsg: invalid message")
	// ErrUnsupportedVersion is returned for a schema version newer than
	// Version. Upgrade the worker. (A version below 1 is merely
	// ErrInvalid.)
	ErrUnsupportedVersion = errors.New("jobmsg: unsupported schema version")
	// ErrTooLarge is returned for a value over MaxValueBytes.
	ErrTooLarge = errors.New("jobmsg: value too large")
)

// DecodeError describes what is wrong with a message.
type DecodeError struct {
	// Field is the JSON field (or header) at fault, e.g. "window.start".
	Field string
	// Value is the offending value, shortened for display.
	Value string
	// Reason explains the problem and the expected form.
	Reason string
	// Err is the underlying sentinel (ErrUnsupportedVersion, ErrTooLarge) or
	// parse error, if any.
	Err error
}

// Error implements error.
func (e *DecodeError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("jobmsg: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("jobmsg: %s: %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is match ErrInvalid and the wrapped cause.
func (e *DecodeError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

func invalid(field, value, reason string) *DecodeError {
	return &DecodeError{Field: field, Value: shorten(value), Reason: reason}
}

func shorten(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "..."
	}
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// versionError explains a schema version v other than Version found in
// field: a newer one is ErrUnsupportedVersion (upgrade the worker); zero or
// negative is simply invalid (no kjob ever wrote it).
func versionError(field string, v int) error {
	if v < 1 {
		return &DecodeError{Field: field, Value: strconv.Itoa(v), Reason: fmt.Sprintf("schema versions start at 1 (this kjob writes and reads %d); the record was not written by kjob", Version)}
	}
	return &DecodeError{Field: field, Value: strconv.Itoa(v), Reason: fmt.Sprintf("this kjob reads schema version %d; upgrade the worker to read newer versions", Version), Err: ErrUnsupportedVersion}
}

// beyond is the reason for a policy value above its bound.
func beyond(name, bound string) string {
	return "must be at most " + bound + " (jobmsg." + name + ", the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file"
}

// Validate checks that m is a well-formed version-1 message whose policy is
// within the bounds MaxTimeout, MaxAttempts and MaxBackoffLimit.
func (m *Message) Validate() error {
	switch {
	case m.V != Version:
		return versionError("v", m.V)
	case m.ScheduleVersion < 0:
		return invalid("schedule_version", strconv.FormatInt(m.ScheduleVersion, 10), "want the spec's version: 1 or more (0 or absent when unknown)")
	case m.Namespace != "" && !validNamespace(m.Namespace):
		return invalid("namespace", m.Namespace, "want a deployment namespace: letters, digits, '_', '.' or '-'")
	case m.Job == "":
		return invalid("job", "", "required")
	case m.ID == "":
		return invalid("id", "", "required")
	case m.Handler == "":
		return invalid("handler", "", "required")
	case m.Window.Start.IsZero():
		return invalid("window.start", "", "required (RFC 3339 time)")
	case m.Window.End.IsZero():
		return invalid("window.end", "", "required (RFC 3339 time)")
	case !m.Window.End.After(m.Window.Start):
		return invalid("window.end", m.Window.End.Format(time.RFC3339Nano), "must be after window.start "+m.Window.Start.Format(time.RFC3339Nano))
	case m.ScheduledAt.IsZero():
		return invalid("scheduled_at", "", "required (RFC 3339 time)")
	case m.PublishedAt.IsZero():
		return invalid("published_at", "", "required (RFC 3339 time)")
	case !m.Trigger.Valid():
		return invalid("trigger", string(m.Trigger), "want one of schedule, catchup, manual, backfill")
	case m.Policy.Timeout <= 0:
		return invalid("policy.timeout", time.Duration(m.Policy.Timeout).String(), "must be positive")
	case m.Policy.Timeout > Duration(MaxTimeout):
		return invalid("policy.timeout", time.Duration(m.Policy.Timeout).String(), beyond("MaxTimeout", MaxTimeout.String()))
	case m.Policy.MaxAttempts < 1:
		return invalid("policy.max_attempts", strconv.Itoa(m.Policy.MaxAttempts), "must be at least 1")
	case m.Policy.MaxAttempts > MaxAttempts:
		return invalid("policy.max_attempts", strconv.Itoa(m.Policy.MaxAttempts), beyond("MaxAttempts", strconv.Itoa(MaxAttempts)))
	case m.Policy.Backoff < 0 || m.Policy.MaxBackoff < m.Policy.Backoff:
		return invalid("policy.backoff", time.Duration(m.Policy.Backoff).String(), "must be >= 0 and <= policy.max_backoff "+time.Duration(m.Policy.MaxBackoff).String())
	case m.Policy.MaxBackoff > Duration(MaxBackoffLimit):
		return invalid("policy.max_backoff", time.Duration(m.Policy.MaxBackoff).String(), beyond("MaxBackoffLimit", MaxBackoffLimit.String()))
	case m.Policy.Overlap != "" && !m.Policy.Overlap.Valid():
		return invalid("policy.overlap", string(m.Policy.Overlap), overlapHelp)
	case m.Policy.MaxConcurrent < 0:
		return invalid("policy.max_concurrent", strconv.Itoa(m.Policy.MaxConcurrent), "must not be negative (0 means the worker's default)")
	case m.Policy.MaxConcurrent > MaxConcurrentLimit:
		return invalid("policy.max_concurrent", strconv.Itoa(m.Policy.MaxConcurrent), beyond("MaxConcurrentLimit", strconv.Itoa(MaxConcurrentLimit)))
	}
	if job, ok := JobOfID(m.ID); !ok || job != m.Job {
		return invalid("id", m.ID, fmt.Sprintf("must start with the job name and '@' (%q)", m.Job+"@"))
	}
	if p := bytes.TrimSpace(m.Payload); len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return invalid("payload", string(m.Payload), "must be a JSON object")
	}
	return nil
}

func validNamespace(ns string) bool {
	_, ok := names.ValidNamespace(ns)
	return ok
}

// Marshal validates m (setting V to Version if zero) and returns its JSON value.
func Marshal(m *Message) ([]byte, error) {
	if m.V == 0 {
		m.V = Version
	}
	if len(m.Payload) == 0 {
		m.Payload = json.RawMessage("{}")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("jobmsg: marshal %s: %w", m.ID, err)
	}
	if len(b) > MaxValueBytes {
		return nil, &DecodeError{Field: "value", Value: strconv.Itoa(len(b)) + " bytes", Reason: fmt.Sprintf("exceeds %d bytes; shrink the payload", MaxValueBytes), Err: ErrTooLarge}
	}
	return b, nil
}

// wire is a Message as decoded: times are decoded as strings first so a bad
// one is reported with its field name.
type wire struct {
	Message
	Window struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"window"`
	ScheduledAt string `json:"scheduled_at"`
	PublishedAt string `json:"published_at"`
}

// Unmarshal decodes and validates a JSON value.
func Unmarshal(value []byte) (*Message, error) {
	return unmarshal(value, false)
}

// unmarshal is Unmarshal; with alias the message's strings share value's
// memory instead of a copy of it (FromRecordAliased).
func unmarshal(value []byte, alias bool) (*Message, error) {
	if len(value) > MaxValueBytes {
		return nil, &DecodeError{Field: "value", Value: strconv.Itoa(len(value)) + " bytes", Reason: fmt.Sprintf("exceeds the limit of %d bytes", MaxValueBytes), Err: ErrTooLarge}
	}
	// The common case, a valid record of this version as the producer
	// writes it, takes one pass of the fast decoder. Anything it does not
	// handle goes to encoding/json, and anything invalid is decoded again,
	// version first, so that a future version's different shape is
	// reported as unsupported rather than as a confusing field error.
	var w wire
	if !w.decodeFast(value, alias) {
		j, err := decodeJSON(value)
		if err != nil {
			return nil, explain(value)
		}
		w = *j
	}
	if w.V != Version {
		return nil, explain(value)
	}
	return w.finish()
}

// decodeJSON decodes value with encoding/json, for what the fast decoder
// does not take, into a wire of its own: one whose address encoding/json
// takes lives on the heap, and unmarshal's stays on the stack (an
// allocation per window less in the no-op burst row, test/perf
// BenchmarkBurst).
func decodeJSON(value []byte) (*wire, error) {
	w := new(wire)
	return w, json.Unmarshal(value, w)
}

// unmarshalReference is Unmarshal with encoding/json only: the definition
// the fast decoder is tested against.
func unmarshalReference(value []byte) (*Message, error) {
	if len(value) > MaxValueBytes {
		return nil, &DecodeError{Field: "value", Value: strconv.Itoa(len(value)) + " bytes", Reason: fmt.Sprintf("exceeds the limit of %d bytes", MaxValueBytes), Err: ErrTooLarge}
	}
	var w wire
	if err := json.Unmarshal(value, &w); err != nil || w.V != Version {
		return nil, explain(value)
	}
	return w.finish()
}

// explain decodes an invalid value the careful way and returns why it is
// invalid.
func explain(value []byte) error {
	var head struct {
		V *json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		reason := "not a JSON object"
		var se *json.SyntaxError
		if errors.As(err, &se) {
			reason += ": " + se.Error()
		}
		return &DecodeError{Field: "value", Value: shorten(string(value)), Reason: reason, Err: err}
	}
	if head.V == nil {
		return invalid("v", "", "required (schema version)")
	}
	var v int
	if err := json.Unmarshal(*head.V, &v); err != nil {
		return invalid("v", string(*head.V), "want an integer schema version")
	}
	if v != Version {
		return versionError("v", v)
	}
	var w wire
	if err := json.Unmarshal(value, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &DecodeError{Field: strings.TrimPrefix(te.Field, "Message."), Value: te.Value, Reason: "want " + te.Type.String(), Err: err}
		}
		return &DecodeError{Field: "value", Reason: err.Error(), Err: err}
	}
	_, err := w.finish()
	return err
}

// finish parses the times and validates the message.
func (w *wire) finish() (*Message, error) {
	m := w.Message
	for _, f := range []struct {
		name string
		s    string
		t    *time.Time
	}{
		{"window.start", w.Window.Start, &m.Window.Start},
		{"window.end", w.Window.End, &m.Window.End},
		{"scheduled_at", w.ScheduledAt, &m.ScheduledAt},
		{"published_at", w.PublishedAt, &m.PublishedAt},
	} {
		if f.s == "" {
			continue // Validate reports it as required
		}
		t, err := time.Parse(time.RFC3339Nano, f.s)
		if err != nil {
			return nil, &DecodeError{Field: f.name, Value: shorten(f.s), Reason: "want an RFC 3339 time such as 2026-11-22T10:00:00Z", Err: err}
		}
		*f.t = t
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if m.Policy.Overlap == "" {
		m.Policy.Overlap = OverlapQueue // written before overlap policies existed
	}
	return &m, nil
}

// Record encodes m as a record for topic: key = job, value = JSON, headers =
// schema version and content type.
func Record(topic string, m *Message) (*kgo.Record, error) {
	b, err := Marshal(m)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{
		Topic: topic,
		Key:   []byte(m.Job),
		Value: b,
		Headers: []kgo.RecordHeader{
			{Key: HeaderSchema, Value: []byte(strconv.Itoa(Version))},
			{Key: HeaderContentType, Value: []byte(ContentType)},
		},
	}, nil
}

// FromRecord decodes and validates a record: its headers (when present they
// must agree with the value), its value, and that its key is the job name.
func FromRecord(r *kgo.Record) (*Message, error) { return fromRecord(r, false) }

// FromRecordAliased is FromRecord without a copy of the record's value:
// the message's strings share r.Value's memory, so r.Value must not
// change while the message is in use. A record a kgo client fetched is
// never changed by the client; the worker decodes every window it runs
// with this, which saves a copy of each value in flight.
func FromRecordAliased(r *kgo.Record) (*Message, error) { return fromRecord(r, true) }

func fromRecord(r *kgo.Record, alias bool) (*Message, error) {
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSchema:
			v, err := strconv.Atoi(string(h.Value))
			if err != nil {
				return nil, invalid("header "+HeaderSchema, string(h.Value), "want an integer schema version")
			}
			if v != Version {
				return nil, versionError("header "+HeaderSchema, v)
			}
		case HeaderContentType:
			if string(h.Value) != ContentType {
				return nil, invalid("header "+HeaderContentType, string(h.Value), "want "+ContentType)
			}
		}
	}
	m, err := unmarshal(r.Value, alias)
	if err != nil {
		return nil, err
	}
	if string(r.Key) != m.Job {
		return nil, invalid("key", string(r.Key), fmt.Sprintf("record key must be the job name %q", m.Job))
	}
	return m, nil
}
