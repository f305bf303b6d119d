package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/keepalive"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/exec/worker/internal/lanes"
	machine "github.com/kjob/kjob/internal/exec/worker/internal/window"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/topic"
)

// Store is what the worker needs from the idempotency store; *dedupe.Store
// implements it. See internal/store/dedupe for the semantics of each call.
type Store interface {
	// ClaimBatch claims every window of ids for owner, in one round trip:
	// Claimed (run it), AlreadyDone (skip it) or Busy (another claim is
	// live: wait).
	ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error)
	// Settle applies a batch of transitions in one round trip: extend,
	// complete (compare-and-set on the token), release, dead-letter,
	// unclaim, and the skip and supersede of overlap policies. Per window
	// it answers nil, dedupe.ErrAlreadyDone, dedupe.ErrFenced or
	// dedupe.ErrBusy, and the claim of a completion's Next (the next
	// window of a queue lane, claimed in the same step when the
	// completion succeeds). runs are appended to the jobs' run history in
	// the same round trip (best effort).
	Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error)
	// ClaimTTL is how long a claim lives without an extend. A running
	// handler is stopped before that long has passed since its claim was
	// last proven (see Config.ClaimExtendInterval).
	ClaimTTL() time.Duration
	// Retention is how long a settled window is remembered (reported
	// AlreadyDone): the replay horizon. A record older than that is
	// dead-lettered rather than run (see the package doc).
	Retention() time.Duration
}

// ErrClaimUnproven is the cause (context.Cause) of a handler's context
// cancelled because its claim could no longer be proven: no Extend
// succeeded for so long that the claim could expire in the store before
// the next one. The attempt's result is discarded and the window is
// claimed again (with a higher fencing token) once the store answers.
var ErrClaimUnproven = errors.New("worker: claim can no longer be proven (the idempotency store did not answer in time)")

// ErrSuperseded is the cause (context.Cause) of a handler's context
// cancelled because a newer window of its job arrived and the job's
// overlap policy is replace: the window is settled as superseded and not
// retried, and the newer window runs once this handler has returned (or
// was abandoned after Config.Grace).
var ErrSuperseded = errors.New("worker: superseded by a newer window of the job (overlap policy replace)")

// ErrForeignNamespace is the error (Execution.Err, wrapped) of a window
// dead-lettered because another deployment published it: its record's
// namespace is not Config.Namespace. The window is never claimed in the
// store nor run; the dead letter's reason names both namespaces.
var ErrForeignNamespace = errors.New("worker: window of another deployment")

// ErrBeyondHorizon is the error (Execution.Err) of a window dead-lettered
// instead of run because its record is older than the store's Retention:
// its done marker may have expired, so whether it already ran is unknown.
var ErrBeyondHorizon = errors.New("worker: record older than the replay horizon")

// ErrAttemptsExhausted is the error (Execution.Err) of a window
// dead-lettered instead of run because its earlier attempts, interrupted
// ones included, used up its max_attempts.
var ErrAttemptsExhausted = errors.New("worker: max_attempts used up")

// Defaults of the zero values of Config fields.
const (
	// DefaultTopic is Config.Topic when it is empty and Namespace is the
	// default one (names.DefaultTopic); another namespace's is
	// names.DefaultTopicOf(Namespace).
	DefaultTopic = names.DefaultTopic
	// DefaultGroup is Config.Group when it is empty and Namespace is the
	// default one (names.DefaultGroup); another namespace's is
	// names.DefaultGroupOf(Namespace).
	DefaultGroup = names.DefaultGroup
	// DefaultConcurrency is Config.Concurrency when it is zero.
	DefaultConcurrency = 100
	// AllowShare sets the default limit of a job whose overlap policy is
	// allow and whose windows carry no max_concurrent: it may hold
	// Concurrency/AllowShare slots at once (at least 1), a quarter of the
	// worker, so that a slow job with many windows leaves the other jobs
	// three quarters of the slots.
	AllowShare = 4
)

// Execution outcomes reported in Execution.Outcome.
const (
	// OutcomeDone: the handler succeeded and the window is marked done.
	OutcomeDone = "done"
	// OutcomeFailed: the attempt failed; the window is retried after a
	// backoff (or the partition was revoked mid-attempt, and the next
	// owner retries it).
	OutcomeFailed = "failed"
	// OutcomeSkippedDone: the window was already done; the record was
	// acknowledged without running it.
	OutcomeSkippedDone = "skipped-done"
	// OutcomeDeadLettered: the window was written to the dead-letter
	// topic: it could not be decoded (Attempt 0), failed permanently, or
	// used up its attempts.
	OutcomeDeadLettered = "dead-lettered"
	// OutcomeFenced: the claim was taken over by a newer token while the
	// attempt ran, or its Complete was refused; the attempt's result was
	// discarded.
	OutcomeFenced = "fenced"
	// OutcomeAbandoned: the handler ignored its cancelled context for
	// Grace and was left running; the attempt counts as failed (retried,
	// or dead-lettered on the last attempt).
	OutcomeAbandoned = "abandoned"
	// OutcomeSkipped: the window was not run because of its job's
	// overlap policy (skip: an earlier window of the job was still
	// running; latest: a newer window arrived while it waited). It is
	// settled as skipped in the store, with the reason in Execution.Err.
	OutcomeSkipped = "skipped"
	// OutcomeSuperseded: a newer window of the job replaced this one
	// (overlap policy replace): it was cancelled with cause ErrSuperseded,
	// or dropped before it started, and is settled as superseded, not
	// retried.
	OutcomeSuperseded = "superseded"
	// OutcomeSteppedDown: the attempt's claim could no longer be proven
	// (the store did not answer its extensions) before it could expire, so
	// the handler's context was cancelled with ErrClaimUnproven (or the
	// handler was not started); the result was discarded, and the window
	// is claimed again, with a higher fencing token, once the store
	// answers.
	OutcomeSteppedDown = "stepped-down"
)

// Store-call retries: capped exponential backoff.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
	// storeCallTimeout bounds one store call.
	storeCallTimeout = 5 * time.Second
	// settleRetryTimeout bounds the store calls that record results after
	// the partition's context ended (a revoke past its grace, a loss): one
	// try each.
	settleRetryTimeout = 5 * time.Second
	// busyMin and busyMax bound the wait before claiming a Busy window
	// again.
	busyMin = 20 * time.Millisecond
	busyMax = time.Second
)

// Config configures a Worker. Zero values pick the documented defaults;
// Brokers, Store, Handler and WorkerID are required.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// ClientOpts are extra Kafka client options (TLS, SASL, logging).
	ClientOpts []kgo.Opt
	// Namespace names the deployment (names.Deployment): the worker runs
	// only windows whose record carries this namespace, or none (a record
	// from before records carried one, run with a warning), and
	// dead-letters any other deployment's (ErrForeignNamespace). Default
	// "kjob" (names.DefaultNamespace).
	Namespace string
	// Topic is the windows topic. Default the namespace's:
	// "kjob.windows" for the default namespace, "kjob.<ns>.windows" for
	// any other (names.DefaultTopicOf).
	Topic string
	// Group is the consumer group of the workers. Default the
	// namespace's: "kjob-workers" for the default namespace,
	// "kjob-workers-<ns>" for any other (names.DefaultGroupOf).
	Group string
	// DeadLetterTopic receives windows that cannot run. Default Topic +
	// ".dlq" (names.Deployment.DeadLetterTopic). Run creates it if missing
	// (1 partition).
	DeadLetterTopic string
	// ReplicationFactor is the dead-letter topic's replication factor when
	// Run creates it. Default 1.
	ReplicationFactor int16
	// Store is the idempotency store, usually a *dedupe.Store. Required.
	Store Store
	// Handler runs windows, usually a *handler.Mux. Required. Panics are
	// turned into failed attempts.
	Handler handler.Handler
	// WorkerID identifies this process, unique per process (e.g.
	// hostname-pid): the claim owner and the group member's client id.
	// Required.
	WorkerID string
	// Grace is how long a revoked partition's in-flight windows may keep
	// running, and how long a handler whose context was cancelled (timeout,
	// revoke, loss, replace) is waited for before it is abandoned. Default
	// 10s (partition.DefaultGrace).
	Grace time.Duration
	// Concurrency is how many windows may run at once across the
	// partitions this worker owns. Windows of different jobs run
	// concurrently; windows of one job follow its overlap policy (the
	// default, queue, runs them one at a time in window order). A free
	// slot goes to the partitions in turn, so a backlog on one partition
	// does not starve the others; within a partition it goes to the job
	// holding the fewest slots, so a backlog of one job does not starve
	// the others. A job whose overlap policy is allow holds at most its
	// max_concurrent slots (from the schedules file), or Concurrency /
	// AllowShare (at least 1) when it sets none: its other windows wait,
	// and the other jobs get the remaining slots. 1 runs one window at a
	// time. Default 100.
	Concurrency int
	// StallAfter is how long settling a partition's oldest unsettled
	// record may keep failing (its dead letter refused or not produced,
	// the store not answering) before the partition is reported stalled
	// (Stalled). Default 30s.
	StallAfter time.Duration
	// MaxUncommitted bounds, per partition, the records fetched and not
	// yet committed (from the first unsettled record on); past it fetching
	// the partition pauses. A crash re-delivers at most this many records
	// plus one fetch (they are skipped as done if they were). Default
	// 10,000 (partition.DefaultMaxUncommitted).
	MaxUncommitted int
	// ClaimExtendInterval is how often a running handler's claim is
	// extended. Default Store.ClaimTTL()/3; it must be less than
	// ClaimTTL/2.
	//
	// A claim is proven by the last Claim or Extend that succeeded, from
	// when that call started. The handler's context is cancelled (cause
	// ErrClaimUnproven) at that instant + ClaimTTL - margin, where margin
	// = max(ClaimExtendInterval, ClaimTTL/5): strictly before the claim can
	// expire and another worker can claim the window. So a store outage
	// stops the running handlers after ClaimTTL - margin -
	// ClaimExtendInterval to ClaimTTL - margin (2s to 4s with a 6s
	// ClaimTTL and the default interval); their windows run again, with
	// higher fencing tokens, once the store is back.
	ClaimExtendInterval time.Duration
	// SessionTimeout is the consumer group session timeout; see
	// partition.Config. Default 6s.
	SessionTimeout time.Duration
	// HeartbeatInterval is the consumer group heartbeat interval; see
	// partition.Config. Default 1s.
	HeartbeatInterval time.Duration
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for lateness, dead-letter timestamps and the
	// replay horizon (record ages). Default time.Now. Claim deadlines use
	// the monotonic clock, not this.
	Now func() time.Time
	// Verify, if set, checks each record before it is decoded, e.g.
	// (*signing.Verifier).Verify. A record it refuses is dead-lettered
	// with the error as reason and never runs.
	Verify func(*kgo.Record) error
	// OnExecuted, if set, is called after every attempt and every record
	// settled without one (skipped as done, skipped or superseded by its
	// overlap policy, dead-lettered) (metrics, tests, demos): once per
	// attempt, except that an abandoned last attempt reports "abandoned"
	// and then "dead-lettered". It runs on the partition's goroutine: keep
	// it fast.
	OnExecuted func(Execution)
	// OnAttempt, if set, is called before each handler attempt with the
	// handler's context (bounded by the window's timeout), the record, and
	// the job's name, the window's id, the attempt number and the claim's
	// fencing token (plain values, so that a hook depends on no handler
	// API); the handler runs with the context it returns, and the
	// returned function is called with the attempt's result (nil on
	// success) when the attempt ends. For tracing (see internal/obs/tracing): the
	// returned context must keep ctx's deadline and cancellation.
	OnAttempt func(ctx context.Context, rec *kgo.Record, job, window string, attempt int, token int64) (context.Context, func(error))
}

// Execution describes one attempt at a window, or a record settled without
// an attempt (skipped-done, or dead-lettered because it could not be
// decoded).
type Execution struct {
	// WindowID is the window id; empty for an undecodable record.
	WindowID string
	// Job is the job name; empty for an undecodable record.
	Job string
	// Partition and Offset locate the record.
	Partition int32
	// Offset is the record's offset.
	Offset int64
	// Attempt is the attempt number (from the claim); 0 if none ran.
	Attempt int
	// Token is the claim's fencing token; 0 if none.
	Token int64
	// Outcome is one of the Outcome constants.
	Outcome string
	// Err is the attempt's error, or why the record was dead-lettered.
	Err error
	// Started and Finished bound the attempt (equal when none ran).
	Started, Finished time.Time
	// ScheduledAt and PublishedAt are copied from the window's message.
	ScheduledAt, PublishedAt time.Time
}

// DefaultClaimExtendFor is the default claim extend interval for claims
// that live ttl: ttl/3.
func DefaultClaimExtendFor(ttl time.Duration) time.Duration { return ttl / 3 }

// configError is a *configerr.Error about field of Config.
func configError(field string, value any, reason string) error {
	return &configerr.Error{Op: "worker", Field: field, Value: value, Reason: reason}
}

// validate applies the defaults and checks every field; an error is a
// *configerr.Error.
func (c *Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return configError("Config.Brokers", nil, `is empty; set at least one seed broker, e.g. "localhost:9092"`)
	case c.Store == nil:
		return configError("Config.Store", nil, "is nil; set it to a *dedupe.Store (dedupe.New)")
	case c.Handler == nil:
		return configError("Config.Handler", nil, "is nil; set it to a *handler.Mux with the job handlers registered")
	case c.WorkerID == "":
		return configError("Config.WorkerID", nil, `is empty; set a per-process unique id, e.g. hostname + "-" + pid`)
	case c.ReplicationFactor < 0:
		return configError("Config.ReplicationFactor", c.ReplicationFactor, "is negative; set it to the dead-letter topic's replica count, or 0 for 1")
	case c.Concurrency < 0:
		return configError("Config.Concurrency", c.Concurrency, fmt.Sprintf("is negative; set how many windows may run at once (1 for one at a time), or 0 for %d", DefaultConcurrency))
	}
	// MaxUncommitted, Grace, SessionTimeout and HeartbeatInterval go to
	// partition.New, which checks them.
	for _, d := range []struct {
		name string
		v    time.Duration
		def  time.Duration
	}{
		{"ClaimExtendInterval", c.ClaimExtendInterval, c.Store.ClaimTTL() / 3},
		{"StallAfter", c.StallAfter, DefaultStallAfter},
	} {
		if d.v < 0 {
			return configError("Config."+d.name, d.v, fmt.Sprintf("is negative; set a positive duration, or 0 for the default %v", d.def))
		}
	}
	if c.Namespace == "" {
		c.Namespace = names.DefaultNamespace
	}
	if bad, ok := names.ValidNamespace(c.Namespace); !ok {
		return configError("Config.Namespace", c.Namespace, fmt.Sprintf("has %q; use letters, digits, '_', '.' and '-'", bad))
	}
	if c.Topic == "" {
		c.Topic = names.DefaultTopicOf(c.Namespace)
	}
	if c.Group == "" {
		c.Group = names.DefaultGroupOf(c.Namespace)
	}
	dlq := names.Deployment{Topic: c.Topic}.DeadLetterTopic()
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = dlq
	}
	if c.DeadLetterTopic == c.Topic {
		return configError("Config.DeadLetterTopic", c.DeadLetterTopic, fmt.Sprintf("is the windows topic; set another topic, or leave it empty for %q", dlq))
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if c.Grace == 0 {
		c.Grace = partition.DefaultGrace
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.StallAfter == 0 {
		c.StallAfter = DefaultStallAfter
	}
	if c.MaxUncommitted == 0 {
		c.MaxUncommitted = partition.DefaultMaxUncommitted
	}
	ttl := c.Store.ClaimTTL()
	if ttl <= 0 {
		return configError("Config.Store.ClaimTTL()", ttl, "is not positive; the store must report how long its claims live (dedupe.Config.ClaimTTL)")
	}
	if c.ClaimExtendInterval == 0 {
		c.ClaimExtendInterval = DefaultClaimExtendFor(ttl)
	}
	// ClaimExtendInterval < ClaimTTL/2 is checked by keepalive.NewPolicy
	// (New), the primitive that relies on it.
	if r := c.Store.Retention(); r < ttl {
		return configError("Config.Store.Retention()", r, fmt.Sprintf("is shorter than its ClaimTTL() = %v; the store must remember done windows longer than a claim lives (dedupe.Config.Retention)", ttl))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Worker executes job windows from the windows topic, once per window across
// all workers of the group. Create it with New and call Run once.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	h        handler.Handler
	consumer *partition.Consumer
	slots    *lanes.Slots
	ran      atomic.Bool

	storeDown atomic.Bool  // a store outage is being logged
	stalls    stalls       // what keeps partitions from moving (Stalled)
	running   atomic.Int64 // handler goroutines still running (incl. abandoned)
	inFlight  atomic.Int64 // attempts running (not abandoned)

	unlabelled  atomic.Int64 // windows run whose record carries no namespace
	waitingSlot atomic.Int64 // windows of the owned partitions waiting for a slot
	allowLimit  int          // the slots an allow job without max_concurrent may hold

	// claims is how a running handler's claim is kept proven: ClaimTTL
	// and ClaimExtendInterval. A claim proves the window ours for
	// claims.Proof() (ClaimTTL - margin) after the start of the call that
	// took or last extended it.
	claims keepalive.Policy
	// rules are the windows' rules (internal/window) with this worker's
	// settings.
	rules machine.Rules

	// replaySkips: partitions being moved forward by SeekSkipping.
	replaySkips replaySkips

	// realClock: Config.Now is time.Now (it was not set), so a time the
	// hot path reads for its timers serves as the clock's reading too.
	realClock bool
	// herd collects garbage before a herd's start (real clock only).
	herd *herdGC
}

// New validates cfg (a setting it refuses is a *configerr.Error) and builds
// the worker and its Kafka client (which joins the group only in Run).
// Call Run exactly once: it releases the client.
func New(cfg Config) (*Worker, error) {
	realClock := cfg.Now == nil
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	claims, err := keepalive.NewPolicy(cfg.Store.ClaimTTL(), cfg.ClaimExtendInterval)
	if err != nil {
		return nil, &configerr.Error{Op: "worker", Field: "Config.ClaimExtendInterval", Value: cfg.ClaimExtendInterval,
			Reason: fmt.Sprintf("with the store's ClaimTTL %v: %v", cfg.Store.ClaimTTL(), err), Err: err}
	}
	w := &Worker{
		cfg:    cfg,
		log:    cfg.Logger.With("worker", cfg.WorkerID),
		h:      handler.Recover()(cfg.Handler),
		slots:  lanes.NewSlots(cfg.Concurrency),
		claims: claims,
		rules: machine.Rules{Proof: claims.Proof(), Grace: cfg.Grace, Retention: cfg.Store.Retention(),
			BusyMin: busyMin, BusyMax: busyMax},

		allowLimit: max(1, cfg.Concurrency/AllowShare),

		realClock: realClock,
	}
	if realClock {
		// More windows due at one instant than there are slots.
		w.herd = newHerdGC(cfg.Concurrency + 1)
	}
	c, err := partition.New(partition.Config{
		Brokers:           cfg.Brokers,
		ClientOpts:        cfg.ClientOpts,
		Group:             cfg.Group,
		Topic:             cfg.Topic,
		Serve:             w.serve,
		MaxUncommitted:    cfg.MaxUncommitted,
		Grace:             cfg.Grace,
		SessionTimeout:    cfg.SessionTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval,
		InstanceID:        cfg.WorkerID,
		Logger:            cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.consumer = c
	return w, nil
}

// InFlight returns how many handler attempts are running now, across the
// partitions this worker owns (abandoned ones not counted).
func (w *Worker) InFlight() int { return int(w.inFlight.Load()) }

// Concurrency returns how many windows the worker runs at once
// (Config.Concurrency, defaulted).
func (w *Worker) Concurrency() int { return w.cfg.Concurrency }

// SlotsInUse returns how many of the Concurrency slots are taken now:
// held by windows being claimed or running, or granted to a partition.
func (w *Worker) SlotsInUse() int { return w.cfg.Concurrency - w.slots.Free() }

// WaitingForSlot returns how many windows of the partitions this worker
// owns are due to start (their lanes let them) but wait for a slot: all
// slots are taken, or their job holds its max_concurrent.
func (w *Worker) WaitingForSlot() int { return int(w.waitingSlot.Load()) }

// maxConcurrent returns how many slots the job of msg may hold at once (0:
// no limit of its own): its max_concurrent, else for allow the worker's
// default. The other policies run one window of a job at a time.
func (w *Worker) maxConcurrent(msg *jobmsg.Message) int {
	if n := msg.Policy.MaxConcurrent; n > 0 {
		return n
	}
	if msg.Policy.Overlap == jobmsg.OverlapAllow {
		return w.allowLimit
	}
	return 0
}

// Joined reports whether the worker is a member of its consumer group now,
// with or without partitions (a readiness signal).
func (w *Worker) Joined() bool { return w.consumer.Joined() }

// Assigned returns the partitions this worker currently owns.
func (w *Worker) Assigned() []int32 { return w.consumer.Assigned() }

// Run creates the dead-letter topic if missing (returning an error wrapping
// topic.ErrMismatch if it exists with other settings), then consumes the
// windows topic until ctx is done. It returns nil after a graceful shutdown,
// once every partition goroutine has exited. Handlers abandoned because they
// ignored cancellation may still be running then; Run logs how many.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice; a Worker runs once, create a new one with New")
	}
	if err := w.ensureDLQ(ctx); err != nil {
		// Release the client without joining the group.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = w.consumer.Run(done)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	w.log.Info("worker running", "topic", w.cfg.Topic, "group", w.cfg.Group, "dlq", w.cfg.DeadLetterTopic,
		"concurrency", w.cfg.Concurrency, "max_uncommitted", w.cfg.MaxUncommitted)
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		w.reportStalls(ctx)
	}()
	err := w.consumer.Run(ctx)
	<-reported
	if w.herd != nil {
		w.herd.stop()
	}
	if n := w.running.Load(); n > 0 {
		w.log.Error("handlers that ignored cancellation are still running after shutdown", "handlers", n)
	}
	return err
}

func (w *Worker) ensureDLQ(ctx context.Context) error {
	adm := kadm.NewClient(w.consumer.Client())
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		advice, err := topic.EnsureWithAdvice(tctx, adm, topic.Spec{Name: w.cfg.DeadLetterTopic, Partitions: 1, ReplicationFactor: w.cfg.ReplicationFactor})
		cancel()
		if err == nil {
			topic.LogAdvice(w.log, advice)
			return nil
		}
		if errors.Is(err, topic.ErrMismatch) {
			return fmt.Errorf("worker: dead-letter topic: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := b.Next()
		w.log.Warn("cannot reach kafka to check the dead-letter topic; retrying", "topic", w.cfg.DeadLetterTopic, "err", err, "retry_in", delay)
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// parse verifies rec's signature (when required), decodes it and checks
// that it is a window of this deployment. A window of another namespace is
// returned with an error wrapping ErrForeignNamespace.
func (w *Worker) parse(rec *kgo.Record) (*jobmsg.Message, error) {
	if err := w.verify(rec); err != nil {
		return nil, err
	}
	msg, err := jobmsg.FromRecordAliased(rec)
	if err != nil {
		return nil, err
	}
	switch msg.Namespace {
	case w.cfg.Namespace:
	case "":
		// Written before records carried their namespace: nothing says
		// whose it is. Run it, but never silently.
		if n := w.unlabelled.Add(1); n == 1 || n%1000 == 0 {
			w.log.Warn("running a window whose record carries no namespace (published by a kjob from before records carried it); upgrade every producer and kjobctl that writes to this topic",
				"topic", rec.Topic, "namespace", w.cfg.Namespace, "window", msg.ID, "unlabelled_windows", n)
		}
	default:
		return msg, fmt.Errorf("%w: window %s was published by namespace %q and this worker's namespace is %q; "+
			"each deployment needs topics of its own (names.DefaultTopicOf), so check the topic and namespace the publisher and this worker are given",
			ErrForeignNamespace, msg.ID, msg.Namespace, w.cfg.Namespace)
	}
	return msg, nil
}

// retryDelay is how long a failed attempt waits before the window is
// claimed again: min(MaxBackoff, Backoff*2^(attempt-1)) with equal jitter.
func retryDelay(p jobmsg.Policy, attempt int) time.Duration {
	return backoff.Exponential(time.Duration(p.Backoff), time.Duration(p.MaxBackoff), attempt, backoff.Equal)
}

// beyondHorizon reports whether rec is older than the store's Retention,
// and its age. Its age counts from the later of its published_at and its
// Kafka timestamp, so a record republished by kjobctl dlq redrive (a new
// record, whose window the redrive forgot) is young again.
func (w *Worker) beyondHorizon(rec *kgo.Record, msg *jobmsg.Message) (time.Duration, bool) {
	born := msg.PublishedAt
	if rec.Timestamp.After(born) {
		born = rec.Timestamp
	}
	age := w.cfg.Now().Sub(born)
	return age, age > w.cfg.Store.Retention()
}

// days formats d for people: "9d", "9d4h", or d itself below a day.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.Round(time.Second).String()
	}
	n, h := d/day, (d%day)/time.Hour
	if h == 0 {
		return fmt.Sprintf("%dd", n)
	}
	return fmt.Sprintf("%dd%dh", n, h)
}

// executed reports an Execution to the hook.
func (w *Worker) executed(e Execution) {
	if w.cfg.OnExecuted != nil {
		w.cfg.OnExecuted(e)
	}
}
