package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/redis/go-redis/v9"
)

// Errors callers branch on with errors.Is. Every other error (an
// unreachable Redis, a cancelled context) means the outcome is unknown.
var (
	// ErrFenced is returned by Extend, Complete and Release when the token
	// is not the window's current claim: a newer token has claimed it since,
	// the claim was released, or the record is gone (Forget, Retention).
	// The caller must stop treating the window as its own.
	ErrFenced = errors.New("dedupe: fenced: claim is held by a newer token")
	// ErrAlreadyDone is returned by Complete (and Extend, Release) when the
	// window is done, by this token or any other. The caller acknowledges
	// the window and moves on.
	ErrAlreadyDone = errors.New("dedupe: window already done")
	// ErrNotFound is returned by State when the window has no record.
	ErrNotFound = errors.New("dedupe: no record of window")
	// ErrInvalidID is returned, before any call to Redis, for a window id
	// that is not "<job>@<window>" with a non-empty job.
	ErrInvalidID = errors.New("dedupe: invalid window id")
	// ErrBusy is returned by Settle for a skip or supersede without a token
	// when another claim on the window is live: someone runs it. The
	// caller looks again later (or once that claim expires).
	ErrBusy = errors.New("dedupe: window has a live claim")
)

// Defaults and bounds of Config.
const (
	// DefaultClaimTTL is Config.ClaimTTL when it is zero: a crashed
	// worker's window runs again after at most this long. It was 30s
	// here and 6s in cmd/worker; the binary's value won (issue 15), so a
	// worker built with the library behaves as the binary does.
	DefaultClaimTTL = 6 * time.Second
	// MinClaimTTL is the smallest Config.ClaimTTL New accepts. Production
	// deployments want seconds; the low floor is for tests.
	MinClaimTTL = 100 * time.Millisecond
	// DefaultRetention is Config.Retention when it is zero.
	DefaultRetention = 7 * 24 * time.Hour
)

// maxReasonBytes caps the error text Release stores.
const maxReasonBytes = 4 << 10

// Window statuses reported by State.Status.
const (
	// StatusRunning: the latest token claimed the window and has neither
	// completed nor released it (its claim may have expired: see
	// State.ClaimTTL).
	StatusRunning = "running"
	// StatusFailed: the latest attempt released the window after a failure.
	StatusFailed = "failed"
	// StatusDone: the window completed; it will not run again while the
	// record lasts.
	StatusDone = "done"
	// StatusDeadLettered: the window was dead-lettered (DeadLetter); like
	// done it is settled and will not run again while the record lasts.
	StatusDeadLettered = "dead"
	// StatusSkipped: the window was not run because of its job's overlap
	// policy (skip, or latest keeping only the newest waiting window);
	// LastError holds why. Settled like done.
	StatusSkipped = "skipped"
	// StatusSuperseded: the window was cancelled, or dropped before it
	// started, because a newer window of its job arrived (overlap policy
	// replace); LastError holds why. Settled like done.
	StatusSuperseded = "superseded"
)

// Settled reports whether status is one of the terminal statuses (done,
// dead, skipped, superseded): a window in it is never run again while its
// record lasts, and Claim reports it AlreadyDone.
func Settled(status string) bool {
	switch status {
	case StatusDone, StatusDeadLettered, StatusSkipped, StatusSuperseded:
		return true
	}
	return false
}

// Config configures a Store. The zero value of each duration picks its
// default; Namespace is required.
type Config struct {
	// Namespace isolates one kjob deployment's keys from another's in the
	// same Redis, e.g. "prod". Required; letters, digits, '_', '.', '-'.
	// Every replica of a deployment must use the same one.
	Namespace string
	// ClaimTTL is how long a claim lives without Extend: how long a window
	// whose worker crashed stays Busy before another worker re-runs it.
	// Default 30s, minimum 100ms. Extend well within it (e.g. every
	// ClaimTTL/3).
	ClaimTTL time.Duration
	// Retention is how long a window's record is kept after its last
	// transition, in particular how long a done window is reported
	// AlreadyDone: the replay horizon. A record may be kept up to ClaimTTL
	// longer (a claim keeps it for Retention + ClaimTTL, so completing
	// within the claim need not refresh it). Default 7 days; must be at
	// least ClaimTTL.
	Retention time.Duration
}

// configError is a *configerr.Error about field of Config.
func configError(field string, value any, reason string, related ...string) error {
	return &configerr.Error{Op: "dedupe", Field: field, Value: value, Reason: reason, Related: related}
}

// validate applies defaults and checks every field; an error is a
// *configerr.Error.
func (c *Config) validate() error {
	if c.Namespace == "" {
		return configError("Config.Namespace", nil, `is empty; set it to the deployment's name, e.g. "prod" (letters, digits, '_', '.', '-')`)
	}
	if r, ok := names.ValidNamespace(c.Namespace); !ok {
		return configError("Config.Namespace", c.Namespace, fmt.Sprintf("contains %q; use only letters, digits, '_', '.', '-'", r))
	}
	switch {
	case c.ClaimTTL == 0:
		c.ClaimTTL = DefaultClaimTTL
	case c.ClaimTTL < MinClaimTTL:
		return configError("Config.ClaimTTL", c.ClaimTTL, fmt.Sprintf("is below the minimum %v; set it to at least %v, or 0 for the default %v",
			MinClaimTTL, MinClaimTTL, DefaultClaimTTL))
	}
	switch {
	case c.Retention == 0:
		c.Retention = DefaultRetention
	case c.Retention < c.ClaimTTL:
		return configError("Config.Retention", c.Retention, fmt.Sprintf("is shorter than Config.ClaimTTL = %v; set it to at least ClaimTTL, or 0 for the default %v",
			c.ClaimTTL, DefaultRetention), "Config.ClaimTTL")
	}
	return nil
}

// Store is the idempotency store of one kjob deployment (one Namespace).
// It is safe for concurrent use.
type Store struct {
	rdb       redis.UniversalClient
	cfg       Config
	claimMS   string
	retainMS  string
	holdMS    string // Retention + ClaimTTL: the TTL a claim gives its record
	names     names.Deployment
	keyPrefix string // "kjob:{<ns>:", names.Deployment.JobKeyPrefix

	markerKey string                // the store epoch's marker (epoch.go)
	fence     atomic.Pointer[fence] // nil: no store epoch (epoch.go)

	scripts    atomic.Int32 // scriptsUnknown, scriptsPerJob or scriptsCrossJob (see crossJob)
	helloAfter atomic.Int64 // unix ns before which crossJob does not ask the server again
}

// New returns a Store using client, which may be a single-node, Sentinel or
// Cluster client. It validates cfg (see Config for defaults and bounds;
// a setting it refuses is a *configerr.Error) and does not contact Redis.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, &configerr.Error{Op: "dedupe: New", Field: "client", Reason: "is nil; pass a redis.UniversalClient, e.g. redis.NewClient(opts)"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{
		rdb:       client,
		cfg:       cfg,
		claimMS:   strconv.FormatInt(cfg.ClaimTTL.Milliseconds(), 10),
		retainMS:  strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
		holdMS:    strconv.FormatInt((cfg.Retention + cfg.ClaimTTL).Milliseconds(), 10),
		names:     names.Deployment{Namespace: cfg.Namespace},
		keyPrefix: names.Deployment{Namespace: cfg.Namespace}.JobKeyPrefix(),
		markerKey: names.Deployment{Namespace: cfg.Namespace}.StoreEpochKey(),
	}, nil
}

// ClaimTTL returns how long a claim lives without Extend (Config.ClaimTTL
// after defaults). A worker stops a handler before that long has passed
// since its claim was last proven.
func (s *Store) ClaimTTL() time.Duration { return s.cfg.ClaimTTL }

// Retention returns how long a window's record, and so its done marker, is
// kept (Config.Retention after defaults): the replay horizon.
func (s *Store) Retention() time.Duration { return s.cfg.Retention }

// Outcome is the result of a Claim.
type Outcome int

const (
	// Claimed: the caller holds the window with a new fencing token and
	// must run it, then Complete or Release it.
	Claimed Outcome = iota
	// AlreadyDone: the window is settled: it completed before, or was
	// dead-lettered (State tells which); the caller skips it and
	// acknowledges the record.
	AlreadyDone
	// Busy: another claim is live. The caller must neither run the window
	// nor acknowledge past it; it looks again after Claim.Retry.
	Busy
)

// String returns the constant's name.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "Claimed"
	case AlreadyDone:
		return "AlreadyDone"
	case Busy:
		return "Busy"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Claim is the result of Store.Claim.
type Claim struct {
	// Outcome says what the caller must do.
	Outcome Outcome
	// WindowID is the claimed window's id.
	WindowID string
	// Token is the fencing token: for Claimed the caller's new token; for
	// AlreadyDone the token that completed the window; for Busy the live
	// holder's token.
	Token int64
	// Attempt counts the attempts at this window: including this one for
	// Claimed, the attempts recorded so far otherwise.
	Attempt int
	// Holder is the owner of the live claim (Busy), the caller (Claimed), or
	// the owner that completed the window (AlreadyDone).
	Holder string
	// Retry is, for Busy, the remaining TTL of the live claim: when to look
	// again. Zero otherwise.
	Retry time.Duration
}

// State is a window's record, for status and diagnostics.
type State struct {
	// Status is StatusRunning, StatusFailed, StatusDone or
	// StatusDeadLettered.
	Status string
	// Token is the latest fencing token that claimed the window.
	Token int64
	// Attempts counts the claims of the window.
	Attempts int
	// Holder is the owner of the latest claim (for done: who completed it).
	Holder string
	// UpdatedAt is the Redis server's time of the latest transition.
	UpdatedAt time.Time
	// LastError is the reason given to the latest Release; it is kept after
	// a later attempt succeeds.
	LastError string
	// ClaimTTL is the remaining lifetime of the live claim; 0 when no claim
	// is live.
	ClaimTTL time.Duration
}

// key returns the hash key of window id, "kjob:{<ns>:<job>}:w:<id>"
// (names.Deployment.JobKey(job, "w:"+id), built here in one allocation),
// and the length of its prefix up to and including the hash tag's '}'.
func (s *Store) key(id string) (key string, tag int, err error) {
	job, err := s.jobOf(id)
	if err != nil {
		return "", 0, err
	}
	tag = len(s.keyPrefix) + len(job) + 1
	return s.keyPrefix + job + "}:w:" + id, tag, nil
}

// jobOf returns the job name of window id, the part before its '@', or an
// ErrInvalidID.
func (s *Store) jobOf(id string) (string, error) {
	job, _, ok := strings.Cut(id, "@")
	if !ok {
		return "", fmt.Errorf(`%w %q: no '@'; window ids are "<job>@<window>", e.g. "report@2026-11-22T10:00:00Z"`, ErrInvalidID, id)
	}
	if job == "" {
		return "", fmt.Errorf(`%w %q: empty job name before '@'; window ids are "<job>@<window>"`, ErrInvalidID, id)
	}
	return job, nil
}

// tokenKey returns the token counter key of the job whose window key is
// key (tag as key returns it): "kjob:{<ns>:<job>}:token".
func tokenKey(key string, tag int) string { return key[:tag] + ":token" }

// Claim tries to claim window id for owner, a string naming the caller
// that should be unique per worker process (e.g. host/pid/random).
//
//   - A done window gives AlreadyDone (the caller skips and acknowledges it).
//   - A live claim gives Busy (the caller waits Retry: it neither skips the
//     window nor commits past it).
//   - Otherwise the window gets a new fencing token from the job's counter,
//     its attempt count grows by one, a claim lives for ClaimTTL, and the
//     result is Claimed.
func (s *Store) Claim(ctx context.Context, id, owner string) (Claim, error) {
	w, tag, err := s.key(id)
	if err != nil {
		return Claim{}, fmt.Errorf("claim: %w", err)
	}
	fa, err := s.fenceArgs(s.fence.Load() != nil && s.crossJob(ctx))
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	v, err := claimBatchScript.Run(ctx, s.rdb, []string{tokenKey(w, tag), w}, owner, s.claimMS, s.holdMS, fa[0], fa[1], fa[2]).Result()
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", id, s.fenceError(err))
	}
	var c [1]Claim
	if err := parseClaims(c[:], []string{id}, []int{0}, owner, v); err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	return c[0], nil
}

// Extend keeps the claim of token on window id alive for another ClaimTTL;
// call it periodically while the handler runs. It succeeds as long as token
// is the window's latest claim and the window is neither settled nor
// released, even if the claim had expired (nobody re-claimed, so nobody
// else ran the window); it then re-creates the claim. It returns ErrFenced
// if another token claimed the window since (stop the handler: the window
// is someone else's) and ErrAlreadyDone if the window is settled.
func (s *Store) Extend(ctx context.Context, id string, token int64) error {
	return s.settleOne(ctx, Settlement{ID: id, Op: OpExtend, Token: token})
}

// Complete marks window id done by compare-and-set on token: it succeeds iff
// token is the window's latest claim and the window is neither settled nor
// released, even if the claim expired (as long as nobody re-claimed,
// nobody else ran the window). It records the time, ends the claim and
// keeps the record for Retention. It returns ErrAlreadyDone if the window is
// settled (by anyone; also when retrying a Complete whose reply was lost) and
// ErrFenced if another token has claimed it since.
func (s *Store) Complete(ctx context.Context, id string, token int64) error {
	return s.settleOne(ctx, Settlement{ID: id, Op: OpComplete, Token: token})
}

// Release gives up the claim of token on window id after a failed attempt,
// recording reason (truncated to 4 KiB) as the window's last error. The
// next Claim succeeds at once with a higher token; the attempt count is
// kept. Releasing again with the same token is a no-op. It returns ErrFenced
// if the claim is not token's and ErrAlreadyDone if the window is settled.
func (s *Store) Release(ctx context.Context, id string, token int64, reason string) error {
	return s.settleOne(ctx, Settlement{ID: id, Op: OpRelease, Token: token, Reason: reason})
}

// DeadLetter settles window id for good after its dead letter was written:
// like Release it gives up the claim of token (which may also be the latest
// token of a released window) and records reason, but the window becomes
// StatusDeadLettered, which Claim reports as AlreadyDone, so a redelivered
// record of it is skipped rather than run (and dead-lettered) again. Forget
// makes it runnable again. It returns ErrFenced if token is not the
// window's latest claim and ErrAlreadyDone if the window is already
// settled.
func (s *Store) DeadLetter(ctx context.Context, id string, token int64, reason string) error {
	return s.settleOne(ctx, Settlement{ID: id, Op: OpDeadLetter, Token: token, Reason: reason})
}

// settleOne settles one window (see Settle).
func (s *Store) settleOne(ctx context.Context, st Settlement) error {
	res, err := s.settle(ctx, []Settlement{st}, nil, st.Op.String(), st.Op.String()+" "+st.ID)
	if err != nil {
		return err
	}
	return res[0].Err
}

// Forget deletes window id's record, and with it any live claim, so the
// next Claim runs it again (operators' replay --rerun). The job's token
// counter is kept: the re-run gets a higher token than any earlier attempt,
// and an attempt still running is fenced. Forgetting an unknown window is
// not an error.
func (s *Store) Forget(ctx context.Context, id string) error {
	w, _, err := s.key(id)
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	if err := s.rdb.Del(ctx, w).Err(); err != nil {
		return fmt.Errorf("forget %s: %w", id, err)
	}
	return nil
}

// State returns window id's record, or ErrNotFound if it has none.
func (s *Store) State(ctx context.Context, id string) (State, error) {
	w, _, err := s.key(id)
	if err != nil {
		return State{}, fmt.Errorf("state: %w", err)
	}
	v, err := stateScript.Run(ctx, s.rdb, []string{w}).Slice()
	if errors.Is(err, redis.Nil) {
		return State{}, fmt.Errorf("state %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return State{}, fmt.Errorf("state %s: %w", id, err)
	}
	if len(v) != 7 {
		return State{}, fmt.Errorf("state %s: dedupe: unexpected reply %#v", id, v)
	}
	status, ok0 := v[0].(string)
	tok, ok1 := v[1].(string)
	attempts, ok2 := v[2].(int64)
	holder, ok3 := v[3].(string)
	updated, ok4 := v[4].(int64)
	lastErr, ok5 := v[5].(string)
	left, ok6 := v[6].(int64)
	token, perr := strconv.ParseInt(tok, 10, 64)
	if !(ok0 && ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || perr != nil {
		return State{}, fmt.Errorf("state %s: dedupe: unexpected reply %#v", id, v)
	}
	return State{
		Status:    status,
		Token:     token,
		Attempts:  int(attempts),
		Holder:    holder,
		UpdatedAt: time.UnixMilli(updated),
		LastError: lastErr,
		ClaimTTL:  time.Duration(left) * time.Millisecond,
	}, nil
}

// parseClaims decodes claimBatchScript's reply v for the windows ids[i],
// i in idx, claimed for owner, into out[i].
func parseClaims(out []Claim, ids []string, idx []int, owner string, v any) error {
	a, ok := v.([]any)
	if !ok {
		return fmt.Errorf("dedupe: unexpected reply %#v", v)
	}
	return parseClaimList(out, ids, idx, owner, a)
}

// parseClaimList is parseClaims of a reply known to be a list (a settle
// reply's claim of a Next: boxing that slice again into an interface
// would cost an allocation per window).
func parseClaimList(out []Claim, ids []string, idx []int, owner string, a []any) error {
	if len(a) != len(idx)+1 {
		return fmt.Errorf("dedupe: unexpected reply %#v", a)
	}
	next, ok := a[0].(int64)
	if !ok {
		return fmt.Errorf("dedupe: unexpected reply %#v", a)
	}
	for k, i := range idx {
		c := Claim{WindowID: ids[i]}
		switch r := a[k+1].(type) {
		case int64: // claimed: the attempt number; tokens in order
			c.Outcome, c.Token, c.Attempt, c.Holder = Claimed, next, int(r), owner
			next++
		case string: // "outcome|token|attempts|claim ms left|holder"
			outcome, rest, ok0 := strings.Cut(r, "|")
			tok, rest, ok1 := strings.Cut(rest, "|")
			att, rest, ok2 := strings.Cut(rest, "|")
			left, holder, ok3 := strings.Cut(rest, "|")
			var err [3]error
			c.Token, err[0] = strconv.ParseInt(tok, 10, 64)
			c.Attempt, err[1] = strconv.Atoi(att)
			ms, err2 := strconv.ParseInt(left, 10, 64)
			err[2] = err2
			c.Holder = holder
			switch {
			case !(ok0 && ok1 && ok2 && ok3) || err[0] != nil || err[1] != nil || err[2] != nil:
				return fmt.Errorf("dedupe: unexpected reply %q", r)
			case outcome == "1":
				c.Outcome = AlreadyDone
			case outcome == "2":
				c.Outcome, c.Retry = Busy, time.Duration(ms)*time.Millisecond
			default:
				return fmt.Errorf("dedupe: unexpected reply %q", r)
			}
		default:
			return fmt.Errorf("dedupe: unexpected reply %#v", r)
		}
		out[i] = c
	}
	return nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
