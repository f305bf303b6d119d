// Package specs is kjob's schedules as a log: the records of the schedules
// topic (the current spec of each job, compacted, key = job name), of the
// schedule change log (append-only, one record per committed change), and
// the change requests and their results that travel over the control
// topic between a writer (kjobctl, the dashboard, kjob.Schedules) and the
// one serialising writer, the producer leader.
//
// # The model
//
//   - Each job has a version, starting at 1 and increased by every change
//     (create, update, pause, resume, revert, delete). A delete writes a
//     tombstone whose HeaderVersion header carries the version the delete
//     gave the job, so a job re-created while the tombstone is still in
//     the topic continues its versions.
//   - Only the producer leader writes the schedules topic and the change
//     log, inside the same Kafka transaction that publishes the windows due
//     up to the change and the Result of the request. So a change, its audit
//     record and its answer are visible together or not at all, and a
//     fenced (zombie) leader cannot commit a change.
//   - A changed spec applies from Record.EffectiveFrom: its windows start
//     strictly after that instant. Windows of the previous version that
//     started at or before it were published in the same transaction or
//     earlier.
//
// Wire format: JSON values with a "v" schema version (Version); the kind
// of a control-topic record is its control.HeaderKind header (KindRequest,
// KindResult), as for the workers' seek requests.
package specs

import (
	"errors"
	"time"

	"github.com/kjob/kjob/schedule"
)

// Version is the schema version of every record of this package.
const Version = 1

// Headers.
const (
	// HeaderVersion is the job's version, as a decimal string, on every
	// schedules-topic record, tombstones included.
	HeaderVersion = "kjob-schedule-version"
)

// Kinds of control-topic records (the control.HeaderKind header).
const (
	// KindRequest is a Request.
	KindRequest = "schedule-request"
	// KindResult is a Result.
	KindResult = "schedule-result"
)

// Pause is an operator's pause of a job: while a job's Record has one, the
// producer publishes none of its windows. A resume does not catch up the
// paused windows by itself; kjobctl resume --catchup publishes those that
// start in (At, the resume's EffectiveFrom].
type Pause struct {
	// Note says why (required by kjobctl and the dashboard).
	Note string `json:"note,omitempty"`
	// By is the actor who paused the job, At when the leader committed it
	// (for a pause migrated from the Redis pause list, SourceMigration:
	// who paused it there and since when).
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Source says where a change came from.
type Source struct {
	// Kind is one of the Source* constants.
	Kind string `json:"kind"`
	// File is the schedules file's path, for SourceFile.
	File string `json:"file,omitempty"`
	// Hash is the SHA-256 (hex) of the file's content, for SourceFile.
	Hash string `json:"hash,omitempty"`
}

// Source kinds.
const (
	SourceCLI       = "cli"
	SourceDashboard = "dashboard"
	SourceAPI       = "api"
	SourceFile      = "file"
	// SourceMigration is the producer leader's own migration of a pause
	// from the Redis pause list of kjob before pauses moved into the spec
	// (docs/schedules.md, "Upgrading"). Only the leader writes it: a
	// request from the control topic with this source is refused.
	SourceMigration = "migration"
)

// Record is the schedules topic's value for one job: its current spec and
// the version that set it.
type Record struct {
	V         int    `json:"v"`
	Namespace string `json:"namespace"`
	// Job is the job name, also the record key.
	Job string `json:"job"`
	// Version is the job's version (>= 1).
	Version int64 `json:"version"`
	// Spec is the job as written.
	Spec schedule.Spec `json:"spec"`
	// Paused, if set, pauses the job.
	Paused *Pause `json:"paused,omitempty"`
	// SetBy is the actor of the change that set this version, Source
	// where it came from, Note the note given with it, SetAt when the
	// leader committed it, ChangeID the id of its Change.
	SetBy    string    `json:"set_by"`
	Source   Source    `json:"source"`
	Note     string    `json:"note,omitempty"`
	SetAt    time.Time `json:"set_at"`
	ChangeID string    `json:"change_id"`
	// EffectiveFrom is the instant from which this version applies: its
	// windows start strictly after it. Zero for a job imported from a
	// file when the producer's state already knew it (an upgrade keeps
	// its catch-up).
	EffectiveFrom time.Time `json:"effective_from"`
	// FileHash is the SHA-256 (hex) of the canonical spec of the file
	// entry the job was last imported from; kept by changes from other
	// sources. "" if the job never came from a file. See the ownership
	// rule in docs/schedules.md.
	FileHash string `json:"file_hash,omitempty"`
}

// Op names a change.
type Op string

// Ops.
const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	// OpPut creates or updates (a file apply, kjob.Schedules.Apply).
	OpPut    Op = "put"
	OpDelete Op = "delete"
	OpPause  Op = "pause"
	OpResume Op = "resume"
	// OpRevert sets the spec the job had at Edit.ToVersion (read from the
	// change log), as a new version.
	OpRevert Op = "revert"
)

// FieldDiff is one changed field, by its file key ("schedule",
// "retries.max_attempts", "paused"), with the values as written ("" when
// absent).
type FieldDiff struct {
	Field  string `json:"field"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Change is one record of the change log: one committed change of one job.
// The log is append-only (never compacted), so it keeps every version.
type Change struct {
	V         int    `json:"v"`
	Namespace string `json:"namespace"`
	// ID identifies the change: "<request id>/<index in the request>".
	ID string `json:"id"`
	// Request is the id of the Request that asked for it.
	Request string `json:"request"`
	Job     string `json:"job"`
	Op      Op     `json:"op"`
	// VersionBefore is 0 for a job that did not exist; VersionAfter is
	// the version it set (for a delete, the tombstone's).
	VersionBefore int64 `json:"version_before"`
	VersionAfter  int64 `json:"version_after"`
	// Actor is the authenticated principal that asked for it.
	Actor  string `json:"actor"`
	Source Source `json:"source"`
	Note   string `json:"note,omitempty"`
	// At is when the leader committed it.
	At   time.Time   `json:"at"`
	Diff []FieldDiff `json:"diff,omitempty"`
	// Spec and Paused are the job's after the change (nil Spec after a
	// delete): what revert --to-version reads.
	Spec   *schedule.Spec `json:"spec,omitempty"`
	Paused *Pause         `json:"paused,omitempty"`
}

// Edit is one change a Request asks for.
type Edit struct {
	Op  Op     `json:"op"`
	Job string `json:"job"`
	// Spec is the new spec, for create, update and put (its Name is Job).
	Spec *schedule.Spec `json:"spec,omitempty"`
	// ExpectVersion, if set, is the version the writer read: the change
	// is refused with a conflict if the job's current version differs (0:
	// the job must not exist).
	ExpectVersion *int64 `json:"expect_version,omitempty"`
	// ToVersion is the version to go back to, for revert.
	ToVersion int64 `json:"to_version,omitempty"`
	// Note is the pause note, for pause.
	Note string `json:"note,omitempty"`
	// FileHash is the file entry's hash, for a put from a file.
	FileHash string `json:"file_hash,omitempty"`
	// Migrated, for a pause, is the pause as the Redis pause list had it
	// (By, At = since, Note): set only by the producer leader's own
	// migration (SourceMigration); a request from the control topic that
	// sets it is refused.
	Migrated *Pause `json:"migrated,omitempty"`
}

// MaxEdits bounds the edits of one Request, and so of one transaction;
// larger applies are split into several requests by the writer.
const MaxEdits = 1000

// Request asks the producer leader for changes, applied all or none, in
// one transaction. Written to the control topic, key = namespace.
type Request struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Actor is the authenticated principal (see docs/schedules.md, "Who
	// changed it").
	Actor  string `json:"actor"`
	Source Source `json:"source"`
	Note   string `json:"note,omitempty"`
	// IssuedAt is the writer's clock; a leader drops a request older than
	// RequestTTL by its own clock (the writer has given up on it by then).
	IssuedAt time.Time `json:"issued_at"`
	Edits    []Edit    `json:"edits"`
}

// RequestTTL is how long a request stays valid after IssuedAt: a writer
// waits at most this long for its Result.
const RequestTTL = 30 * time.Second

// Result answers a Request. Written to the control topic, key = namespace,
// in the transaction that committed the changes (or alone, for a refusal).
type Result struct {
	V         int    `json:"v"`
	Namespace string `json:"namespace"`
	RequestID string `json:"request_id"`
	// Applied lists the committed changes, in the request's order; empty
	// if Refused is set.
	Applied []Applied `json:"applied,omitempty"`
	// Refused says why nothing was changed.
	Refused *Refusal `json:"refused,omitempty"`
	// Leader names the producer replica that answered, At its clock: the
	// instant F of the committed changes, their Record.EffectiveFrom (a
	// resume's catch-up ends there).
	Leader string    `json:"leader"`
	At     time.Time `json:"at"`
}

// Applied is one committed change of a Result.
type Applied struct {
	Job           string `json:"job"`
	Op            Op     `json:"op"`
	VersionBefore int64  `json:"version_before"`
	VersionAfter  int64  `json:"version_after"`
	// Unchanged says the edit asked for what the job already was (a put
	// of the same spec): no new version was written.
	Unchanged bool `json:"unchanged,omitempty"`
}

// Refusal kinds.
const (
	RefusedConflict = "conflict"
	RefusedNotFound = "not-found"
	RefusedInvalid  = "invalid"
	RefusedTooLarge = "too-large"
)

// Refusal says why a Request changed nothing: the first edit that failed.
type Refusal struct {
	// Kind is one of the Refused* constants.
	Kind string `json:"kind"`
	// Edit is the index of the failing edit; Job its job.
	Edit int    `json:"edit"`
	Job  string `json:"job"`
	// Field, Value and Reason describe an invalid spec
	// (schedule.ValidationError's); Reason also says what else was wrong.
	Field  string `json:"field,omitempty"`
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason"`
	// Current is the job's current version, SetBy, SetAt and Source who
	// set it and how, for a conflict.
	Current int64     `json:"current,omitempty"`
	SetBy   string    `json:"set_by,omitempty"`
	SetAt   time.Time `json:"set_at,omitempty"`
	Source  Source    `json:"source,omitempty"`
}

// Errors that callers branch on; a *RefusedError wraps one of them.
var (
	// ErrConflict: the job's version is not the one the writer expected.
	ErrConflict = errors.New("schedule changed since it was read (version conflict)")
	// ErrNotFound: no such job (or no such version, for revert).
	ErrNotFound = errors.New("no such schedule")
	// ErrInvalid: the spec does not validate, or the request is malformed.
	ErrInvalid = errors.New("invalid schedule")
	// ErrTooLarge: the request has more than MaxEdits edits or does not
	// fit in a record.
	ErrTooLarge = errors.New("schedule request too large")
	// ErrNoLeader: no producer answered within the wait; the request may
	// still be applied if one takes over before RequestTTL ends.
	ErrNoLeader = errors.New("no producer leader answered")
)
