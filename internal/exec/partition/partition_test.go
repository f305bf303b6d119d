package partition

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs to the test log when -v is given, else discards.
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

// cluster starts kfake allowing short sessions, so rebalances are quick.
func cluster(t testing.TB) []string {
	return testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
}

func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// producer returns a client that writes to explicit partitions.
func producer(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes values to partition p of topic and waits for the acks.
func produce(t *testing.T, cl *kgo.Client, topic string, p int32, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, p, err)
	}
}

// committed returns the group's committed offsets of topic by partition.
func committed(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// ledger records every Process call.
type ledger struct {
	mu    sync.Mutex
	order map[int32][]int64          // processed offsets per partition, in order
	count map[int32]map[int64]int    // calls per partition and offset
	by    map[string]map[int32]int64 // consumer -> partition -> records processed
	vals  []string
}

func newLedger() *ledger {
	return &ledger{order: map[int32][]int64{}, count: map[int32]map[int64]int{}, by: map[string]map[int32]int64{}}
}

func (l *ledger) add(who string, rec *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.order[rec.Partition] = append(l.order[rec.Partition], rec.Offset)
	if l.count[rec.Partition] == nil {
		l.count[rec.Partition] = map[int64]int{}
	}
	l.count[rec.Partition][rec.Offset]++
	if l.by[who] == nil {
		l.by[who] = map[int32]int64{}
	}
	l.by[who][rec.Partition]++
	l.vals = append(l.vals, string(rec.Value))
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.order {
		n += len(o)
	}
	return n
}

func (l *ledger) values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.vals)
}

// run starts c.Run and returns a function that cancels it and waits for
// Run to return (also registered as cleanup).
func run(t *testing.T, c *Consumer) (stop func() time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() time.Duration {
		var took time.Duration
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("Run did not return within 60s of cancel")
			}
			took = time.Since(start)
		})
		return took
	}
	t.Cleanup(func() { stop() })
	return stop
}

func baseConfig(t *testing.T, brokers []string, group, topic, member string, process ProcessFunc) Config {
	return Config{
		Brokers:           brokers,
		Group:             group,
		Topic:             topic,
		Process:           process,
		Grace:             5 * time.Second,
		SessionTimeout:    2 * time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		CommitInterval:    100 * time.Millisecond,
		InstanceID:        member,
		Logger:            testLogger(t).With("test_member", member),
	}
}

func newConsumer(t *testing.T, cfg Config) *Consumer {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func values(prefix string, from, to int) []string {
	var vs []string
	for i := from; i < to; i++ {
		vs = append(vs, fmt.Sprintf("%s-%d", prefix, i))
	}
	return vs
}

func TestConfigValidation(t *testing.T) {
	ok := Config{Brokers: []string{"x:1"}, Group: "g", Topic: "t", Process: func(context.Context, *kgo.Record) error { return nil }}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Config.Brokers is empty"},
		{"no group", func(c *Config) { c.Group = "" }, "Config.Group is empty"},
		{"no topic", func(c *Config) { c.Topic = "" }, "Config.Topic is empty"},
		{"no process", func(c *Config) { c.Process = nil }, "Config.Process and Config.Serve are nil"},
		{"negative grace", func(c *Config) { c.Grace = -time.Second }, "Config.Grace = -1s is negative"},
		{"heartbeat too slow", func(c *Config) { c.SessionTimeout = time.Second; c.HeartbeatInterval = 2 * time.Second }, "Config.HeartbeatInterval = 2s is not below Config.SessionTimeout = 1s"},
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
	if cfg.Grace != DefaultGrace || cfg.SessionTimeout != DefaultSessionTimeout || cfg.HeartbeatInterval != DefaultHeartbeatInterval || cfg.CommitInterval != DefaultCommitInterval {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

// Records are processed in order per partition, each once, and committed.
func TestInOrderPerPartition(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 4)
	pcl := producer(t, brokers)
	for p := int32(0); p < 4; p++ {
		produce(t, pcl, "t", p, values(fmt.Sprint(p), 0, 30)...)
	}
	l := newLedger()
	var mu sync.Mutex
	var assigned, revoked []int32
	cfg := baseConfig(t, brokers, "g", "t", "m1", func(_ context.Context, rec *kgo.Record) error {
		l.add("m1", rec)
		return nil
	})
	cfg.OnAssigned = func(ps []int32) { mu.Lock(); assigned = append(assigned, ps...); mu.Unlock() }
	cfg.OnRevoked = func(ps []int32) { mu.Lock(); revoked = append(revoked, ps...); mu.Unlock() }
	c := newConsumer(t, cfg)
	if c.Joined() {
		t.Error("Joined() before Run = true")
	}
	stop := run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() == 120 }, "120 records processed (have %d)", l.total())
	if !c.Joined() {
		t.Error("Joined() while consuming = false")
	}
	if got := c.Assigned(); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Errorf("Assigned() = %v, want [0 1 2 3]", got)
	}
	stop()
	if got := c.Assigned(); len(got) != 0 {
		t.Errorf("Assigned() after Run = %v, want none", got)
	}
	for p := int32(0); p < 4; p++ {
		want := make([]int64, 30)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(l.order[p], want) {
			t.Errorf("partition %d processed offsets %v, want 0..29 in order", p, l.order[p])
		}
	}
	if got := committed(t, brokers, "g", "t"); len(got) != 4 || got[0] != 30 || got[1] != 30 || got[2] != 30 || got[3] != 30 {
		t.Errorf("committed offsets = %v, want 30 for each of 4 partitions", got)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(assigned)
	slices.Sort(revoked)
	if !slices.Equal(assigned, []int32{0, 1, 2, 3}) || !slices.Equal(revoked, []int32{0, 1, 2, 3}) {
		t.Errorf("OnAssigned got %v, OnRevoked got %v; want all 4 partitions each", assigned, revoked)
	}
}

// Two members split four partitions; when one leaves, the other takes all
// and continues exactly after the committed offsets: no offset is processed
// twice and none is skipped, across the join and the leave.
func TestHandoverProcessesEachRecordOnce(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 4)
	pcl := producer(t, brokers)
	l := newLedger()
	process := func(who string) ProcessFunc {
		return func(ctx context.Context, rec *kgo.Record) error {
			l.add(who, rec)
			// Slow enough that records are in flight at every rebalance.
			select {
			case <-time.After(2 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	a := newConsumer(t, baseConfig(t, brokers, "g", "t", "a", process("a")))
	b := newConsumer(t, baseConfig(t, brokers, "g", "t", "b", process("b")))
	stopA := run(t, a)
	defer stopA()

	// Keep producing through the whole test, so every rebalance happens
	// with fetched and in-flight records.
	var produced int
	pctx, pcancel := context.WithCancel(context.Background())
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			for p := int32(0); p < 4; p++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)}).FirstErr()
				cancel()
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
			}
			produced += 4
			time.Sleep(3 * time.Millisecond) // production pace, not a wait for a condition
		}
	}()
	stopProducing := func() int {
		pcancel()
		pwg.Wait()
		return produced
	}
	defer stopProducing()

	testenv.Eventually(t, 20*time.Second, func() bool { return len(a.Assigned()) == 4 && l.total() > 40 }, "a owns all 4 partitions and processes")
	stopB := run(t, b)
	testenv.Eventually(t, 20*time.Second, func() bool {
		pa, pb := a.Assigned(), b.Assigned()
		return len(pa) == 2 && len(pb) == 2
	}, "a and b split the 4 partitions (a %v, b %v)", a.Assigned(), b.Assigned())
	before := l.total()
	testenv.Eventually(t, 20*time.Second, func() bool {
		l.mu.Lock()
		nb := len(l.by["b"])
		l.mu.Unlock()
		return nb == 2 && l.total() > before+40
	}, "b processes its partitions")
	stopB()
	testenv.Eventually(t, 20*time.Second, func() bool { return len(a.Assigned()) == 4 }, "a takes all 4 partitions back (has %v)", a.Assigned())
	before = l.total()
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() > before+40 }, "a keeps processing after the handover")
	n := stopProducing()
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() >= n }, "all %d produced records processed (have %d)", n, l.total())
	stopA()

	l.mu.Lock()
	defer l.mu.Unlock()
	for p := int32(0); p < 4; p++ {
		for off, k := range l.count[p] {
			if k != 1 {
				t.Errorf("partition %d offset %d processed %d times, want once", p, off, k)
			}
		}
		if !slices.IsSorted(l.order[p]) {
			t.Errorf("partition %d processed out of order: %v", p, l.order[p])
		}
		if got := len(l.order[p]); got != n/4 {
			t.Errorf("partition %d: processed %d records, produced %d", p, got, n/4)
		}
	}
	t.Logf("produced %d; a processed %v, b processed %v", n, l.by["a"], l.by["b"])
}

// A revoke lets the in-flight record finish within Grace: its context stays
// live, it is committed, and Run returns without waiting out the Grace.
func TestRevokeGraceLetsInflightFinish(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 1)
	produce(t, producer(t, brokers), "t", 0, "slow", "next")
	started := make(chan struct{})
	release := make(chan struct{})
	var ctxErrAtEnd error
	var calls []string
	var mu sync.Mutex
	cfg := baseConfig(t, brokers, "g", "t", "m", func(ctx context.Context, rec *kgo.Record) error {
		mu.Lock()
		calls = append(calls, string(rec.Value))
		mu.Unlock()
		if string(rec.Value) != "slow" {
			return nil
		}
		close(started)
		select {
		case <-release:
			mu.Lock()
			ctxErrAtEnd = ctx.Err()
			mu.Unlock()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg.Grace = 30 * time.Second
	c := newConsumer(t, cfg)
	stop := run(t, c)
	testenv.Recv(t, started, 20*time.Second, "the record starts")
	var took time.Duration
	done := make(chan struct{})
	go func() { took = stop(); close(done) }()
	// Shutdown is under way (Run's context is cancelled); the record
	// is still running with a live context. Let it finish.
	testenv.Eventually(t, 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closing
	}, "shutdown started")
	close(release)
	testenv.Recv(t, done, time.Minute, "Run returns after the record finished")
	mu.Lock()
	defer mu.Unlock()
	if ctxErrAtEnd != nil {
		t.Errorf("in-flight record's context was cancelled during the grace period: %v", ctxErrAtEnd)
	}
	if !slices.Equal(calls, []string{"slow"}) {
		t.Errorf("processed %v; want only the in-flight record (no new record after the revoke)", calls)
	}
	if took > 20*time.Second {
		t.Errorf("Run took %v to return; the in-flight record finished long before the 30s grace", took)
	}
	if got := committed(t, brokers, "g", "t"); got[0] != 1 {
		t.Errorf("committed offset = %v, want 1 (the record that finished within grace)", got)
	}
}

// When Grace runs out, the in-flight record's context is cancelled and the
// record is not committed.
func TestRevokeGraceExpiryCancels(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 1)
	produce(t, producer(t, brokers), "t", 0, "a", "stuck")
	started := make(chan struct{})
	cfg := baseConfig(t, brokers, "g", "t", "m", func(ctx context.Context, rec *kgo.Record) error {
		if string(rec.Value) != "stuck" {
			return nil
		}
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	cfg.Grace = 300 * time.Millisecond
	c := newConsumer(t, cfg)
	stop := run(t, c)
	testenv.Recv(t, started, 20*time.Second, "the stuck record starts")
	took := stop()
	if took < cfg.Grace {
		t.Errorf("Run returned after %v, before the grace of %v", took, cfg.Grace)
	}
	if got := committed(t, brokers, "g", "t"); got[0] != 1 {
		t.Errorf("committed offset = %v, want 1 (\"a\" done, \"stuck\" cancelled and not committed)", got)
	}
}

// A lost partition (the coordinator no longer knows the member) has its
// context cancelled at once, without waiting for Grace, and its in-flight
// record is not committed: after rejoining, the record is processed again.
func TestLossCancelsAtOnceAndCommitsNothing(t *testing.T) {
	c0 := testenv.Cluster(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	brokers := c0.ListenAddrs()
	createTopic(t, brokers, "t", 1)
	produce(t, producer(t, brokers), "t", 0, "a", "b", "held", "c")
	started := make(chan struct{})
	var once sync.Once
	var cancelledAfter time.Duration
	l := newLedger()
	var lostMu sync.Mutex
	var revokes [][]int32
	cfg := baseConfig(t, brokers, "g", "t", "m", func(ctx context.Context, rec *kgo.Record) error {
		l.add("m", rec)
		first := false
		if string(rec.Value) == "held" {
			once.Do(func() { first = true })
		}
		if !first {
			return nil
		}
		close(started)
		t0 := time.Now()
		<-ctx.Done()
		lostMu.Lock()
		cancelledAfter = time.Since(t0)
		lostMu.Unlock()
		return ctx.Err()
	})
	cfg.Grace = time.Minute // a revoke would wait this long; a loss must not
	cfg.OnRevoked = func(ps []int32) { lostMu.Lock(); revokes = append(revokes, ps); lostMu.Unlock() }
	c := newConsumer(t, cfg)
	stop := run(t, c)
	testenv.Recv(t, started, 20*time.Second, "the third record starts")
	testenv.Eventually(t, 10*time.Second, func() bool { return committed(t, brokers, "g", "t")[0] == 2 }, "offsets of a, b committed")

	// The next heartbeat is answered UNKNOWN_MEMBER_ID: kgo treats the
	// session as lost.
	c0.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: "g", TopLevel: true, Err: kerr.UnknownMemberID, Count: 1})

	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() >= 5 }, "held record processed again after the loss and rejoin (calls %v)", l.values())
	testenv.Eventually(t, 10*time.Second, func() bool { return committed(t, brokers, "g", "t")[0] == 4 }, "all 4 committed after rejoin")
	stop()
	lostMu.Lock()
	defer lostMu.Unlock()
	if cancelledAfter > 5*time.Second {
		t.Errorf("lost partition's context cancelled after %v; want at once (grace is %v)", cancelledAfter, cfg.Grace)
	}
	if len(revokes) == 0 || !slices.Equal(revokes[0], []int32{0}) {
		t.Errorf("OnRevoked calls %v; want the loss of partition 0 reported first", revokes)
	}
	if got, want := l.values(), []string{"a", "b", "held", "held", "c"}; !slices.Equal(got, want) {
		t.Errorf("processed %v, want %v", got, want)
	}
}

// A member whose join is not answered (a coordinator that lost it) still
// shuts down within the leave's timeout: Close would otherwise wait for
// the join in flight until the rebalance timeout (a chaos run's worker
// did not exit within 30 s of SIGTERM).
func TestShutdownIsNotHeldByAJoinInFlight(t *testing.T) {
	c0 := testenv.Cluster(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	brokers := c0.ListenAddrs()
	createTopic(t, brokers, "t", 1)
	c := newConsumer(t, baseConfig(t, brokers, "g", "t", "m", func(context.Context, *kgo.Record) error { return nil }))
	stop := run(t, c)
	testenv.Eventually(t, 20*time.Second, c.Joined, "the member joins")

	// From now on every JoinGroup is held until the test ends; the next
	// heartbeat loses the session, so the member rejoins and waits.
	release, held := make(chan struct{}), make(chan struct{}, 1)
	t.Cleanup(func() { close(release) })
	c0.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c0.KeepControl()
		select {
		case held <- struct{}{}:
		default:
		}
		c0.SleepControl(func() { <-release })
		return nil, nil, false
	})
	c0.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: "g", TopLevel: true, Err: kerr.UnknownMemberID, Count: 1})
	testenv.Recv(t, held, 20*time.Second, "a rejoin held by the broker")

	if took := stop(); took > leaveTimeout+5*time.Second {
		t.Errorf("Run returned %v after its context ended, with a join in flight; want within the leave timeout (%v) and a few seconds", took, leaveTimeout)
	}
}

// Records of an aborted transaction are never processed (read committed).
func TestReadCommitted(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 1)
	txn := producer(t, brokers, kgo.TransactionalID("test-txn"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		value string
		end   kgo.TransactionEndTry
	}{{"aborted", kgo.TryAbort}, {"committed", kgo.TryCommit}} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte(tc.value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, tc.end); err != nil {
			t.Fatal(err)
		}
	}
	l := newLedger()
	c := newConsumer(t, baseConfig(t, brokers, "g", "t", "m", func(_ context.Context, rec *kgo.Record) error {
		l.add("m", rec)
		return nil
	}))
	stop := run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool { return slices.Contains(l.values(), "committed") }, "committed record processed")
	stop()
	if got := l.values(); !slices.Equal(got, []string{"committed"}) {
		t.Errorf("processed %v, want only [committed]", got)
	}
}

// A partition whose goroutine falls behind is paused, not blocking the
// poll loop: other partitions keep flowing, and all records arrive in order
// once the slow one catches up.
func TestBackpressurePausesOnlyTheSlowPartition(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 2)
	pcl := producer(t, brokers)
	const bound = 100
	produce(t, pcl, "t", 0, values("slow", 0, 4*bound)...)
	gate := make(chan struct{})
	l := newLedger()
	cfg := baseConfig(t, brokers, "g", "t", "m", func(ctx context.Context, rec *kgo.Record) error {
		if rec.Partition == 0 {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		l.add("m", rec)
		return nil
	})
	cfg.MaxUncommitted = bound
	c := newConsumer(t, cfg)
	stop := run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool {
		p := c.Client().PauseFetchPartitions(nil)
		return slices.Contains(p["t"], 0)
	}, "partition 0 paused while its goroutine is blocked")
	uncommitted := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return (&Owned{p: c.parts[0]}).Uncommitted()
	}
	held := uncommitted()
	if held < bound {
		t.Errorf("partition 0 paused holding %d uncommitted records; want at least the bound %d", held, bound)
	}
	// More records for both: partition 1 flows (so fetches go on), and
	// partition 0 fetches nothing more while paused.
	produce(t, pcl, "t", 0, values("slow", 4*bound, 8*bound)...)
	produce(t, pcl, "t", 1, values("fast", 0, 50)...)
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() == 50 }, "partition 1 flows while partition 0 is paused")
	if got := uncommitted(); got != held {
		t.Errorf("partition 0 holds %d uncommitted records after more were produced, %d before: fetched while paused", got, held)
	}
	close(gate)
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() == 50+8*bound }, "partition 0 catches up (have %d)", l.total())
	stop()
	want := make([]int64, 8*bound)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(l.order[0], want) {
		t.Errorf("partition 0 processed %d records, not 0..%d in order", len(l.order[0]), 8*bound-1)
	}
}

// A ServeFunc takes data records in order, never a transaction marker,
// and may settle them in any order: the committed offset moves only past
// the contiguous prefix of settled records (markers included), so a
// record left unsettled holds the commit point below it however many
// records above it are settled.
func TestServeCommitsOnlyTheSettledPrefix(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 1)
	txn := producer(t, brokers, kgo.TransactionalID("serve-txn"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, 0, 20)
		for _, v := range values(fmt.Sprint(i), 0, 20) {
			recs = append(recs, &kgo.Record{Topic: "t", Partition: 0, Value: []byte(v)})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	l := newLedger()
	held := make(chan *kgo.Record, 1)
	release := make(chan struct{})
	cfg := baseConfig(t, brokers, "g", "t", "m", nil)
	cfg.Process = nil
	cfg.Serve = func(ctx context.Context, o *Owned) {
		for {
			select {
			case <-o.Halted():
				return
			case <-ctx.Done():
				return
			case <-release:
				o.Settle(<-held)
				release = nil
			case <-o.Ready():
				recs := o.Take()
				// Settle each take newest first, keeping offset 3 back.
				for i := len(recs) - 1; i >= 0; i-- {
					rec := recs[i]
					if rec.Attrs.IsControl() {
						t.Errorf("Take returned a transaction marker at offset %d", rec.Offset)
					}
					l.add("m", rec)
					if rec.Offset == 3 {
						held <- rec
						continue
					}
					o.Settle(rec)
				}
			}
		}
	}
	c := newConsumer(t, cfg)
	stop := run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() == 100 }, "100 records taken (have %d)", l.total())
	// Every record but offset 3 is settled: the commit point stays at 3
	// (allow a commit interval for a wrong commit to show).
	time.Sleep(3 * cfg.CommitInterval) // nothing to wait on: proving that a commit does NOT happen
	if got := committed(t, brokers, "g", "t")[0]; got > 3 {
		t.Fatalf("committed offset %d while offset 3 is unsettled; want at most 3", got)
	}
	close(release)
	// 100 records and 5 commit markers: the group catches up to 105.
	testenv.Eventually(t, 20*time.Second, func() bool { return committed(t, brokers, "g", "t")[0] == 105 },
		"committed offset did not reach the end offset 105 (markers included) once offset 3 was settled")
	stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.count[0]); n != 100 {
		t.Errorf("took %d distinct records, want 100", n)
	}
	for off, k := range l.count[0] {
		if k != 1 {
			t.Errorf("offset %d taken %d times", off, k)
		}
	}
}

// On a revoke the ServeFunc is halted; what it settled before returning is
// committed, up to the first record it left unsettled: records settled
// above that gap are delivered again to the next owner.
func TestServeHaltedOnRevokeCommitsThePrefix(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 1)
	produce(t, producer(t, brokers), "t", 0, values("r", 0, 50)...)
	taken := make(chan struct{})
	halted := make(chan struct{})
	cfg := baseConfig(t, brokers, "g", "t", "m1", nil)
	cfg.Process = nil
	cfg.Serve = func(ctx context.Context, o *Owned) {
		n := 0
		for n < 50 {
			select {
			case <-ctx.Done():
				return
			case <-o.Ready():
			}
			for _, rec := range o.Take() {
				n++
				if rec.Offset != 7 { // 7 stays in flight
					o.Settle(rec)
				}
			}
		}
		close(taken)
		<-o.Halted()
		close(halted)
	}
	c := newConsumer(t, cfg)
	stop := run(t, c)
	select {
	case <-taken:
	case <-time.After(20 * time.Second):
		t.Fatal("the records were not taken")
	}
	stop()
	select {
	case <-halted:
	default:
		t.Fatal("the ServeFunc returned without being halted")
	}
	if got := committed(t, brokers, "g", "t")[0]; got != 7 {
		t.Fatalf("committed offset %d, want 7 (the first unsettled record)", got)
	}
}

// A partition that caught up with its records has them committed at once,
// not at the next CommitInterval: here an hour, so only the commit on
// catching up can move the group's offsets while the member runs.
func TestCaughtUpPartitionCommitsAtOnce(t *testing.T) {
	brokers := cluster(t)
	createTopic(t, brokers, "t", 2)
	cl := producer(t, brokers)
	produce(t, cl, "t", 0, values("a", 0, 30)...)
	produce(t, cl, "t", 1, values("b", 0, 10)...)
	l := newLedger()
	cfg := baseConfig(t, brokers, "g", "t", "m", func(_ context.Context, rec *kgo.Record) error {
		l.add("m", rec)
		return nil
	})
	cfg.CommitInterval = time.Hour
	c := newConsumer(t, cfg)
	run(t, c)
	testenv.Eventually(t, 20*time.Second, func() bool { return l.total() == 40 }, "40 records processed (have %d)", l.total())
	testenv.Eventually(t, 20*time.Second, func() bool {
		got := committed(t, brokers, "g", "t")
		return got[0] == 30 && got[1] == 10
	}, "offsets 30 and 10 committed while the member runs")
	// More records later: committed as soon as they are processed too.
	produce(t, cl, "t", 1, values("b", 10, 15)...)
	testenv.Eventually(t, 20*time.Second, func() bool { return committed(t, brokers, "g", "t")[1] == 15 },
		"offset 15 of partition 1 committed while the member runs")
}

// TestFetchMaxPartitionBytes: New bounds a partition's fetch at 128 KiB
// (kgo's default of 1 MiB brought more records than MaxUncommitted, and
// each pause dropped, and each resume fetched and decompressed again, what
// kgo had fetched ahead), and a FetchMaxPartitionBytes in ClientOpts wins.
func TestFetchMaxPartitionBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want int32
	}{
		{"default", nil, 128 << 10},
		{"ClientOpts", []kgo.Opt{kgo.FetchMaxPartitionBytes(1 << 20)}, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t, []string{"127.0.0.1:1"}, "g", "t", "a", func(context.Context, *kgo.Record) error { return nil })
			cfg.ClientOpts = tc.opts
			c := newConsumer(t, cfg)
			got := c.Client().OptValue(kgo.FetchMaxPartitionBytes)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			if err := c.Run(done); err != nil { // closes the client without joining
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("FetchMaxPartitionBytes = %v, want %d", got, tc.want)
			}
		})
	}
}
