package kjobtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Defaults of the zero fields of PipelineOptions.
const (
	// DefaultPartitions is PipelineOptions.Partitions when it is zero.
	DefaultPartitions = 4
	// DefaultClaimTTL is PipelineOptions.ClaimTTL when it is zero: the
	// claim TTL cmd/worker runs with.
	DefaultClaimTTL = dedupe.DefaultClaimTTL
	// DefaultGrace is PipelineOptions.Grace when it is zero.
	DefaultGrace = 2 * time.Second
	// DefaultWaitTimeout is PipelineOptions.WaitTimeout when it is zero.
	DefaultWaitTimeout = 30 * time.Second
)

// Names in a pipeline's own broker and Redis.
const (
	// Namespace is the pipeline's deployment namespace (the Namespace
	// of kjob.WorkerConfig): the idempotency store's, the worker's, and
	// every window's it publishes.
	Namespace = "kjobtest"
	// Group is the workers' consumer group.
	Group = "kjobtest-workers"
)

// PipelineOptions configures a Pipeline. Every zero field has a default.
type PipelineOptions struct {
	// Partitions is the windows topic's partition count. Default
	// DefaultPartitions.
	Partitions int32
	// ClaimTTL is the idempotency store's claim TTL
	// (kjob.WorkerConfig.ClaimTTL). Default DefaultClaimTTL.
	ClaimTTL time.Duration
	// Grace is the worker's grace period (kjob.WorkerConfig.Grace): how long a
	// handler whose context was cancelled is waited for, in particular at
	// Close. Default DefaultGrace.
	Grace time.Duration
	// Concurrency is how many windows the worker runs at once
	// (kjob.WorkerConfig.Concurrency). Default the worker's.
	Concurrency int
	// WaitTimeout bounds every Wait. Default DefaultWaitTimeout.
	WaitTimeout time.Duration
	// Logger receives the worker's logs. Default: discarded.
	Logger *slog.Logger
}

// validate applies the defaults and checks every field.
func (o *PipelineOptions) validate() error {
	for _, f := range []struct {
		name string
		v    time.Duration
		def  time.Duration
	}{{"ClaimTTL", o.ClaimTTL, DefaultClaimTTL}, {"Grace", o.Grace, DefaultGrace}, {"WaitTimeout", o.WaitTimeout, DefaultWaitTimeout}} {
		if f.v < 0 {
			return fmt.Errorf("PipelineOptions.%s = %v is negative; set a positive duration, or 0 for %v", f.name, f.v, f.def)
		}
	}
	switch {
	case o.Partitions < 0:
		return fmt.Errorf("PipelineOptions.Partitions = %d is negative; set a positive count, or 0 for %d", o.Partitions, DefaultPartitions)
	case o.Concurrency < 0:
		return fmt.Errorf("PipelineOptions.Concurrency = %d is negative; set a positive count, or 0 for the worker's default %d", o.Concurrency, worker.DefaultConcurrency)
	}
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ClaimTTL == 0 {
		o.ClaimTTL = DefaultClaimTTL
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Pipeline is an in-process kjob deployment for a test: an embedded Kafka
// broker (kfake) with the windows and dead-letter topics, a Redis holding
// the idempotency store, and one worker running the handler under test.
// Publish puts a window on the topic as the producer would; Wait returns
// how it was settled. Everything it starts stops at the end of the test
// (TB.Cleanup), or at Close.
//
// A Pipeline is safe for concurrent use.
type Pipeline struct {
	opts    PipelineOptions
	tb      TB
	brokers []string
	store   *dedupe.Store
	pub     *kgo.Client

	cancel  context.CancelFunc
	stopped chan struct{} // closed when the worker's Run has returned
	runErr  error         // Run's error, read after stopped
	letters chan struct{} // closed when the dead-letter reader has returned
	once    sync.Once

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every event
	attempts  map[string][]Attempt
	execs     map[string][]worker.Execution
	published map[string][]origin
	deadMail  map[origin]*DeadLetter
	lastStart map[string]time.Time
}

// origin locates a record of the windows topic.
type origin struct {
	partition int32
	offset    int64
}

// Attempt is one call of the handler under test, as the pipeline saw it.
type Attempt struct {
	// Attempt is the attempt number (kjob.Job.Attempt).
	Attempt int
	// FencingToken is the claim's token (kjob.Job.FencingToken).
	FencingToken int64
	// Err is what the handler returned (a *kjob.PanicError if it
	// panicked), or for an abandoned call the worker's reason.
	Err error
	// Started and Finished bound the call; Finished is zero while the
	// handler has not returned (still running, or abandoned).
	Started, Finished time.Time
	// Abandoned: the handler ignored its cancelled context and the worker
	// gave up on it after the grace (OutcomeAbandoned). The call
	// counts as an attempt, as it does for the window's max_attempts.
	Abandoned bool
}

// Outcome is what the worker did with a record of a window: how it
// settled it (done, dead-lettered, skipped, superseded, skipped-done) or
// a step on the way (failed, fenced, abandoned, ...). Its values are the
// words of the worker's logs and metrics.
type Outcome string

// The outcomes a Result reports.
const (
	// OutcomeDone: the handler succeeded and the window is done.
	OutcomeDone Outcome = "done"
	// OutcomeFailed: an attempt failed; the window is retried after a
	// backoff.
	OutcomeFailed Outcome = "failed"
	// OutcomeDeadLettered: the window was written to the dead-letter
	// topic: it failed permanently (an error wrapping kjob.ErrPermanent,
	// a payload that does not decode) or used up its attempts.
	OutcomeDeadLettered Outcome = "dead-lettered"
	// OutcomeSkipped: the window was not run because of its job's overlap
	// policy (skip, latest); Result.Err says why.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeSuperseded: a newer window of the job replaced this one
	// (overlap policy replace).
	OutcomeSuperseded Outcome = "superseded"
	// OutcomeSkippedDone: the window was already settled (e.g. published
	// twice); the record was acknowledged without running it.
	OutcomeSkippedDone Outcome = "skipped-done"
	// OutcomeFenced: a newer claim took the window over while the attempt
	// ran; the attempt's result was discarded.
	OutcomeFenced Outcome = "fenced"
	// OutcomeAbandoned: the handler ignored its cancelled context for the
	// grace period and was left running; the attempt counts as failed.
	OutcomeAbandoned Outcome = "abandoned"
)

// Result is how a window was settled.
type Result struct {
	// ID is the window id.
	ID string
	// Outcome is how the worker settled the last record published for the
	// window: OutcomeDone, OutcomeDeadLettered, OutcomeSkipped (overlap
	// policy), OutcomeSuperseded, or OutcomeSkippedDone (the window was
	// already settled, e.g. published twice).
	Outcome Outcome
	// Err is the settling outcome's error: nil when done; the last
	// attempt's error, or why, when dead-lettered; the reason when
	// skipped or superseded.
	Err error
	// Attempts are the handler's calls for the window, in order.
	Attempts []Attempt
	// Steps is everything the worker reported about the window, in
	// order: failed attempts, fences, the settling outcome (e.g.
	// [failed done] for a window done at its second attempt).
	Steps []Outcome
	// Stored is the window's record in the idempotency store once it is
	// settled.
	Stored Stored
	// DeadLetter is the window's letter in the dead-letter topic when
	// Outcome is dead-lettered, else nil.
	DeadLetter *DeadLetter
}

// Stored is a settled window's record in the idempotency store: what
// kjob remembers of it, and what keeps it from running again.
type Stored struct {
	// Status is "done", "dead" (dead-lettered), "skipped" or "superseded".
	Status string
	// Attempts is how many attempts were started, crashed ones included.
	Attempts int
	// FencingToken is the token of the last claim.
	FencingToken int64
	// LastError is the text of the last failed attempt's error, if any
	// (bounded).
	LastError string
}

// DeadLetter is a window's letter in the dead-letter topic.
type DeadLetter struct {
	// WindowID is the dead-lettered window's id.
	WindowID string
	// Reason is why it was dead-lettered: the last error's text.
	Reason string
	// Attempts is how many attempts the window had.
	Attempts int
	// Worker is the id of the worker that dead-lettered it.
	Worker string
	// At is when it was dead-lettered.
	At time.Time
	// Partition and Offset locate the window's record in the windows
	// topic.
	Partition int32
	// Offset is the record's offset in its partition.
	Offset int64
}

// StartPipeline starts a Pipeline running h and stops it when the test
// ends. It fails tb if something cannot start.
//
// Redis is a real redis-server on a free loopback port when one is on
// PATH, else the in-process miniredis, said in the test log (with
// KJOB_TEST_REQUIRE_REDIS=1 it fails instead). When tb is a testing.TB,
// KJOB_TEST_REDIS_URL points it at an external Redis instead, whose
// database is flushed first: see the package doc.
func StartPipeline(tb TB, h kjob.Handler, opts PipelineOptions) *Pipeline {
	tb.Helper()
	if h == nil {
		tb.Fatalf("kjobtest: StartPipeline: handler is nil; pass the handler under test, e.g. a *kjob.Mux")
		return nil
	}
	if err := opts.validate(); err != nil {
		tb.Fatalf("kjobtest: StartPipeline: %v", err)
		return nil
	}
	p := &Pipeline{
		opts: opts, tb: tb,
		changed:   make(chan struct{}),
		attempts:  map[string][]Attempt{},
		execs:     map[string][]worker.Execution{},
		published: map[string][]origin{},
		deadMail:  map[origin]*DeadLetter{},
		lastStart: map[string]time.Time{},
	}

	kafka, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(opts.Partitions, p.Topic()),
		kfake.SeedTopics(1, p.DeadLetterTopic()),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		tb.Fatalf("kjobtest: start the embedded broker (kfake): %v", err)
		return nil
	}
	tb.Cleanup(kafka.Close)
	p.brokers = kafka.ListenAddrs()

	rdb := startRedis(tb)
	p.store, err = dedupe.New(rdb, dedupe.Config{Namespace: Namespace, ClaimTTL: opts.ClaimTTL})
	if err != nil {
		tb.Fatalf("kjobtest: PipelineOptions.ClaimTTL: %v", err)
		return nil
	}
	p.pub, err = kgo.NewClient(kgo.SeedBrokers(p.brokers...),
		kgo.RecordPartitioner(names.Partitioner())) // murmur2 of the job name, as the producer
	if err != nil {
		tb.Fatalf("kjobtest: Kafka client: %v", err)
		return nil
	}
	tb.Cleanup(p.pub.Close)

	dl, err := kgo.NewClient(kgo.SeedBrokers(p.brokers...), kgo.ConsumeTopics(p.DeadLetterTopic()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		tb.Fatalf("kjobtest: Kafka client: %v", err)
		return nil
	}
	w, err := newWorker(p, h, rdb)
	if err != nil {
		dl.Close()
		tb.Fatalf("kjobtest: %v", err)
		return nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.stopped = make(chan struct{})
	p.letters = make(chan struct{})
	go func() {
		defer close(p.stopped)
		p.runErr = w.Run(ctx)
		p.notify()
	}()
	go func() {
		defer close(p.letters)
		defer dl.Close()
		p.readLetters(ctx, dl)
	}()
	tb.Cleanup(p.Close) // runs before the cleanups above: last added, first run
	return p
}

// newWorker builds the pipeline's worker with kjob.NewWorker, the Worker
// users run, and two options only the kit sets (worker.Embedded): every
// window goes to the handler under test, whatever its handler name (the
// built-in handlers are not in the way), and each execution report comes
// to the pipeline. The broker is in-process and its principal has every
// right, so the access checks are left out.
func newWorker(p *Pipeline, h kjob.Handler, rdb redis.UniversalClient) (*kjob.Worker, error) {
	w, err := kjob.NewWorker(kjob.WorkerConfig{
		Brokers:              p.brokers,
		Redis:                rdb,
		Namespace:            Namespace,
		Topic:                p.Topic(),
		Group:                Group,
		DeadLetterTopic:      p.DeadLetterTopic(),
		ID:                   DefaultWorker,
		ClaimTTL:             p.opts.ClaimTTL,
		Grace:                p.opts.Grace,
		Concurrency:          p.opts.Concurrency,
		SessionTimeout:       2 * time.Second,        // kfake allows it; a rejoin is quick
		HeartbeatInterval:    100 * time.Millisecond, // assignments arrive with heartbeats
		SkipKafkaAccessCheck: true,
		SkipRedisAccessCheck: true,
		Logger:               p.opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	worker.Embed(w, worker.Embedded{Handler: attempts(p.recorder(h)), OnExecuted: p.executed})
	return w, nil
}

// attempts adapts h to the worker, which runs attempts, as kjob.Worker
// does.
func attempts(h kjob.Handler) handler.Handler {
	return handler.HandlerFunc(func(ctx context.Context, a *handler.Job) error {
		return h.HandleJob(ctx, handler.Public(a).(*kjob.Job))
	})
}

// startRedis starts the Redis of a pipeline and returns a client of it;
// both are closed at the end of the test.
func startRedis(tb TB) redis.UniversalClient {
	tb.Helper()
	if t, ok := tb.(testing.TB); ok {
		r := testenv.NewRedis(t)
		t.Logf("kjobtest: Redis is %s", r)
		return r.Client()
	}
	addr, stop, err := testenv.ExampleRedis()
	if err != nil {
		tb.Fatalf("kjobtest: %v", err)
		return nil
	}
	tb.Cleanup(stop)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Brokers returns the seed brokers of the pipeline's Kafka, for clients
// of a test's own (e.g. to read a topic).
func (p *Pipeline) Brokers() []string { return append([]string(nil), p.brokers...) }

// Topic returns the windows topic the worker consumes.
func (p *Pipeline) Topic() string { return names.DefaultTopic }

// DeadLetterTopic returns the topic the worker dead-letters to.
func (p *Pipeline) DeadLetterTopic() string { return names.Deployment{}.DeadLetterTopic() }

// Publish puts w on the windows topic now, as the producer would publish
// it (see Window for the defaults), and returns its window id. It fails tb
// if w is not a valid window (the message names the field) or the broker
// does not take it within 10 seconds.
func (p *Pipeline) Publish(tb TB, w Window) string {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	start := now
	job := w.Job
	if job == "" {
		job = DefaultJob
	}
	p.mu.Lock()
	if w.Start.IsZero() {
		if last := p.lastStart[job]; !start.After(last) {
			start = last.Add(time.Millisecond)
		}
		p.lastStart[job] = start
	}
	p.mu.Unlock()
	msg, err := w.message(start, now)
	if err != nil {
		tb.Fatalf("kjobtest: Publish: %v", err)
		return ""
	}
	rec, err := jobmsg.Record(p.Topic(), msg)
	if err != nil {
		tb.Fatalf("kjobtest: Publish: %v", err)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.pub.ProduceSync(ctx, rec).FirstErr(); err != nil {
		tb.Fatalf("kjobtest: Publish %s: %v", msg.ID, err)
		return ""
	}
	p.mu.Lock()
	p.published[msg.ID] = append(p.published[msg.ID], origin{rec.Partition, rec.Offset})
	p.mu.Unlock()
	return msg.ID
}

// Wait waits until the last record published for window id is settled
// (done, dead-lettered, skipped or superseded, or skipped as already
// done), its state in the store is settled, and, if it was dead-lettered,
// its letter is in the dead-letter topic; then it returns the Result. It
// fails tb if that takes longer than PipelineOptions.WaitTimeout, if the
// worker stopped, or if id was not published by p.
func (p *Pipeline) Wait(tb TB, id string) Result {
	tb.Helper()
	timer := time.NewTimer(p.opts.WaitTimeout)
	defer timer.Stop()
	var res Result
	for {
		p.mu.Lock()
		refs, known := p.published[id]
		var ok bool
		if known {
			res, ok = p.settled(id, refs[len(refs)-1])
		}
		changed := p.changed
		p.mu.Unlock()
		if !known {
			tb.Fatalf("kjobtest: Wait: window %q was not published by this pipeline; pass the id Publish returned", id)
			return Result{}
		}
		if ok {
			break
		}
		select {
		case <-changed:
		case <-p.stopped:
			tb.Fatalf("kjobtest: Wait %s: the worker stopped (Run returned %v) before the window was settled", id, p.runErr)
			return Result{}
		case <-timer.C:
			tb.Fatalf("kjobtest: Wait %s: not settled within %v (PipelineOptions.WaitTimeout); so far: %s",
				id, p.opts.WaitTimeout, p.progress(id))
			return Result{}
		}
	}
	// The worker settles a dead-lettered window in the store after it
	// reports it; poll the store until it has.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := p.store.State(ctx, id)
		cancel()
		if err == nil && dedupe.Settled(st.Status) {
			res.Stored = Stored{Status: st.Status, Attempts: st.Attempts, FencingToken: st.Token, LastError: st.LastError}
			return res
		}
		select {
		case <-tick.C:
		case <-timer.C:
			tb.Fatalf("kjobtest: Wait %s: the worker reported %s, but the store's record is not settled within %v (state %+v, err %v)",
				id, res.Outcome, p.opts.WaitTimeout, st, err)
			return Result{}
		}
	}
}

// settled returns the Result of window id if its record at o is settled.
// p.mu is held.
func (p *Pipeline) settled(id string, o origin) (Result, bool) {
	res := Result{ID: id}
	found := false
	for _, e := range p.execs[id] {
		if e.Partition != o.partition || e.Offset != o.offset {
			continue
		}
		switch e.Outcome {
		case worker.OutcomeDone, worker.OutcomeDeadLettered, worker.OutcomeSkipped,
			worker.OutcomeSuperseded, worker.OutcomeSkippedDone:
			res.Outcome, res.Err, found = Outcome(e.Outcome), e.Err, true
		}
	}
	if !found {
		return res, false
	}
	if res.Outcome == OutcomeDeadLettered {
		l, ok := p.deadMail[o]
		if !ok {
			return res, false
		}
		lc := *l
		res.DeadLetter = &lc
	}
	res.Attempts = append([]Attempt(nil), p.attempts[id]...)
	for _, e := range p.execs[id] {
		res.Steps = append(res.Steps, Outcome(e.Outcome))
	}
	return res, true
}

// progress describes what happened to window id so far, for a timeout.
func (p *Pipeline) progress(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, a := range p.attempts[id] {
		switch {
		case a.Abandoned:
			parts = append(parts, fmt.Sprintf("attempt %d (token %d) abandoned: %v", a.Attempt, a.FencingToken, a.Err))
		case a.Finished.IsZero():
			parts = append(parts, fmt.Sprintf("attempt %d (token %d) running", a.Attempt, a.FencingToken))
		default:
			parts = append(parts, fmt.Sprintf("attempt %d (token %d) returned %v", a.Attempt, a.FencingToken, a.Err))
		}
	}
	for _, e := range p.execs[id] {
		parts = append(parts, fmt.Sprintf("worker reported %s at %d/%d", e.Outcome, e.Partition, e.Offset))
	}
	if len(parts) == 0 {
		return "the handler was not called and the worker reported nothing"
	}
	return strings.Join(parts, "; ")
}

// Attempts returns the handler's calls for window id so far, in order.
func (p *Pipeline) Attempts(id string) []Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Attempt(nil), p.attempts[id]...)
}

// Close stops the worker (waiting up to Grace for running handlers, then
// abandoning them) and the pipeline's clients. The broker and Redis stop
// at the end of the test. StartPipeline registers Close with tb.Cleanup;
// call it to stop earlier. It fails the pipeline's TB if the worker's Run
// returns an error or does not return within Grace + 30s.
func (p *Pipeline) Close() {
	p.once.Do(func() {
		p.cancel()
		limit := p.opts.Grace + 30*time.Second
		select {
		case <-p.stopped:
			if p.runErr != nil {
				p.tb.Errorf("kjobtest: the worker's Run returned %v", p.runErr)
			}
		case <-time.After(limit):
			p.tb.Errorf("kjobtest: the worker's Run did not return within %v of Close", limit)
		}
		select {
		case <-p.letters:
		case <-time.After(limit):
			p.tb.Errorf("kjobtest: the dead-letter reader did not stop within %v of Close", limit)
		}
	})
}

// recorder wraps the handler under test to record each call. Panics are
// turned into errors inside it, as the worker does, so the recorded error
// is the one the worker sees.
func (p *Pipeline) recorder(h kjob.Handler) kjob.Handler {
	h = kjob.Recover()(h)
	return kjob.HandlerFunc(func(ctx context.Context, j *kjob.Job) error {
		// Recorded as it starts, so that a call that never returns (an
		// abandoned one) is counted too.
		p.mu.Lock()
		i := len(p.attempts[j.ID()])
		p.attempts[j.ID()] = append(p.attempts[j.ID()], Attempt{Attempt: j.Attempt(), FencingToken: j.FencingToken(), Started: time.Now()})
		p.mu.Unlock()
		err := h.HandleJob(ctx, j)
		p.mu.Lock()
		a := &p.attempts[j.ID()][i]
		if !a.Abandoned {
			a.Err = err
		}
		a.Finished = time.Now()
		p.mu.Unlock()
		p.notify()
		return err
	})
}

// executed is the worker's OnExecuted hook.
func (p *Pipeline) executed(e worker.Execution) {
	p.mu.Lock()
	p.execs[e.WindowID] = append(p.execs[e.WindowID], e)
	if e.Outcome == worker.OutcomeAbandoned {
		for i := range p.attempts[e.WindowID] {
			if a := &p.attempts[e.WindowID][i]; a.FencingToken == e.Token && a.Finished.IsZero() {
				a.Abandoned, a.Err = true, e.Err
			}
		}
	}
	p.mu.Unlock()
	p.notify()
}

// readLetters reads the dead-letter topic into p.deadMail until ctx ends.
func (p *Pipeline) readLetters(ctx context.Context, cl *kgo.Client) {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, part int32, err error) {
			if !errors.Is(err, context.Canceled) {
				p.opts.Logger.Warn("kjobtest: reading the dead-letter topic", "topic", topic, "partition", part, "err", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			l, err := dlq.Parse(r)
			if err != nil {
				p.opts.Logger.Warn("kjobtest: unreadable dead letter", "offset", r.Offset, "err", err)
				return
			}
			d := &DeadLetter{Reason: l.Reason, Attempts: l.Attempts, Worker: l.Worker, At: l.At, Partition: l.Origin.Partition, Offset: l.Origin.Offset}
			if m, err := jobmsg.Unmarshal(l.Value); err == nil {
				d.WindowID = m.ID
			}
			p.mu.Lock()
			p.deadMail[origin{l.Origin.Partition, l.Origin.Offset}] = d
			p.mu.Unlock()
			p.notify()
		})
	}
}

// notify wakes every Wait.
func (p *Pipeline) notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}
