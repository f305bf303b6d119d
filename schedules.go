package kjob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// SchedulesConfig configures a Schedules client. The zero value of every
// field but Brokers is the default.
type SchedulesConfig struct {
	// Brokers are the Kafka seed brokers (host:port). Required.
	Brokers []string
	// KafkaOpts are extra franz-go options for every Kafka client of
	// Schedules: TLS, SASL (see deploy/SECURITY.md). The principal needs
	// Write on the control topic and Read on the control, schedules and
	// schedule log topics, nothing else.
	KafkaOpts []kgo.Opt
	// Namespace names the deployment, as ProducerConfig.Namespace.
	// Default "kjob".
	Namespace string
	// Topic is the deployment's windows topic, which names its control,
	// schedules and schedule log topics, as ProducerConfig.Topic.
	// Default "kjob.windows" for the default namespace, "kjob.<ns>.windows"
	// for any other.
	Topic string
	// Actor is who the changes are recorded under, in the schedule log
	// and on each schedule (Schedule.SetBy). Default: the SASL user of
	// KafkaOpts (PLAIN or SCRAM), or "unauthenticated:<os user>@<host>"
	// without SASL. A service that changes schedules for its own
	// authenticated users (as the dashboard does) sets it to that user.
	// Kafka does not stamp a principal on records: the control topic's
	// Write ACL is what decides who may ask for changes
	// (docs/schedules.md, "Who changed it").
	Actor string
	// Wait bounds how long a change waits for the producer leader's
	// answer before it fails with ErrNoProducer. Default 15s, long enough
	// for leadership to move to a standby; at most 30s, after which a
	// leader drops the request.
	Wait time.Duration
}

// defaultApplyLimit is how many jobs one Apply may create, change or
// delete unless ApplyOptions.MaxJobs allows more: the size the producer
// is measured at (docs/performance.md: 100,000 new jobs committed within
// 10 s). An apply is committed in batches of 1,000 jobs, each all or
// none, so a larger one is also a longer window in which a failure
// leaves it half applied; a quarter million jobs from one call is more
// often a loop gone wrong than a plan.
const defaultApplyLimit = 100_000

// Schedules changes and reads a deployment's jobs at runtime: the
// schedules that live in Kafka (docs/schedules.md). Every change goes to
// the producer leader, which validates it, checks the version it expects,
// and commits the new spec, its change-log record and its answer in one
// transaction; a change applies to the windows after the instant the
// leader committed it, with no restart. Reads (Get, List, History) read
// the schedules topic and the change log directly.
//
// Each change names the version it expects where it can (Update, Delete):
// of two writers that read the same version, one succeeds and the other
// gets an error wrapping ErrScheduleConflict that names the version now
// current and who set it. A refusal changes nothing and is a
// *ScheduleError; no answer within SchedulesConfig.Wait wraps
// ErrNoProducer.
//
// Create it with NewSchedules; it holds no connection between calls and
// is safe for concurrent use.
type Schedules struct {
	c  *specs.Client
	ns string
	// afterRead, if set (by the tests), runs between Apply's read of the
	// schedules topic and its first request: where a concurrent change by
	// another writer lands.
	afterRead func()
}

// NewSchedules validates cfg and returns a Schedules client. It connects
// to nothing. An invalid field is a *ConfigError naming it
// ("SchedulesConfig.Wait"), its value and the fix.
func NewSchedules(cfg SchedulesConfig) (_ *Schedules, err error) {
	defer func() { err = asConfigError(err) }()
	if err := checkBrokers("SchedulesConfig.Brokers", cfg.Brokers); err != nil {
		return nil, err
	}
	bad := func(field string, value any, reason string) error {
		return &configerr.Error{Op: "kjob", Field: "SchedulesConfig." + field, Value: value, Reason: reason}
	}
	d := names.Deployment{Namespace: cfg.Namespace, Topic: cfg.Topic}.WithDefaults()
	if r, ok := names.ValidNamespace(d.Namespace); !ok {
		return nil, bad("Namespace", d.Namespace, fmt.Sprintf("contains %q; use only letters, digits, '_', '.', '-'", r))
	}
	if cfg.Wait < 0 || cfg.Wait > specs.RequestTTL {
		return nil, bad("Wait", cfg.Wait, fmt.Sprintf("is out of range; set at most %v (a leader drops older requests), or 0 for the default %v", specs.RequestTTL, specs.DefaultWait))
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.KafkaOpts...)
	actor := strings.TrimSpace(cfg.Actor)
	if actor == "" && cfg.Actor != "" {
		return nil, bad("Actor", cfg.Actor, "is blank; name who the changes are recorded under, or leave it empty for the SASL user")
	}
	if actor == "" {
		if actor, err = saslActor(opts); err != nil {
			return nil, bad("Actor", nil, "is empty and "+err.Error())
		}
	}
	if i := strings.IndexFunc(actor, isControl); i >= 0 {
		return nil, bad("Actor", actor, fmt.Sprintf("contains the control character %q; use a printable name", actor[i]))
	}
	c, err := specs.NewClient(specs.ClientConfig{Opts: opts, Deployment: d, Actor: actor, Source: specs.Source{Kind: specs.SourceAPI}, Wait: cfg.Wait})
	if err != nil {
		return nil, err
	}
	return &Schedules{c: c, ns: d.Namespace}, nil
}

// saslActor returns the SASL user the options authenticate as, or the
// unauthenticated default when they configure no SASL. The user is read
// from the mechanism's first message, which PLAIN and SCRAM build
// locally (no broker is contacted).
func saslActor(opts []kgo.Opt) (string, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", fmt.Errorf("the Kafka options are refused: %v", err)
	}
	defer cl.Close()
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(mechs) == 0 {
		return specs.DefaultActor(), nil
	}
	m := mechs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, first, err := m.Authenticate(ctx, "")
	if err != nil {
		return "", fmt.Errorf("SASL %s gave no user (%v); set it to the SASL principal", m.Name(), err)
	}
	var user string
	switch name := m.Name(); {
	case name == "PLAIN": // authzid NUL user NUL password
		if p := strings.Split(string(first), "\x00"); len(p) == 3 {
			user = p[1]
		}
	case strings.HasPrefix(name, "SCRAM-"): // gs2 header, "n=user,r=nonce"
		for _, f := range strings.Split(string(first), ",") {
			if u, ok := strings.CutPrefix(f, "n="); ok {
				user = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(u)
				break
			}
		}
	default:
		return "", fmt.Errorf("SASL %s does not say its user; set it to the principal the brokers authenticate", name)
	}
	if user == "" {
		return "", fmt.Errorf("SASL %s gave no user; set it to the SASL principal", m.Name())
	}
	return user, nil
}

// Errors a caller branches on with errors.Is. A leader's refusal is also a
// *ScheduleError with the details.
var (
	// ErrScheduleConflict: the job's version is not the one the change
	// expected (another writer changed it since it was read), or Create
	// named a job that exists. Read it again, then decide.
	ErrScheduleConflict = specs.ErrConflict
	// ErrScheduleNotFound: no such job (or, for Revert, no such version).
	ErrScheduleNotFound = specs.ErrNotFound
	// ErrScheduleInvalid: the spec or job name does not validate, exactly
	// as a schedules file's entry would not.
	ErrScheduleInvalid = specs.ErrInvalid
	// ErrScheduleTooLarge: an Apply of more jobs than its limit, or a
	// change too large for one request.
	ErrScheduleTooLarge = specs.ErrTooLarge
	// ErrNoProducer: no producer leader answered within
	// SchedulesConfig.Wait. The change may still be applied if a leader
	// takes over within 30s of the request: Get tells.
	ErrNoProducer = specs.ErrNoLeader
)

// ScheduleError is a change that was refused, by the producer leader or
// before it was sent: nothing was changed. It wraps ErrScheduleConflict,
// ErrScheduleNotFound, ErrScheduleInvalid or ErrScheduleTooLarge. Its text
// names the job and, for a conflict, the version now current, who set it,
// through what and when:
//
//	schedule "tenant-4711": version conflict: expected version 3, it is at
//	version 4, set by alice through the dashboard at 2026-11-28T05:12:00Z;
//	read it again, then decide
type ScheduleError struct {
	// Job is the job of the refused change.
	Job string
	// Field and Value name the invalid field of the spec and its value
	// as written ("timezone", "Europe/Berln"), when one is to blame.
	Field, Value string
	// Reason says what is wrong and how to fix it.
	Reason string
	// Current is the job's version now (0: it does not exist), SetBy and
	// SetAt who set it and when, and Source through what ("api", "cli",
	// "dashboard" or "file:<path>"), for a conflict.
	Current int64
	SetBy   string
	SetAt   time.Time
	Source  string

	err error
}

// Error returns the refusal's full text.
func (e *ScheduleError) Error() string { return e.err.Error() }

// Unwrap returns the refusal, which matches its Err* sentinel.
func (e *ScheduleError) Unwrap() error { return e.err }

func scheduleError(r *specs.RefusedError) *ScheduleError {
	return &ScheduleError{Job: r.Job, Field: r.Field, Value: r.Value, Reason: r.Reason,
		Current: r.Current, SetBy: r.SetBy, SetAt: r.SetAt, Source: sourceName(r.Source), err: r}
}

// refusal turns a leader's refusal into a *ScheduleError; other errors
// pass as they are.
func refusal(err error) error {
	var r *specs.RefusedError
	if errors.As(err, &r) {
		return scheduleError(r)
	}
	return err
}

func invalid(job, field, value, reason string) error {
	return scheduleError(&specs.RefusedError{Expected: -1, Refusal: specs.Refusal{Kind: specs.RefusedInvalid, Job: job, Field: field, Value: value, Reason: reason}})
}

func sourceName(s specs.Source) string {
	if s.Kind == specs.SourceFile {
		return "file:" + s.File
	}
	return s.Kind
}

// Schedule is one job as the schedules topic holds it now.
type Schedule struct {
	// Spec is the job as written.
	Spec schedule.Spec
	// Version is the job's version: 1 when created, +1 per change.
	Version int64
	// Paused says an operator paused the job (Pause), PauseNote why.
	Paused    bool
	PauseNote string
	// SetBy is the actor of the change that set this version, Source
	// what it came through ("api", "cli", "dashboard" or "file:<path>"),
	// Note the note given with it, SetAt when the leader committed it.
	SetBy  string
	Source string
	Note   string
	SetAt  time.Time
	// EffectiveFrom is the instant this version applies from: its windows
	// start strictly after it.
	EffectiveFrom time.Time
}

func scheduleOf(r *specs.Record) Schedule {
	s := Schedule{Spec: r.Spec, Version: r.Version, SetBy: r.SetBy, Source: sourceName(r.Source), Note: r.Note, SetAt: r.SetAt, EffectiveFrom: r.EffectiveFrom}
	if r.Paused != nil {
		s.Paused, s.PauseNote = true, r.Paused.Note
	}
	return s
}

// ScheduleChange is one committed change of one job, from the change log,
// which keeps every version (it is never compacted).
type ScheduleChange struct {
	Job string
	// Op is "create", "update", "put" (created or updated by Apply or a
	// file), "delete", "pause", "resume" or "revert".
	Op string
	// VersionBefore is 0 for a job that did not exist; VersionAfter is
	// the version the change set.
	VersionBefore, VersionAfter int64
	// Actor asked for the change, through Source ("api", "cli",
	// "dashboard" or "file:<path>"), with Note; the leader committed it
	// At.
	Actor  string
	Source string
	Note   string
	At     time.Time
	// Diff lists the fields the change changed.
	Diff []ScheduleDiff
	// Spec is the job's spec after the change (nil after a delete), and
	// Paused whether it was paused: what Revert goes back to.
	Spec   *schedule.Spec
	Paused bool
}

// ScheduleDiff is one changed field of a ScheduleChange, named by its
// schedules-file key ("schedule", "retries.max_attempts", "paused"),
// with its values as written ("" when absent).
type ScheduleDiff struct {
	Field, Before, After string
}

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// Prune deletes the jobs that are not in the list.
	Prune bool
	// Note is recorded with every change of the apply.
	Note string
	// MaxJobs bounds how many jobs the apply may create, change or
	// delete. Default 100,000; set it higher for a larger apply.
	MaxJobs int
}

// ApplyResult says what an Apply did, each list sorted by job name.
type ApplyResult struct {
	Created, Updated, Deleted, Unchanged []string
}

// checkJobName refuses a job name that no spec can have, before anything
// is sent, with schedule's own rule and words (schedule.CheckName).
func checkJobName(job string) error {
	err := schedule.CheckName(job)
	var ve *schedule.ValidationError
	if errors.As(err, &ve) {
		return invalid(job, "name", job, ve.Msg)
	}
	return err
}

// checkSpec validates spec exactly as a schedules file's entry is
// validated (schedule.Spec.Job), so a spec the producer would refuse is
// refused here, before anything is sent. The error is a *ScheduleError
// wrapping ErrScheduleInvalid with the first problem's field and value;
// its reason lists the others.
func checkSpec(spec schedule.Spec) error {
	if err := checkJobName(spec.Name); err != nil {
		return err
	}
	_, err := spec.Job("spec")
	if err == nil {
		return nil
	}
	var all []*schedule.ValidationError
	var walk func(error)
	walk = func(e error) {
		var ve *schedule.ValidationError
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
		} else if errors.As(e, &ve) {
			all = append(all, ve)
		}
	}
	walk(err)
	if len(all) == 0 {
		return invalid(spec.Name, "", "", err.Error())
	}
	reason := all[0].Msg
	for _, v := range all[1:] {
		reason += fmt.Sprintf("; also %s: %s", cmpOr(v.Field, "spec"), v.Msg)
	}
	return invalid(spec.Name, all[0].Field, all[0].Value, reason)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func checkExpect(job string, v int64) (*int64, error) {
	switch {
	case v < 0:
		return nil, invalid(job, "", "", fmt.Sprintf("expected version %d is negative; pass the Version you read, or 0 to change whatever version is current", v))
	case v == 0:
		return nil, nil
	}
	return &v, nil
}

// submit sends one edit and returns the version it gave the job.
func (s *Schedules) submit(ctx context.Context, e specs.Edit, note string) (int64, error) {
	res, err := s.c.Submit(ctx, []specs.Edit{e}, note)
	if err != nil {
		return 0, refusal(err)
	}
	if len(res.Applied) != 1 {
		return 0, fmt.Errorf("schedule %q: the producer answered request %s with %d changes for 1 edit", e.Job, res.RequestID, len(res.Applied))
	}
	return res.Applied[0].VersionAfter, nil
}

// Create adds a job, validated as a schedules file's entry is, and
// returns its version (1, or the next after the versions of a deleted job
// of that name). A job of that name that exists is a conflict.
func (s *Schedules) Create(ctx context.Context, spec schedule.Spec, note string) (int64, error) {
	if err := checkSpec(spec); err != nil {
		return 0, err
	}
	zero := int64(0)
	return s.submit(ctx, specs.Edit{Op: specs.OpCreate, Job: spec.Name, Spec: &spec, ExpectVersion: &zero}, note)
}

// Update replaces an existing job's spec and returns its new version. Pass
// the Version you read (Get) as expectVersion to make it conditional: if
// another writer changed the job since, nothing changes and the error
// wraps ErrScheduleConflict. 0 updates whatever version is current.
func (s *Schedules) Update(ctx context.Context, spec schedule.Spec, expectVersion int64, note string) (int64, error) {
	if err := checkSpec(spec); err != nil {
		return 0, err
	}
	ev, err := checkExpect(spec.Name, expectVersion)
	if err != nil {
		return 0, err
	}
	return s.submit(ctx, specs.Edit{Op: specs.OpUpdate, Job: spec.Name, Spec: &spec, ExpectVersion: ev}, note)
}

// Delete removes a job: none of its windows is published after the
// instant the leader commits it. It returns the version the delete gave
// the job (a job re-created later continues from it). expectVersion is as
// for Update.
func (s *Schedules) Delete(ctx context.Context, job string, expectVersion int64, note string) (int64, error) {
	if err := checkJobName(job); err != nil {
		return 0, err
	}
	ev, err := checkExpect(job, expectVersion)
	if err != nil {
		return 0, err
	}
	return s.submit(ctx, specs.Edit{Op: specs.OpDelete, Job: job, ExpectVersion: ev}, note)
}

// Pause stops a job's windows from the instant the leader commits it,
// with note saying why, as a new version.
func (s *Schedules) Pause(ctx context.Context, job, note string) (int64, error) {
	if err := checkJobName(job); err != nil {
		return 0, err
	}
	return s.submit(ctx, specs.Edit{Op: specs.OpPause, Job: job, Note: note}, note)
}

// Resume restarts a paused job from its next window after the instant the
// leader commits it (the paused windows are not caught up), as a new
// version.
func (s *Schedules) Resume(ctx context.Context, job, note string) (int64, error) {
	if err := checkJobName(job); err != nil {
		return 0, err
	}
	return s.submit(ctx, specs.Edit{Op: specs.OpResume, Job: job}, note)
}

// Revert sets the spec the job had at toVersion (from the change log) as
// a new version, which it returns. An unknown version wraps
// ErrScheduleNotFound.
func (s *Schedules) Revert(ctx context.Context, job string, toVersion int64, note string) (int64, error) {
	if err := checkJobName(job); err != nil {
		return 0, err
	}
	if toVersion < 1 {
		return 0, invalid(job, "", "", fmt.Sprintf("version %d to revert to: versions start at 1; see History", toVersion))
	}
	return s.submit(ctx, specs.Edit{Op: specs.OpRevert, Job: job, ToVersion: toVersion}, note)
}

// Get returns a job's current schedule; an error wraps
// ErrScheduleNotFound if there is none.
func (s *Schedules) Get(ctx context.Context, job string) (Schedule, error) {
	if err := checkJobName(job); err != nil {
		return Schedule{}, err
	}
	r, err := s.c.Get(ctx, job)
	if err != nil {
		return Schedule{}, err
	}
	return scheduleOf(r), nil
}

// List returns every job's current schedule, sorted by name. It reads the
// whole schedules topic.
func (s *Schedules) List(ctx context.Context) ([]Schedule, error) {
	snap, err := s.c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(snap.Jobs))
	for _, n := range snap.Names() {
		out = append(out, scheduleOf(snap.Jobs[n]))
	}
	return out, nil
}

// History returns a job's committed changes, oldest first; job "" returns
// every job's. A job that never existed has none (and no error).
func (s *Schedules) History(ctx context.Context, job string) ([]ScheduleChange, error) {
	if job != "" {
		if err := checkJobName(job); err != nil {
			return nil, err
		}
	}
	chs, err := s.c.History(ctx, job)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleChange, 0, len(chs))
	for _, c := range chs {
		sc := ScheduleChange{Job: c.Job, Op: string(c.Op), VersionBefore: c.VersionBefore, VersionAfter: c.VersionAfter,
			Actor: c.Actor, Source: sourceName(c.Source), Note: c.Note, At: c.At, Spec: c.Spec, Paused: c.Paused != nil}
		for _, d := range c.Diff {
			sc.Diff = append(sc.Diff, ScheduleDiff{Field: d.Field, Before: d.Before, After: d.After})
		}
		out = append(out, sc)
	}
	return out, nil
}

// Apply makes the deployment's jobs what list says: it creates the jobs
// that do not exist, updates those whose spec differs, leaves the others
// unchanged and, with opts.Prune, deletes the jobs not in list. Every spec
// is validated first: one invalid spec, or a name given twice, refuses the
// whole apply before anything is sent.
//
// Each change expects the version Apply read, so a job another writer
// changed meanwhile is a conflict, not overwritten. The changes are
// committed in batches of up to 1,000 jobs, in list order (deletes last),
// each batch all or none: an error returns what the batches before it
// did. More than opts.MaxJobs changes (default 100,000) is refused before
// anything is sent, with an error wrapping ErrScheduleTooLarge.
func (s *Schedules) Apply(ctx context.Context, list []schedule.Spec, opts ApplyOptions) (ApplyResult, error) {
	limit := opts.MaxJobs
	if limit <= 0 {
		limit = defaultApplyLimit
	}
	tooLarge := func(n int) error {
		return fmt.Errorf("apply of %d jobs refused before anything was sent: more than ApplyOptions.MaxJobs (%d; default %d); split it, or raise MaxJobs if you mean it: %w",
			n, limit, defaultApplyLimit, ErrScheduleTooLarge)
	}
	if len(list) > limit {
		return ApplyResult{}, tooLarge(len(list))
	}
	seen := make(map[string]int, len(list))
	for i, sp := range list {
		if err := checkSpec(sp); err != nil {
			return ApplyResult{}, fmt.Errorf("apply: spec %d of %d: %w", i+1, len(list), err)
		}
		if j, dup := seen[sp.Name]; dup {
			return ApplyResult{}, fmt.Errorf("apply: spec %d of %d: %w", i+1, len(list),
				invalid(sp.Name, "name", sp.Name, fmt.Sprintf("given twice (specs %d and %d); each job once", j+1, i+1)))
		}
		seen[sp.Name] = i
	}
	snap, err := s.c.Snapshot(ctx)
	if err != nil {
		return ApplyResult{}, err
	}
	var res ApplyResult
	var edits []specs.Edit
	for i := range list {
		sp := list[i]
		cur, ok := snap.Jobs[sp.Name]
		if ok && sameSpec(&cur.Spec, &sp) {
			res.Unchanged = append(res.Unchanged, sp.Name)
			continue
		}
		ev := int64(0)
		if ok {
			ev = cur.Version
		}
		edits = append(edits, specs.Edit{Op: specs.OpPut, Job: sp.Name, Spec: &sp, ExpectVersion: &ev})
	}
	if opts.Prune {
		for _, n := range snap.Names() {
			if _, keep := seen[n]; !keep {
				v := snap.Jobs[n].Version
				edits = append(edits, specs.Edit{Op: specs.OpDelete, Job: n, ExpectVersion: &v})
			}
		}
	}
	if len(edits) > limit {
		return ApplyResult{}, tooLarge(len(edits))
	}
	if s.afterRead != nil {
		s.afterRead()
	}
	results, err := s.c.SubmitAll(ctx, edits, opts.Note)
	for _, r := range results {
		for _, a := range r.Applied {
			switch {
			case a.Unchanged:
				res.Unchanged = append(res.Unchanged, a.Job)
			case a.Op == specs.OpDelete:
				res.Deleted = append(res.Deleted, a.Job)
			case a.VersionBefore == 0 || snap.Jobs[a.Job] == nil:
				res.Created = append(res.Created, a.Job)
			default:
				res.Updated = append(res.Updated, a.Job)
			}
		}
	}
	for _, l := range []*[]string{&res.Created, &res.Updated, &res.Deleted, &res.Unchanged} {
		slices.Sort(*l)
	}
	if err != nil {
		return res, fmt.Errorf("apply: %d of %d changes committed, the rest not: %w", len(res.Created)+len(res.Updated)+len(res.Deleted), len(edits), refusal(err))
	}
	return res, nil
}

// sameSpec reports whether two specs say the same, field by field as
// written (a payload compared as compact JSON).
func sameSpec(a, b *schedule.Spec) bool {
	return maps.Equal(specs.Flatten(a, nil), specs.Flatten(b, nil))
}
