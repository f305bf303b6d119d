package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/clock"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/partition"
	"github.com/kjob/kjob/pkg/topic"
)

// Store is what the worker needs from the idempotency store; *dedupe.Store
// implements it. See pkg/dedupe for the semantics of each call.
type Store interface {
	// Claim claims window id for owner: Claimed (run it), AlreadyDone
	// (skip it) or Busy (another claim is live: wait).
	Claim(ctx context.Context, id, owner string) (dedupe.Claim, error)
	// Extend keeps the claim of token alive; dedupe.ErrFenced once the
	// window is someone else's.
	Extend(ctx context.Context, id string, token int64) error
	// Complete marks the window done by compare-and-set on token;
	// dedupe.ErrAlreadyDone or dedupe.ErrFenced if it is not ours to
	// complete.
	Complete(ctx context.Context, id string, token int64) error
	// Release gives up the claim of token after a failed attempt.
	Release(ctx context.Context, id string, token int64, reason string) error
	// DeadLetter settles the window for good once its dead letter is
	// written, so a redelivered record of it is skipped (AlreadyDone).
	DeadLetter(ctx context.Context, id string, token int64, reason string) error
	// ClaimTTL is how long a claim lives without Extend. A running
	// handler is stopped before that long has passed since its claim was
	// last proven (see Config.ClaimExtendInterval).
	ClaimTTL() time.Duration
	// Retention is how long a done window is remembered (reported
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

// ErrBeyondHorizon is the error (Execution.Err) of a window dead-lettered
// instead of run because its record is older than the store's Retention:
// its done marker may have expired, so whether it already ran is unknown.
var ErrBeyondHorizon = errors.New("worker: record older than the replay horizon")

// Defaults of the zero values of Config fields.
const (
	// DefaultTopic is Config.Topic when it is empty.
	DefaultTopic = "kjob.windows"
	// DefaultGroup is Config.Group when it is empty.
	DefaultGroup = "kjob-workers"
	// DefaultGrace is Config.Grace when it is zero.
	DefaultGrace = 10 * time.Second
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
	// Topic is the windows topic. Default "kjob.windows".
	Topic string
	// Group is the consumer group of the workers. Default "kjob-workers".
	Group string
	// DeadLetterTopic receives windows that cannot run. Default Topic +
	// ".dlq". Run creates it if missing (1 partition).
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
	// Grace is how long a revoked partition's in-flight window may keep
	// running, and how long a handler whose context was cancelled (timeout,
	// revoke, loss) is waited for before it is abandoned. Default 10s.
	Grace time.Duration
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
	// OnExecuted, if set, is called after every attempt and every skipped
	// or dead-lettered record (metrics, tests, demos): once per attempt,
	// except that an abandoned last attempt reports "abandoned" and then
	// "dead-lettered". It runs on the partition's goroutine: keep it fast.
	OnExecuted func(Execution)
	// OnAttempt, if set, is called before each handler attempt with the
	// handler's context (bounded by the window's timeout), the record and
	// the job; the handler runs with the context it returns, and the
	// returned function is called with the attempt's result (nil on
	// success) when the attempt ends. For tracing (see pkg/tracing): the
	// returned context must keep ctx's deadline and cancellation.
	OnAttempt func(ctx context.Context, rec *kgo.Record, job *handler.Job) (context.Context, func(error))
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

func (c *Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New(`worker: Config.Brokers is empty; set at least one seed broker, e.g. "localhost:9092"`)
	case c.Store == nil:
		return errors.New("worker: Config.Store is nil; set it to a *dedupe.Store (dedupe.New)")
	case c.Handler == nil:
		return errors.New("worker: Config.Handler is nil; set it to a *handler.Mux with the job handlers registered")
	case c.WorkerID == "":
		return errors.New(`worker: Config.WorkerID is empty; set a per-process unique id, e.g. hostname + "-" + pid`)
	case c.ReplicationFactor < 0:
		return fmt.Errorf("worker: Config.ReplicationFactor = %d is negative; set it to the dead-letter topic's replica count, or 0 for 1", c.ReplicationFactor)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		def  time.Duration
	}{
		{"Grace", c.Grace, DefaultGrace},
		{"ClaimExtendInterval", c.ClaimExtendInterval, c.Store.ClaimTTL() / 3},
		{"SessionTimeout", c.SessionTimeout, partition.DefaultSessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval, partition.DefaultHeartbeatInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("worker: Config.%s = %v is negative; set a positive duration, or 0 for the default %v", d.name, d.v, d.def)
		}
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = c.Topic + ".dlq"
	}
	if c.DeadLetterTopic == c.Topic {
		return fmt.Errorf("worker: Config.DeadLetterTopic = %q is the windows topic; set another topic, or leave it empty for %q", c.DeadLetterTopic, c.Topic+".dlq")
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	ttl := c.Store.ClaimTTL()
	if ttl <= 0 {
		return fmt.Errorf("worker: Config.Store.ClaimTTL() = %v is not positive; the store must report how long its claims live (dedupe.Config.ClaimTTL)", ttl)
	}
	if c.ClaimExtendInterval == 0 {
		c.ClaimExtendInterval = ttl / 3
	}
	if c.ClaimExtendInterval >= ttl/2 {
		return fmt.Errorf("worker: Config.ClaimExtendInterval = %v must be less than the store's ClaimTTL/2 = %v (ClaimTTL %v), or claims expire while their handlers run; lower it (ClaimTTL/3 is customary; 0 picks it) or raise the store's ClaimTTL",
			c.ClaimExtendInterval, ttl/2, ttl)
	}
	if r := c.Store.Retention(); r < ttl {
		return fmt.Errorf("worker: Config.Store.Retention() = %v is shorter than its ClaimTTL() = %v; the store must remember done windows longer than a claim lives (dedupe.Config.Retention)", r, ttl)
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
	ran      atomic.Bool

	storeDown atomic.Bool  // a store outage is being logged
	running   atomic.Int64 // handler goroutines still running (incl. abandoned)

	// proof is how long a claim proves the window ours after the start of
	// the Claim or Extend call that took or renewed it: ClaimTTL - margin.
	proof   time.Duration
	extends sync.WaitGroup // Extend calls in flight (bounded by their deadline)

	chunkMu sync.Mutex
	chunks  map[int32]int // per partition: the claim-ahead chunk size batches ended with
}

// New validates cfg and builds the worker and its Kafka client (which joins
// the group only in Run). Call Run exactly once: it releases the client.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg,
		log: cfg.Logger.With("worker", cfg.WorkerID),
		h:   handler.Recover()(cfg.Handler),

		proof: cfg.Store.ClaimTTL() - max(cfg.ClaimExtendInterval, cfg.Store.ClaimTTL()/5),

		chunks: map[int32]int{},
	}
	c, err := partition.New(partition.Config{
		Brokers:           cfg.Brokers,
		ClientOpts:        cfg.ClientOpts,
		Group:             cfg.Group,
		Topic:             cfg.Topic,
		ProcessBatch:      w.processBatch,
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
	w.log.Info("worker running", "topic", w.cfg.Topic, "group", w.cfg.Group, "dlq", w.cfg.DeadLetterTopic)
	err := w.consumer.Run(ctx)
	w.extends.Wait() // each ends by its claim's step-down deadline
	if n := w.running.Load(); n > 0 {
		w.log.Error("handlers that ignored cancellation are still running after shutdown", "handlers", n)
	}
	return err
}

func (w *Worker) ensureDLQ(ctx context.Context) error {
	adm := kadm.NewClient(w.consumer.Client())
	delay := 100 * time.Millisecond
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := topic.Ensure(tctx, adm, topic.Spec{Name: w.cfg.DeadLetterTopic, Partitions: 1, ReplicationFactor: w.cfg.ReplicationFactor})
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, topic.ErrMismatch) {
			return fmt.Errorf("worker: dead-letter topic: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.log.Warn("cannot reach kafka to check the dead-letter topic; retrying", "topic", w.cfg.DeadLetterTopic, "err", err, "retry_in", delay)
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// process settles one record; it is the partition.ProcessFunc. It returns
// nil once the record is settled and ctx.Err() if ctx ends first.
func (w *Worker) process(ctx context.Context, rec *kgo.Record) error {
	msg, ok, err := w.decode(ctx, rec)
	if !ok {
		return err
	}
	return w.window(ctx, rec, msg, nil, nil)
}

// decode decodes rec; a record that is not a valid window is dead-lettered
// (ok = false, err = nil once it is, ctx.Err() if ctx ended first).
func (w *Worker) decode(ctx context.Context, rec *kgo.Record) (msg *jobmsg.Message, ok bool, err error) {
	msg, err = w.parse(rec)
	if err == nil {
		return msg, true, nil
	}
	reason := "undecodable record: " + err.Error()
	if errors.Is(err, errUnverified) {
		reason = err.Error()
	}
	w.log.Error("dead-lettering a record that is not a valid window", "partition", rec.Partition, "offset", rec.Offset, "err", err)
	if err := w.deadLetter(ctx, rec, reason, 0); err != nil && !errors.Is(err, errLetterRefused) {
		return nil, false, err
	}
	now := w.cfg.Now()
	w.executed(Execution{Partition: rec.Partition, Offset: rec.Offset, Outcome: OutcomeDeadLettered, Err: err, Started: now, Finished: now})
	return nil, false, nil
}

// parse verifies rec's signature (when required) and decodes it.
func (w *Worker) parse(rec *kgo.Record) (*jobmsg.Message, error) {
	if err := w.verify(rec); err != nil {
		return nil, err
	}
	return jobmsg.FromRecord(rec)
}

// window settles the window of rec: claims it, runs it (retrying as its
// policy says), and records the result. It returns nil once the window is
// settled and ctx.Err() if ctx ends first. first, when set, is the result
// of a claim already made (a batch claim), and ran, when also set, the
// result of the attempt already run under it: window picks up from there.
// A Claimed first without ran is not run (its proof is unknown): window
// steps it down and claims again, unless the record is beyond the replay
// horizon.
func (w *Worker) window(ctx context.Context, rec *kgo.Record, msg *jobmsg.Message, first *dedupe.Claim, ran *attemptResult) error {
	log := w.log.With("partition", rec.Partition, "offset", rec.Offset, "window", msg.ID, "job", msg.Job)
	base := Execution{WindowID: msg.ID, Job: msg.Job, Partition: rec.Partition, Offset: rec.Offset, ScheduledAt: msg.ScheduledAt, PublishedAt: msg.PublishedAt}

	for {
		var c dedupe.Claim
		var proven time.Time // when the call that took c started; zero if unknown
		var err error
		if first != nil {
			c, first = *first, nil
		} else {
			c, proven, err = w.claim(ctx, msg.ID, log)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A non-retryable store error (invalid id): cannot ever run.
			log.Error("dead-lettering a window the store refuses", "err", err)
			if err := w.deadLetter(ctx, rec, "store refused the window: "+err.Error(), 0); err != nil && !errors.Is(err, errLetterRefused) {
				return err
			}
			e := base
			e.Outcome, e.Err, e.Started, e.Finished = OutcomeDeadLettered, err, w.cfg.Now(), w.cfg.Now()
			w.executed(e)
			return nil
		}
		switch c.Outcome {
		case dedupe.AlreadyDone:
			log.Debug("window already done; skipping", "token", c.Token, "holder", c.Holder)
			e := base
			now := w.cfg.Now()
			e.Outcome, e.Attempt, e.Token, e.Started, e.Finished = OutcomeSkippedDone, c.Attempt, c.Token, now, now
			w.executed(e)
			return nil
		case dedupe.Busy:
			wait := min(max(c.Retry, busyMin), busyMax)
			log.Debug("window busy: another claim is live; waiting", "holder", c.Holder, "token", c.Token, "retry_in", wait)
			if err := clock.Sleep(ctx, wait); err != nil {
				return err
			}
			continue
		case dedupe.Claimed:
		default:
			return fmt.Errorf("worker: unknown claim outcome %v", c.Outcome) // unreachable with pkg/dedupe
		}

		alog := log.With("token", c.Token, "attempt", c.Attempt)
		var res attemptResult
		if ran != nil {
			res, ran = *ran, nil
		} else {
			if age, old := w.beyondHorizon(rec, msg); old {
				return w.tooOld(ctx, rec, msg, c, age, base, alog)
			}
			res = w.attempt(ctx, rec, msg, c, proven, func() *slog.Logger { return alog })
		}
		e := base
		e.Attempt, e.Token, e.Started, e.Finished, e.Err = c.Attempt, c.Token, res.started, res.finished, res.err
		switch {
		case res.fenced:
			alog.Warn("claim taken over while the handler ran; discarding the attempt's result", "err", res.err, "abandoned", res.abandoned)
			e.Outcome = OutcomeFenced
			w.executed(e)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // Claim reports Busy or AlreadyDone now

		case res.unproven && !res.abandoned:
			// Not completed, not released (the store is unreachable or
			// slow): claiming again waits for the store, and for this
			// claim to expire if it still lives.
			alog.Warn("attempt stepped down: its claim could not be proven; discarding its result and claiming the window again once the store answers", "err", res.err)
			e.Outcome = OutcomeSteppedDown
			w.executed(e)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue

		case res.abandoned:
			alog.Error("handler ignored cancellation; abandoning it (its goroutine keeps running)", "grace", w.cfg.Grace)
			e.Outcome = OutcomeAbandoned
			w.executed(e)
			if ctx.Err() != nil {
				return ctx.Err() // not marked: the next owner re-delivers the window
			}
			done, err := w.failed(ctx, rec, msg, c, res.err, alog, false)
			if done || err != nil {
				return err
			}
			continue

		case res.err == nil:
			err := w.settle(ctx, "complete", alog, func(sctx context.Context) error { return w.cfg.Store.Complete(sctx, msg.ID, c.Token) })
			switch {
			case err == nil:
				alog.Info("window done", "duration", res.finished.Sub(res.started), "lateness", res.started.Sub(msg.ScheduledAt))
				e.Outcome = OutcomeDone
				w.executed(e)
				return nil
			case errors.Is(err, dedupe.ErrAlreadyDone), errors.Is(err, dedupe.ErrFenced):
				alog.Warn("handler succeeded but the window is not ours to complete (a zombie attempt: another attempt got there)", "err", err)
				e.Outcome, e.Err = OutcomeFenced, err
				w.executed(e)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue
			default:
				alog.Warn("handler succeeded but completing the window failed before the partition was revoked; the next owner decides", "err", err)
				e.Outcome, e.Err = OutcomeFailed, fmt.Errorf("complete: %w", err)
				w.executed(e)
				return ctx.Err()
			}

		default:
			if ctx.Err() != nil {
				// Revoked or lost mid-attempt: give the window back so
				// its next owner can claim it at once.
				alog.Warn("attempt interrupted: partition revoked or lost; releasing the window for its next owner", "err", res.err)
				w.release(ctx, msg.ID, c.Token, "interrupted: partition revoked or lost: "+res.err.Error(), alog)
				e.Outcome = OutcomeFailed
				w.executed(e)
				return ctx.Err()
			}
			final := errors.Is(res.err, handler.ErrPermanent) || c.Attempt >= msg.Policy.MaxAttempts
			if final {
				e.Outcome = OutcomeDeadLettered
			} else {
				e.Outcome = OutcomeFailed
			}
			w.executed(e)
			done, err := w.failed(ctx, rec, msg, c, res.err, alog, true)
			if done || err != nil {
				return err
			}
		}
	}
}

// failed handles a failed (or abandoned) attempt: on a permanent error or
// the last attempt it dead-letters the window and releases the claim (done
// = true); otherwise it releases the claim and waits the backoff (done =
// false: claim again). err is ctx.Err() when ctx ended.
func (w *Worker) failed(ctx context.Context, rec *kgo.Record, msg *jobmsg.Message, c dedupe.Claim, cause error, log *slog.Logger, reported bool) (done bool, err error) {
	reason := cause.Error()
	if errors.Is(cause, handler.ErrPermanent) || c.Attempt >= msg.Policy.MaxAttempts {
		why := "permanent failure"
		if !errors.Is(cause, handler.ErrPermanent) {
			why = fmt.Sprintf("attempt %d of %d failed", c.Attempt, msg.Policy.MaxAttempts)
		}
		log.Error("dead-lettering window: "+why, "err", cause)
		if err := w.deadLetter(ctx, rec, reason, c.Attempt); err != nil && !errors.Is(err, errLetterRefused) {
			w.release(ctx, msg.ID, c.Token, "interrupted before dead-lettering: "+reason, log)
			return true, err
		}
		w.buryDead(ctx, msg.ID, c.Token, reason, log)
		if !reported {
			e := Execution{WindowID: msg.ID, Job: msg.Job, Partition: rec.Partition, Offset: rec.Offset, Attempt: c.Attempt, Token: c.Token,
				Outcome: OutcomeDeadLettered, Err: cause, ScheduledAt: msg.ScheduledAt, PublishedAt: msg.PublishedAt}
			e.Started = w.cfg.Now()
			e.Finished = e.Started
			w.executed(e)
		}
		return true, nil
	}
	w.release(ctx, msg.ID, c.Token, reason, log)
	wait := backoff(msg.Policy, c.Attempt)
	log.Warn("attempt failed; retrying after backoff", "err", cause, "retry_in", wait, "max_attempts", msg.Policy.MaxAttempts)
	if err := clock.Sleep(ctx, wait); err != nil {
		return true, err
	}
	return false, nil
}

// backoff is min(MaxBackoff, Backoff*2^(attempt-1)) with equal jitter.
func backoff(p jobmsg.Policy, attempt int) time.Duration {
	base, ceil := time.Duration(p.Backoff), time.Duration(p.MaxBackoff)
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < attempt && d < ceil; i++ {
		d *= 2
	}
	d = min(d, ceil)
	half := d / 2
	return half + rand.N(d-half+1)
}

// claim calls Store.Claim until it answers: store errors (Redis down) are
// retried with capped exponential backoff, logged once per outage. It
// returns the claim and when the call that made it started (what a
// Claimed claim is proven from), ctx.Err() if ctx ends first, or a
// non-retryable error (dedupe.ErrInvalidID).
func (w *Worker) claim(ctx context.Context, id string, log *slog.Logger) (dedupe.Claim, time.Time, error) {
	delay := retryMin
	for {
		if err := ctx.Err(); err != nil {
			return dedupe.Claim{}, time.Time{}, err
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		c, err := w.cfg.Store.Claim(cctx, id, w.cfg.WorkerID)
		cancel()
		if err == nil {
			w.storeUp(log)
			return c, start, nil
		}
		if errors.Is(err, dedupe.ErrInvalidID) {
			return dedupe.Claim{}, time.Time{}, err
		}
		if ctx.Err() != nil {
			return dedupe.Claim{}, time.Time{}, ctx.Err()
		}
		w.storeFailed(log, "claim", err)
		if err := clock.Sleep(ctx, delay); err != nil {
			return dedupe.Claim{}, time.Time{}, err
		}
		delay = min(2*delay, retryMax)
	}
}

// settle runs a store call that records an attempt's result (Complete,
// Release) until it answers (nil or a dedupe sentinel). Its first try runs
// even if ctx is already done (the handler's result is worth recording on
// the way out); retries stop when ctx is done, returning ctx.Err().
func (w *Worker) settle(ctx context.Context, op string, log *slog.Logger, call func(context.Context) error) error {
	delay := retryMin
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		err := call(cctx)
		cancel()
		if err == nil || errors.Is(err, dedupe.ErrAlreadyDone) || errors.Is(err, dedupe.ErrFenced) || errors.Is(err, dedupe.ErrInvalidID) {
			if err == nil {
				w.storeUp(log)
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.storeFailed(log, op, err)
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, retryMax)
	}
}

// release gives the claim back; failures are logged (the claim then expires
// after the store's ClaimTTL).
func (w *Worker) release(ctx context.Context, id string, token int64, reason string, log *slog.Logger) {
	err := w.settle(ctx, "release", log, func(sctx context.Context) error { return w.cfg.Store.Release(sctx, id, token, reason) })
	switch {
	case err == nil:
	case errors.Is(err, dedupe.ErrFenced), errors.Is(err, dedupe.ErrAlreadyDone):
		log.Warn("release refused: the window is no longer ours", "err", err)
	default:
		log.Warn("cannot release the claim; it expires after the store's claim TTL", "err", err)
	}
}

// buryDead settles a dead-lettered window (Store.DeadLetter); failures are
// logged (the claim then expires, and a redelivery would run it again).
func (w *Worker) buryDead(ctx context.Context, id string, token int64, reason string, log *slog.Logger) {
	err := w.settle(ctx, "dead-letter", log, func(sctx context.Context) error { return w.cfg.Store.DeadLetter(sctx, id, token, reason) })
	if err != nil {
		log.Warn("cannot mark the dead-lettered window settled; a redelivered record of it would run again", "err", err)
	}
}

func (w *Worker) storeFailed(log *slog.Logger, op string, err error) {
	if w.storeDown.CompareAndSwap(false, true) {
		log.Error("idempotency store unavailable; not running windows nor committing past them until it answers", "op", op, "err", err)
	}
}

func (w *Worker) storeUp(log *slog.Logger) {
	if w.storeDown.CompareAndSwap(true, false) {
		log.Info("idempotency store answers again")
	}
}

// attemptResult is how a handler attempt ended.
type attemptResult struct {
	err                         error
	fenced, abandoned, unproven bool
	started, finished           time.Time
}

// errAbandoned is the cause recorded for an abandoned attempt.
var errAbandoned = errors.New("abandoned after timeout: handler ignored cancellation")

// extendResult is the answer to one Extend started at start.
type extendResult struct {
	start time.Time
	err   error
}

// attempt runs the handler for claim c, which the store call started at
// proven took (or last extended), extending the claim while the handler
// runs.
//
// The claim proves the window ours until proven + ClaimTTL; the handler's
// context is cancelled with cause ErrClaimUnproven a margin before that
// (w.proof after the start of the last successful Claim or Extend), and
// the result is marked unproven. If that moment has passed already, the
// handler does not start. Extends run on their own goroutine, bounded by
// that deadline, so a hung store delays neither the step-down nor
// noticing the handler's end. One timer serves both the extends and the
// deadline.
//
// logger returns the attempt's logger; it is called only when something is
// logged, so a quick successful attempt does not pay for building it.
func (w *Worker) attempt(ctx context.Context, rec *kgo.Record, msg *jobmsg.Message, c dedupe.Claim, proven time.Time, logger func() *slog.Logger) attemptResult {
	res := attemptResult{started: w.cfg.Now()}
	now := time.Now()
	deadline := proven.Add(w.proof)
	if !now.Before(deadline) {
		res.unproven, res.finished = true, res.started
		res.err = fmt.Errorf("%w: the claim was taken %v ago, not started (it proves the window ours for %v after the claim call started)",
			ErrClaimUnproven, now.Sub(proven).Round(time.Millisecond), w.proof)
		if proven.IsZero() {
			res.err = fmt.Errorf("%w: not started", ErrClaimUnproven)
		}
		return res
	}
	cctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil) // also stops an Extend in flight
	hctx, cancel := context.WithTimeout(cctx, time.Duration(msg.Policy.Timeout))
	defer cancel()
	job := handler.NewJob(msg, c.Attempt, c.Token, w.cfg.WorkerID, rec.Partition, rec.Offset)
	if w.cfg.OnAttempt != nil {
		var end func(error)
		hctx, end = w.cfg.OnAttempt(hctx, rec, job)
		defer func() { end(res.err) }()
	}
	if w.log.Enabled(ctx, slog.LevelDebug) {
		logger().Debug("running window", "handler", msg.Handler, "lateness", res.started.Sub(msg.ScheduledAt))
	}

	done := make(chan error, 1) // buffered: an abandoned handler can still send and exit
	w.running.Add(1)
	go func() {
		defer w.running.Add(-1)
		done <- w.h.HandleJob(hctx, job)
	}()

	every := w.cfg.ClaimExtendInterval
	nextExtend := now.Add(every)
	timer := time.NewTimer(every) // the next extend (always before the deadline: every < w.proof)
	defer timer.Stop()
	var (
		extendDone chan extendResult // made at the first extend: quick handlers never need it
		extending  bool              // an Extend is in flight
		lastErr    error             // of the last Extend, if it failed
		cancelled  = hctx.Done()
		abandon    <-chan time.Time
	)
	for {
		select {
		case err := <-done:
			res.finished = w.cfg.Now()
			if !res.unproven {
				res.err = err
			}
			return res
		case now := <-timer.C:
			if res.fenced || res.unproven || ctx.Err() != nil {
				// Nothing more to prove: the handler's context is
				// cancelled already (by the fence, the step-down, or the
				// partition's revoke or loss).
				continue
			}
			if !now.Before(deadline) {
				why := fmt.Sprintf("no extend succeeded for %v", now.Sub(deadline.Add(-w.proof)).Round(time.Millisecond))
				switch {
				case extending:
					why += " (an extend is still in flight)"
				case lastErr != nil:
					why += " (last extend error: " + lastErr.Error() + ")"
				}
				res.unproven = true
				res.err = fmt.Errorf("%w: %s; the claim may expire within %v", ErrClaimUnproven, why, w.cfg.Store.ClaimTTL()-w.proof)
				logger().Warn("claim can no longer be proven; cancelling the handler before the claim can expire", "reason", why, "claim_ttl", w.cfg.Store.ClaimTTL())
				cancelCause(res.err)
				continue
			}
			if !extending && !now.Before(nextExtend) {
				if extendDone == nil {
					extendDone = make(chan extendResult, 1)
				}
				extending = true
				w.extends.Add(1)
				go func(start, deadline time.Time) {
					defer w.extends.Done()
					ectx, ecancel := context.WithDeadline(cctx, deadline)
					err := w.cfg.Store.Extend(ectx, msg.ID, c.Token)
					ecancel()
					extendDone <- extendResult{start: start, err: err}
				}(now, deadline)
			}
			if !now.Before(nextExtend) {
				nextExtend = now.Add(every)
			}
			next := nextExtend
			if deadline.Before(next) {
				next = deadline
			}
			timer.Reset(next.Sub(now))
		case r := <-extendDone:
			extending = false
			switch {
			case res.fenced || res.unproven:
			case r.err == nil:
				lastErr = nil
				w.storeUp(logger())
				if d := r.start.Add(w.proof); d.After(deadline) {
					deadline = d
				}
			case errors.Is(r.err, dedupe.ErrFenced), errors.Is(r.err, dedupe.ErrAlreadyDone):
				logger().Warn("claim lost while the handler runs; cancelling it", "err", r.err)
				res.fenced = true
				cancelCause(fmt.Errorf("claim lost: %w", r.err))
			default:
				lastErr = r.err
				if ctx.Err() == nil {
					w.storeFailed(logger(), "extend", r.err)
					logger().Warn("cannot extend the claim; retrying until the step-down deadline", "err", r.err, "deadline_in", time.Until(deadline).Round(time.Millisecond))
				}
			}
		case <-cancelled:
			cancelled = nil
			t := time.NewTimer(w.cfg.Grace)
			defer t.Stop()
			abandon = t.C
		case <-abandon:
			res.abandoned = true
			res.finished = w.cfg.Now()
			res.err = fmt.Errorf("%w for %v after %v", errAbandoned, w.cfg.Grace, context.Cause(hctx))
			return res
		}
	}
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

// tooOld dead-letters a window claimed as c whose record is beyond the
// replay horizon, instead of running it: its done marker may have expired,
// so it may have run already. It returns nil once settled, or ctx.Err().
func (w *Worker) tooOld(ctx context.Context, rec *kgo.Record, msg *jobmsg.Message, c dedupe.Claim, age time.Duration, base Execution, log *slog.Logger) error {
	retention := w.cfg.Store.Retention()
	reason := fmt.Sprintf("published %s ago, more than the replay horizon (the store's retention, worker --retention/KJOB_RETENTION = %s): its done marker may have expired, so whether it already ran is unknown; redrive it with kjobctl dlq redrive if it must still run",
		days(age), days(retention))
	log.Error("dead-lettering a window older than the replay horizon instead of running it", "age", age.Round(time.Second), "retention", retention)
	if err := w.deadLetter(ctx, rec, reason, c.Attempt); err != nil && !errors.Is(err, errLetterRefused) {
		w.release(ctx, msg.ID, c.Token, "interrupted before dead-lettering: "+reason, log)
		return err
	}
	w.buryDead(ctx, msg.ID, c.Token, reason, log)
	e := base
	now := w.cfg.Now()
	e.Outcome, e.Attempt, e.Token, e.Started, e.Finished = OutcomeDeadLettered, c.Attempt, c.Token, now, now
	e.Err = fmt.Errorf("%w: %s", ErrBeyondHorizon, reason)
	w.executed(e)
	return nil
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
