package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// go-redis retries a failed dial on a goroutine of its own that sleeps a
// second between tries and ends with the client: tests that kill Redis may
// end while one sleeps.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

const (
	testTopic = "w"
	testGroup = "g"
	testDLQ   = "w.dlq"
)

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// env is one test's Kafka, Redis and store.
type env struct {
	t       *testing.T
	brokers []string
	redis   *testenv.Redis
	store   *countingStore
	prod    *kgo.Client
}

func newEnv(t *testing.T, partitions int32, claimTTL time.Duration) *env {
	t.Helper()
	return newEnvWith(t, partitions, claimTTL, testenv.NewRedis(t))
}

// newDurableEnv is newEnv with a Redis that keeps its data across
// Kill and Restart (testenv.NewDurableRedis), as production Redis must.
func newDurableEnv(t *testing.T, partitions int32, claimTTL time.Duration) *env {
	t.Helper()
	return newEnvWith(t, partitions, claimTTL, testenv.NewDurableRedis(t))
}

func newEnvWith(t *testing.T, partitions int32, claimTTL time.Duration, r *testenv.Redis) *env {
	t.Helper()
	brokers := testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	s, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "test", ClaimTTL: claimTTL})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(prod).CreateTopic(ctx, partitions, 1, nil, testTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return &env{t: t, brokers: brokers, redis: r, store: &countingStore{Store: s, proofs: map[string]time.Time{}}, prod: prod}
}

// countingStore is the real dedupe.Store, counting what it answers and
// recording when each claim was last proven.
type countingStore struct {
	*dedupe.Store
	claimErrs    atomic.Int64 // failed ClaimBatch calls
	completeErrs atomic.Int64 // failed Settle calls with a complete in them
	busy         atomic.Int64 // claims answered Busy

	batchClaims, batchClaimed atomic.Int64 // ClaimBatch calls and windows
	chainCalls, chainClaimed  atomic.Int64 // Settle calls that claimed a next window, and those windows
	unclaimed                 atomic.Int64 // windows given back by an unclaim
	settleCalls               atomic.Int64 // Settle calls
	extendCalls               atomic.Int64 // Settle calls that extend
	claimBatchDelay           atomic.Int64 // the next ClaimBatch answers this many ns late

	mu     sync.Mutex
	proofs map[string]time.Time // "id/token": start of the last claim or extend that succeeded
}

// errs counts the failed claim and complete calls.
func (s *countingStore) errs() int64 { return s.claimErrs.Load() + s.completeErrs.Load() }

func proofKey(id string, token int64) string { return fmt.Sprintf("%s/%d", id, token) }

func (s *countingStore) proved(id string, token int64, at time.Time) {
	s.mu.Lock()
	s.proofs[proofKey(id, token)] = at
	s.mu.Unlock()
}

// proofOf returns when the first claim of id that succeeded was proven
// (its claim call's start, or an extend since); zero if none.
func (s *countingStore) proofOf(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for k, at := range s.proofs {
		if strings.HasPrefix(k, id+"/") && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// proof returns when the claim of token on id was last proven.
func (s *countingStore) proof(id string, token int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proofs[proofKey(id, token)]
}

func (s *countingStore) Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error) {
	s.settleCalls.Add(1)
	start := time.Now()
	res, err := s.Store.Settle(ctx, ss, runs...)
	completes, extends, chained := false, false, false
	for i, st := range ss {
		switch st.Op {
		case dedupe.OpComplete:
			completes = true
			if st.Next != "" && err == nil {
				switch c := res[i].Next; c.Outcome {
				case dedupe.Claimed:
					chained = true
					s.chainClaimed.Add(1)
					s.proved(c.WindowID, c.Token, start)
				case dedupe.Busy:
					s.busy.Add(1)
				}
			}
		case dedupe.OpUnclaim:
			s.unclaimed.Add(1)
		case dedupe.OpExtend:
			extends = true
			if err == nil && res[i].Err == nil {
				s.proved(st.ID, st.Token, start)
			}
		}
	}
	if extends {
		s.extendCalls.Add(1)
	}
	if chained {
		s.chainCalls.Add(1)
	}
	if err != nil && completes {
		s.completeErrs.Add(1)
	}
	return res, err
}

func (s *countingStore) ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error) {
	s.batchClaims.Add(1)
	s.batchClaimed.Add(int64(len(ids)))
	start := time.Now()
	cs, err := s.Store.ClaimBatch(ctx, ids, owner)
	if err != nil {
		s.claimErrs.Add(1)
	}
	for _, c := range cs {
		switch c.Outcome {
		case dedupe.Claimed:
			s.proved(c.WindowID, c.Token, start)
		case dedupe.Busy:
			s.busy.Add(1)
		}
	}
	if d := time.Duration(s.claimBatchDelay.Swap(0)); d > 0 {
		time.Sleep(d) // a slow answer: the claims age on the way back
	}
	return cs, err
}

var defaultPolicy = jobmsg.Policy{
	Timeout:     jobmsg.Duration(10 * time.Second),
	MaxAttempts: 3,
	Backoff:     jobmsg.Duration(10 * time.Millisecond),
	MaxBackoff:  jobmsg.Duration(50 * time.Millisecond),
}

// window builds window i of job, run by handler h: hourly windows from
// 2000-01-01, all in the past for i < 230,000. A window whose start has
// not come is held until it (the window rules' Held), so a base near
// today made a benchmark's backlog of 10,000 windows stop at the
// 7,983rd on 2026-11-29.
func window(job, h string, i int, pol jobmsg.Policy) *jobmsg.Message {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
	return &jobmsg.Message{
		ID: jobmsg.WindowID(job, start), Job: job, Handler: h,
		Window:      jobmsg.Window{Start: start, End: start.Add(time.Hour)},
		ScheduledAt: start, PublishedAt: start.Add(time.Second),
		Trigger: jobmsg.TriggerSchedule, Policy: pol,
	}
}

func (e *env) record(m *jobmsg.Message) *kgo.Record {
	e.t.Helper()
	rec, err := jobmsg.Record(testTopic, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func (e *env) produce(recs ...*kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

func (e *env) publish(ms ...*jobmsg.Message) {
	e.t.Helper()
	recs := make([]*kgo.Record, len(ms))
	for i, m := range ms {
		recs[i] = e.record(m)
	}
	e.produce(recs...)
}

// committed returns the group's committed offsets of the windows topic.
func (e *env) committed() map[int32]int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os, err := kadm.NewClient(e.prod).FetchOffsets(ctx, testGroup)
	if err != nil {
		e.t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == testTopic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// execs records OnExecuted calls.
type execs struct {
	mu   sync.Mutex
	list []Execution
}

func (x *execs) add(e Execution) {
	x.mu.Lock()
	x.list = append(x.list, e)
	x.mu.Unlock()
}

func (x *execs) all() []Execution {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.list)
}

// of returns the executions of window id.
func (x *execs) of(id string) []Execution {
	var out []Execution
	for _, e := range x.all() {
		if e.WindowID == id {
			out = append(out, e)
		}
	}
	return out
}

func (x *execs) count(outcome string) int {
	n := 0
	for _, e := range x.all() {
		if e.Outcome == outcome {
			n++
		}
	}
	return n
}

func outcomes(es []Execution) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Outcome
	}
	return out
}

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)

func (e *env) config(id string, h handler.Handler, x *execs) Config {
	return Config{
		Brokers:             e.brokers,
		Topic:               testTopic,
		Group:               testGroup,
		Store:               e.store,
		Handler:             h,
		WorkerID:            id,
		Grace:               2 * time.Second,
		ClaimExtendInterval: 100 * time.Millisecond,
		SessionTimeout:      2 * time.Second,
		HeartbeatInterval:   100 * time.Millisecond,
		Logger:              testLogger(e.t).With("test_worker", id),
		Now:                 func() time.Time { return testNow },
		OnExecuted:          x.add,
	}
}

// start runs a worker (after before, if given, has set it up); the
// returned stop cancels it and waits for Run.
func start(t *testing.T, cfg Config, before ...func(*Worker)) (*Worker, func()) {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("worker %s: Run did not return within 60s of cancel", cfg.WorkerID)
			}
		})
	}
	t.Cleanup(stop)
	return w, stop
}

func TestConfigValidation(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "test", ClaimTTL: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ok := Config{Brokers: []string{"x:1"}, Store: store, Handler: handler.NewMux(), WorkerID: "w1"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Config.Brokers is empty"},
		{"no store", func(c *Config) { c.Store = nil }, "Config.Store is nil"},
		{"no handler", func(c *Config) { c.Handler = nil }, "Config.Handler is nil"},
		{"no worker id", func(c *Config) { c.WorkerID = "" }, "Config.WorkerID is empty"},
		{"negative grace", func(c *Config) { c.Grace = -1 }, "Config.Grace = -1ns is negative"},
		{"negative extend", func(c *Config) { c.ClaimExtendInterval = -time.Second }, "Config.ClaimExtendInterval = -1s is negative; set a positive duration, or 0 for the default 2s"},
		{"extend too slow", func(c *Config) { c.ClaimExtendInterval = 3 * time.Second },
			// keepalive.NewPolicy, the primitive that relies on the rule, is
			// its one guard below kjob.WorkerConfig.
			"worker: Config.ClaimExtendInterval = 3s with the store's ClaimTTL 6s: keepalive: renew interval = 3s must be less than TTL/2 = 3s (TTL 6s): lower the interval or raise the TTL"},
		{"dlq is topic", func(c *Config) { c.Topic = "a"; c.DeadLetterTopic = "a" }, `Config.DeadLetterTopic = "a" is the windows topic`},
		{"negative rf", func(c *Config) { c.ReplicationFactor = -1 }, "Config.ReplicationFactor = -1 is negative"},
		{"heartbeat", func(c *Config) { c.SessionTimeout = time.Second; c.HeartbeatInterval = time.Second }, "Config.HeartbeatInterval = 1s is not below Config.SessionTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	cfg := ok
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Topic != DefaultTopic || cfg.Group != DefaultGroup || cfg.DeadLetterTopic != DefaultTopic+".dlq" || cfg.ReplicationFactor != 1 ||
		cfg.Grace != partition.DefaultGrace || cfg.ClaimExtendInterval != 2*time.Second || cfg.Now == nil || cfg.Logger == nil {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

func TestBackoff(t *testing.T) {
	p := jobmsg.Policy{Backoff: jobmsg.Duration(100 * time.Millisecond), MaxBackoff: jobmsg.Duration(time.Second)}
	for _, tc := range []struct {
		attempt int
		full    time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {60, time.Second}} {
		for range 100 {
			d := retryDelay(p, tc.attempt)
			if d < tc.full/2 || d > tc.full {
				t.Fatalf("retryDelay(attempt %d) = %v, want within [%v, %v]", tc.attempt, d, tc.full/2, tc.full)
			}
		}
	}
	if d := retryDelay(jobmsg.Policy{}, 3); d != 0 {
		t.Fatalf("backoff with zero policy = %v, want 0", d)
	}
}

// 50 windows, 3 workers sharing 4 partitions (joining while windows are
// being processed): every window runs exactly once.
func TestEachWindowRunsOnce(t *testing.T) {
	e := newEnv(t, 4, 5*time.Second)
	var mu sync.Mutex
	runs := map[string]int{}
	mux := handler.NewMux()
	mux.HandleFunc("count", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		runs[j.ID()]++
		mu.Unlock()
		select {
		case <-time.After(20 * time.Millisecond): // some work, so rebalances meet in-flight windows
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	var ms []*jobmsg.Message
	for j := range 10 {
		for i := range 5 {
			ms = append(ms, window(fmt.Sprintf("job-%d", j), "count", i, defaultPolicy))
		}
	}
	e.publish(ms...)
	x := &execs{}
	var ws []*Worker
	var stops []func()
	for i := range 3 {
		w, stop := start(t, e.config(fmt.Sprintf("w%d", i), mux, x))
		ws = append(ws, w)
		stops = append(stops, stop)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		n := 0
		for _, w := range ws {
			if len(w.Assigned()) == 0 {
				return false
			}
			n += len(w.Assigned())
		}
		return n == 4
	}, "3 workers share the 4 partitions")
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) >= 50 }, "50 windows done (have %d)", x.count(OutcomeDone))
	testenv.Eventually(t, 10*time.Second, func() bool {
		c := e.committed()
		return c[0]+c[1]+c[2]+c[3] == 50
	}, "all 50 offsets committed (have %v)", e.committed())
	for _, stop := range stops {
		stop()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 50 {
		t.Errorf("%d distinct windows ran, want 50", len(runs))
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("window %s ran %d times, want once", id, n)
		}
	}
	if got := x.count(OutcomeDone); got != 50 {
		t.Errorf("%d done executions, want 50", got)
	}
}

// A handler that fails twice, then succeeds, runs as attempts 1, 2, 3 with
// increasing fencing tokens.
func TestRetriesWithNewAttemptsAndTokens(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	type call struct {
		attempt int
		token   int64
	}
	var mu sync.Mutex
	var calls []call
	mux := handler.NewMux()
	mux.HandleFunc("flaky", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		calls = append(calls, call{j.Attempt(), j.FencingToken()})
		n := len(calls)
		mu.Unlock()
		if n <= 2 {
			return fmt.Errorf("transient failure %d", n)
		}
		return nil
	})
	m := window("report", "flaky", 0, jobmsg.Policy{Timeout: jobmsg.Duration(5 * time.Second), MaxAttempts: 5,
		Backoff: jobmsg.Duration(10 * time.Millisecond), MaxBackoff: jobmsg.Duration(40 * time.Millisecond)})
	e.publish(m)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == 1 }, "window done")
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("handler ran %d times (%v), want 3", len(calls), calls)
	}
	for i, c := range calls {
		if c.attempt != i+1 {
			t.Errorf("call %d: attempt %d, want %d", i, c.attempt, i+1)
		}
		if i > 0 && c.token <= calls[i-1].token {
			t.Errorf("call %d: token %d not above the previous %d", i, c.token, calls[i-1].token)
		}
	}
	es := x.of(m.ID)
	if got, want := outcomes(es), []string{OutcomeFailed, OutcomeFailed, OutcomeDone}; !slices.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if es[0].Err == nil || !strings.Contains(es[0].Err.Error(), "transient failure 1") {
		t.Errorf("first execution's Err = %v, want the handler's error", es[0].Err)
	}
}

// lettersByOffset indexes dead letters by the offset of their original
// record: windows of different jobs settle concurrently, so their letters
// are written in the order they were decided, not in offset order.
func lettersByOffset(t *testing.T, dlq []*kgo.Record) map[int64]*kgo.Record {
	t.Helper()
	out := map[int64]*kgo.Record{}
	for _, d := range dlq {
		v, _ := header(d, HeaderDLQOffset)
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("dead letter without a valid %s header: %q", HeaderDLQOffset, v)
		}
		out[off] = d
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Permanent failures, exhausted attempts, undecodable records, records of an
// unknown schema version and windows of an unknown handler are dead-lettered
// with their reason, and the partition moves on.
func TestDeadLetters(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	mux := handler.NewMux()
	mux.HandleFunc("perm", func(context.Context, *handler.Job) error {
		return fmt.Errorf("bad payload: %w", handler.ErrPermanent)
	})
	var flakyCalls atomic.Int64
	mux.HandleFunc("flaky", func(context.Context, *handler.Job) error {
		flakyCalls.Add(1)
		return errors.New("downstream unavailable")
	})
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })

	pol2 := defaultPolicy
	pol2.MaxAttempts = 2
	perm := e.record(window("perm", "perm", 0, defaultPolicy))
	flaky := e.record(window("flaky", "flaky", 0, pol2))
	junk := &kgo.Record{Topic: testTopic, Key: []byte("junk"), Value: []byte("not json"), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	v2 := e.record(window("future", "ok", 0, defaultPolicy))
	v2.Value = bytes.Replace(v2.Value, []byte(`"v":1`), []byte(`"v":2`), 1)
	unknown := e.record(window("mystery", "nope", 0, defaultPolicy))
	ok := window("fine", "ok", 0, defaultPolicy)
	e.produce(perm, flaky, junk, v2, unknown, e.record(ok))

	x := &execs{}
	_, stop := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(ok.ID)) == 1 }, "the valid window beside the bad ones runs")
	testenv.Eventually(t, 20*time.Second, func() bool { return e.committed()[0] == 6 }, "all six records settled and committed")
	stop()
	if got := outcomes(x.of(ok.ID)); !slices.Equal(got, []string{OutcomeDone}) {
		t.Errorf("valid window: outcomes %v, want [done]", got)
	}
	if n := flakyCalls.Load(); n != 2 {
		t.Errorf("flaky handler ran %d times, want MaxAttempts = 2", n)
	}
	dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
	if len(dlq) != 5 {
		t.Fatalf("dead-letter topic has %d records, want 5", len(dlq))
	}
	byOffset := lettersByOffset(t, dlq)
	for i, tc := range []struct {
		src      *kgo.Record
		reason   string
		attempts string
	}{
		{perm, "permanent failure", "1"},
		{flaky, "downstream unavailable", "2"},
		{junk, "undecodable record", "0"},
		{v2, "schema version", "0"},
		{unknown, "unknown handler", "1"},
	} {
		d := byOffset[int64(i)]
		if d == nil {
			t.Errorf("no dead letter of offset %d", i)
			continue
		}
		if !bytes.Equal(d.Key, tc.src.Key) || !bytes.Equal(d.Value, tc.src.Value) {
			t.Errorf("dead letter %d: key/value %q/%q, want the original %q/%q", i, d.Key, d.Value, tc.src.Key, tc.src.Value)
		}
		for _, h := range tc.src.Headers {
			if v, ok := header(d, h.Key); !ok || v != string(h.Value) {
				t.Errorf("dead letter %d: original header %s = %q missing (got %q)", i, h.Key, h.Value, v)
			}
		}
		want := map[string]string{
			HeaderDLQTopic:     testTopic,
			HeaderDLQPartition: "0",
			HeaderDLQOffset:    fmt.Sprint(i),
			HeaderDLQAttempts:  tc.attempts,
			HeaderDLQWorker:    "w1",
			HeaderDLQTime:      testNow.Format(time.RFC3339Nano),
		}
		for k, v := range want {
			if got, _ := header(d, k); got != v {
				t.Errorf("dead letter %d: header %s = %q, want %q", i, k, got, v)
			}
		}
		if reason, _ := header(d, HeaderDLQReason); !strings.Contains(reason, tc.reason) {
			t.Errorf("dead letter %d: reason %q, want it to mention %q", i, reason, tc.reason)
		}
	}
	if n := x.count(OutcomeDeadLettered); n != 5 {
		t.Errorf("%d dead-lettered executions, want 5", n)
	}
}

// A handler that ignores its cancelled context is abandoned after Grace;
// the next window of the partition still runs.
func TestAbandonsHandlerThatIgnoresCancellation(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) }) // lets the abandoned goroutine end before goleak looks
	mux := handler.NewMux()
	mux.HandleFunc("stuck", func(ctx context.Context, j *handler.Job) error {
		<-unblock // ignores ctx
		return nil
	})
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })
	pol := defaultPolicy
	pol.Timeout = jobmsg.Duration(100 * time.Millisecond)
	pol.MaxAttempts = 1
	stuck := window("stuck", "stuck", 0, pol)
	ok := window("fine", "ok", 0, defaultPolicy)
	e.publish(stuck, ok)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Grace = 300 * time.Millisecond
	start(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(ok.ID)) == 1 }, "the next window runs")
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(stuck.ID)) == 2 }, "the stuck window is abandoned and dead-lettered")
	es := x.of(stuck.ID)
	if got, want := outcomes(es), []string{OutcomeAbandoned, OutcomeDeadLettered}; !slices.Equal(got, want) {
		t.Fatalf("stuck window: outcomes %v, want %v", got, want)
	}
	if !errors.Is(es[0].Err, errAbandoned) || !strings.Contains(es[0].Err.Error(), "abandoned after timeout") {
		t.Errorf("abandoned execution's Err = %v", es[0].Err)
	}
	if got := outcomes(x.of(ok.ID)); !slices.Equal(got, []string{OutcomeDone}) {
		t.Errorf("next window: outcomes %v, want [done]", got)
	}
}

// While Redis is down no handler runs and no offset is committed; after it
// is back, processing resumes.
func TestStoreOutageBlocksWithoutCommitting(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	if !e.redis.Real() {
		t.Skip("needs a redis-server to kill; have " + e.redis.String())
	}
	var ran sync.Map
	mux := handler.NewMux()
	mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
		ran.Store(j.ID(), true)
		return nil
	})
	a, b := window("job", "h", 0, defaultPolicy), window("job", "h", 1, defaultPolicy)
	e.publish(a)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(x.of(a.ID)) == 1 }, "first window done")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 1 }, "first window committed")

	e.redis.Kill()
	e.publish(b)
	testenv.Eventually(t, 20*time.Second, func() bool { return e.store.claimErrs.Load() >= 3 }, "worker tries to claim the second window while Redis is down")
	if _, ok := ran.Load(b.ID); ok {
		t.Fatal("second window ran while Redis was down")
	}
	if got := e.committed()[0]; got != 1 {
		t.Fatalf("committed offset %d while Redis is down, want 1 (nothing past the unclaimed window)", got)
	}
	if n := len(x.of(b.ID)); n != 0 {
		t.Fatalf("second window has executions %v while Redis is down", x.of(b.ID))
	}

	e.redis.Restart()
	testenv.Eventually(t, 20*time.Second, func() bool { _, ok := ran.Load(b.ID); return ok }, "second window runs once Redis is back")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 2 }, "second window committed")
	if got := outcomes(x.of(b.ID)); !slices.Equal(got, []string{OutcomeDone}) {
		t.Errorf("second window: outcomes %v, want [done]", got)
	}
}

// A window another worker holds a live claim on is neither run nor skipped:
// the worker waits until the claim is released, then runs it.
func TestBusyWindowWaitsForLiveClaim(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	var runs atomic.Int64
	mux := handler.NewMux()
	mux.HandleFunc("h", func(context.Context, *handler.Job) error { runs.Add(1); return nil })
	m := window("job", "h", 0, defaultPolicy)
	ctx := context.Background()
	other, err := e.store.Store.Claim(ctx, m.ID, "other-worker")
	if err != nil || other.Outcome != dedupe.Claimed {
		t.Fatalf("claim by other-worker: %+v, %v", other, err)
	}
	e.publish(m)
	x := &execs{}
	start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 20*time.Second, func() bool { return e.store.busy.Load() >= 2 }, "worker sees the window busy")
	if n := runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times while another worker holds the claim", n)
	}
	if got, ok := e.committed()[0]; ok && got != 0 {
		t.Fatalf("committed offset %d past a busy window", got)
	}
	if err := e.store.Store.Release(ctx, m.ID, other.Token, "other worker gave up"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return runs.Load() == 1 }, "window runs after the claim is released")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 1 }, "window committed")
	es := x.of(m.ID)
	if len(es) != 1 || es[0].Outcome != OutcomeDone || es[0].Attempt != 2 || es[0].Token <= other.Token {
		t.Errorf("executions %+v; want one done, attempt 2, token above %d", es, other.Token)
	}
}

// A window whose claim is taken over while its handler runs is fenced: the
// handler's context is cancelled, and the worker neither completes nor
// releases the window but waits for the new holder.
func TestFencedAttemptIsDiscarded(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	started := make(chan struct{})
	release := make(chan struct{})
	var cancelled atomic.Bool
	var runs atomic.Int64
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		if runs.Add(1) > 1 {
			return nil
		}
		close(started)
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			return ctx.Err()
		case <-release:
			return nil
		}
	})
	m := window("job", "h", 0, defaultPolicy)
	e.publish(m)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.ClaimExtendInterval = 50 * time.Millisecond
	start(t, cfg)
	testenv.Recv(t, started, 20*time.Second, "the handler starts")
	// Another worker takes the window over: Forget drops the claim (as an
	// operator's replay would), and the other worker claims it anew.
	ctx := context.Background()
	if err := e.store.Store.Forget(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	other, err := e.store.Store.Claim(ctx, m.ID, "other-worker")
	if err != nil || other.Outcome != dedupe.Claimed {
		t.Fatalf("takeover claim: %+v, %v", other, err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(x.of(m.ID)) == 1 }, "attempt fenced")
	close(release)
	if got := x.of(m.ID)[0]; got.Outcome != OutcomeFenced || !cancelled.Load() {
		t.Fatalf("first execution %+v (handler cancelled: %v), want fenced with its context cancelled", got, cancelled.Load())
	}
	if err := e.store.Store.Complete(ctx, m.ID, other.Token); err != nil {
		t.Fatalf("the new holder's Complete: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(x.of(m.ID)) == 2 }, "worker skips the window once the new holder completed it")
	if got := outcomes(x.of(m.ID)); !slices.Equal(got, []string{OutcomeFenced, OutcomeSkippedDone}) {
		t.Errorf("outcomes %v, want [fenced skipped-done]", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
}

// A handler still running when its partition is revoked past Grace is
// cancelled; the worker releases the claim and does not commit the record,
// so the partition's next owner runs the window at once as attempt 2.
func TestRevokedAttemptIsReleasedForTheNextOwner(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	started := make(chan struct{})
	var runs atomic.Int64
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		if runs.Add(1) > 1 {
			return nil
		}
		close(started)
		<-ctx.Done() // cancelled once the revoke grace is over
		return ctx.Err()
	})
	m := window("job", "h", 0, defaultPolicy)
	e.publish(m)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Grace = 200 * time.Millisecond
	_, stop := start(t, cfg)
	testenv.Recv(t, started, 20*time.Second, "the handler starts")
	stop()
	if got := outcomes(x.of(m.ID)); !slices.Equal(got, []string{OutcomeFailed}) {
		t.Fatalf("outcomes after shutdown %v, want [failed]", got)
	}
	if got, ok := e.committed()[0]; ok && got != 0 {
		t.Fatalf("committed offset %d for an interrupted window, want none", got)
	}
	start(t, e.config("w2", mux, x))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(x.of(m.ID)) == 2 }, "next owner runs the window")
	second := x.of(m.ID)[1]
	if second.Outcome != OutcomeDone || second.Attempt != 2 || e.store.busy.Load() != 0 {
		t.Errorf("second execution %+v (busy answers %d); want done as attempt 2 without waiting for the old claim", second, e.store.busy.Load())
	}
}

// partitionOf is the partition of the windows topic job's windows go to:
// the producer's partitioner (murmur2 of the key, as Kafka's Java client).
func (e *env) partitionOf(job string) int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := kadm.NewClient(e.prod).ListTopics(ctx, testTopic)
	if err != nil || td[testTopic].Err != nil {
		e.t.Fatalf("describe %s: %v %v", testTopic, err, td[testTopic].Err)
	}
	return names.JobPartition(job, len(td[testTopic].Partitions))
}
