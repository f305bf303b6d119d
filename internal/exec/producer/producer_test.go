package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
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

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// TestMain checks that no goroutine outlives the tests. The embedded
// broker's own run loop is let off when it is caught resuming a request
// that TestStopsWhileTheBrokerDoesNotAnswer held (kfake's slept control):
// once in about ten loaded CI runs it was still waiting there for the
// broker's control lock when the check ran, after every test had passed.
// That goroutine is the test broker's, not kjob's; every kjob goroutine
// is still checked.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).continueSleptControl"))
}

// alwaysLeader leads at once and until ctx ends: leadership is not what
// these tests are about (internal/store/lease has its own).
type alwaysLeader struct{}

func (alwaysLeader) Run(ctx context.Context, lead func(context.Context) error) error {
	return lead(ctx)
}

func jobs(t *testing.T, yaml string) []*schedule.Job {
	t.Helper()
	f, err := schedule.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f.Jobs
}

const everyTen = `jobs:
  - name: a
    schedule: "@every 10s"
    handler: log
    catchup: 25s
  - name: b
    schedule: "@every 10s"
    handler: log
    payload: {x: 1}
    overlap: replace
`

type run struct {
	p      *producer.Producer
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	pubs   []producer.Published
	skips  map[string]int
}

func startProducer(t *testing.T, brokers []string, clk clock.Clock, js []*schedule.Job, el producer.Elector, opts ...func(*producer.Config)) *run {
	t.Helper()
	r := &run{done: make(chan error, 1), skips: map[string]int{}}
	cfg := producer.Config{
		Brokers: brokers, Jobs: js, Elector: el, Clock: clk, Partitions: 2,
		TransactionalID: "test-txn", Logger: slog.New(slog.DiscardHandler),
		OnPublished: func(ps []producer.Published) {
			r.mu.Lock()
			r.pubs = append(r.pubs, ps...)
			r.mu.Unlock()
		},
		OnSkipped: func(job string, n int) {
			r.mu.Lock()
			r.skips[job] += n
			r.mu.Unlock()
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *run) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("producer did not stop within 20s; its goroutines (and every other of the test binary):\n%s", testenv.Goroutines())
	}
	return nil
}

// eventuallyOrDump is testenv.Eventually, but a condition not met in time
// also logs every goroutine of the test binary: what the producer waits
// on tells a hang from a slow machine.
func eventuallyOrDump(t *testing.T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s; goroutines:\n%s", timeout, fmt.Sprintf(msg, args...), testenv.Goroutines())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *run) published() []producer.Published {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]producer.Published(nil), r.pubs...)
}

func windowIDs(t *testing.T, brokers []string) (ids []string, msgs []*jobmsg.Message) {
	for _, rec := range testenv.ReadCommitted(t, brokers, "kjob.windows") {
		m, err := jobmsg.FromRecord(rec)
		if err != nil {
			t.Fatalf("bad record: %v", err)
		}
		ids = append(ids, m.ID)
		msgs = append(msgs, m)
	}
	sort.Strings(ids)
	return ids, msgs
}

// waitLeading waits until the producer has started its term and set its
// timer, so advancing the fake clock fires it.
func waitLeading(t *testing.T, r *run) {
	testenv.Eventually(t, 20*time.Second, func() bool { return r.p.Status().Leading && len(r.p.Status().Next) > 0 }, "producer never started leading")
}

func TestPublishesEachWindowAtItsStart(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	r := startProducer(t, brokers, clk, jobs(t, everyTen), alwaysLeader{})
	waitLeading(t, r)
	if next := r.p.Status().Next["a"]; !next.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("next window of a = %v, want %v", next, t0.Add(5*time.Second))
	}
	for i := 1; i <= 3; i++ {
		clk.Set(t0.Add(time.Duration(i*10-5) * time.Second))
		testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 2*i }, "window %d not published", i)
	}
	r.stop(t)
	ids, msgs := windowIDs(t, brokers)
	want := []string{
		"a@2026-11-22T10:00:10Z", "a@2026-11-22T10:00:20Z", "a@2026-11-22T10:00:30Z",
		"b@2026-11-22T10:00:10Z", "b@2026-11-22T10:00:20Z", "b@2026-11-22T10:00:30Z",
	}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("published\n %v\nwant\n %v", ids, want)
	}
	for _, m := range msgs {
		if m.Trigger != jobmsg.TriggerSchedule || !m.Window.End.Equal(m.Window.Start.Add(10*time.Second)) ||
			!m.PublishedAt.Equal(m.Window.Start) || m.Policy.MaxAttempts != 3 {
			t.Errorf("message %+v", m)
		}
		if m.Job == "b" && string(m.Payload) != `{"x":1}` {
			t.Errorf("payload of b = %s", m.Payload)
		}
		// Each window carries its job's overlap policy from the file.
		if want := map[string]jobmsg.Overlap{"a": jobmsg.OverlapQueue, "b": jobmsg.OverlapReplace}[m.Job]; m.Policy.Overlap != want {
			t.Errorf("overlap of %s = %q, want %q", m.ID, m.Policy.Overlap, want)
		}
	}
	// The state topic holds the last window of each job.
	last := map[string]string{}
	for _, rec := range testenv.ReadCommitted(t, brokers, "kjob.windows.state") {
		var v struct {
			LastID string `json:"last_id"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatal(err)
		}
		last[string(rec.Key)] = v.LastID
	}
	if last["a"] != "a@2026-11-22T10:00:30Z" || last["b"] != "b@2026-11-22T10:00:30Z" {
		t.Fatalf("state = %v", last)
	}
}

// Each window is published PublishLead before its start, not earlier,
// so that the workers hold it when it comes (the herd's row); a schedule
// change committed meanwhile takes effect after the windows published
// ahead.
func TestPublishesAheadByTheLead(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	const lead = 300 * time.Millisecond
	r := startProducer(t, brokers, clk, jobs(t, everyTen), alwaysLeader{}, func(c *producer.Config) { c.PublishLead = lead })
	waitLeading(t, r)
	start := t0.Add(5 * time.Second) // 10:00:10
	clk.Set(start.Add(-lead - time.Millisecond))
	time.Sleep(50 * time.Millisecond) // a timer that fired would publish within this: the next check shows if it did
	if n := len(r.published()); n != 0 {
		t.Fatalf("%d windows published %v before their start, more than the lead %v", n, lead+time.Millisecond, lead)
	}
	clk.Set(start.Add(-lead))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 2 }, "the windows of 10:00:10 not published %v ahead", lead)
	r.stop(t)
	_, msgs := windowIDs(t, brokers)
	for _, m := range msgs {
		if !m.ScheduledAt.Equal(start) || !m.PublishedAt.Equal(start.Add(-lead)) {
			t.Errorf("%s: scheduled %v, published %v; want published %v before its start", m.ID, m.ScheduledAt, m.PublishedAt, lead)
		}
	}
}

func TestNewLeaderCatchesUpWithinLimitAndSkipsOlder(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, everyTen)
	r1 := startProducer(t, brokers, clk, js, alwaysLeader{})
	waitLeading(t, r1)
	clk.Set(t0.Add(5 * time.Second)) // 10:00:10 published by r1
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r1.published()) == 2 }, "first windows not published")
	r1.stop(t)

	// An outage: no leader from 10:00:10 to 10:00:47. Windows :20 :30 :40
	// were missed. Job a may catch up 25s (so :30 and :40); b has no
	// catch-up limit, and the misfire grace (10s by default) covers :40.
	clk.Set(t0.Add(42 * time.Second))
	r2 := startProducer(t, brokers, clk, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r2.published()) == 3 }, "catch-up not published")
	r2.stop(t)

	got := r2.published()
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	var ids2 []string
	for _, g := range got {
		ids2 = append(ids2, g.ID)
		if g.Trigger != jobmsg.TriggerCatchup {
			t.Errorf("%s published with trigger %s, want catchup", g.ID, g.Trigger)
		}
	}
	if want := "a@2026-11-22T10:00:30Z a@2026-11-22T10:00:40Z b@2026-11-22T10:00:40Z"; strings.Join(ids2, " ") != want {
		t.Fatalf("catch-up published %v, want %s", ids2, want)
	}
	r2.mu.Lock()
	skips := r2.skips
	r2.mu.Unlock()
	if skips["a"] != 1 || skips["b"] != 2 {
		t.Fatalf("skipped = %v, want a:1 (the :20 window) b:2 (:20 and :30)", skips)
	}
	ids, _ := windowIDs(t, brokers)
	if len(ids) != 5 {
		t.Fatalf("topic has %v", ids)
	}
}

// With no catch-up limit (catchup 0), a window that fell due while no
// replica led is published by the next leader when the gap was a graceful
// handover (200ms) or a crash failover (6s): both are within the misfire
// grace. Windows due after the takeover are published as scheduled.
func TestWindowDueDuringHandoverIsPublished(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, `jobs:
  - name: c
    schedule: "@every 10s"
    handler: log
`)
	r1 := startProducer(t, brokers, clk, js, alwaysLeader{})
	waitLeading(t, r1)
	clk.Set(t0.Add(5 * time.Second)) // :10 published by r1
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r1.published()) == 1 }, "r1's window")
	r1.stop(t)

	// Graceful handover: r1 stopped before :20, r2 leads at :20.2.
	clk.Set(t0.Add(15*time.Second + 200*time.Millisecond))
	r2 := startProducer(t, brokers, clk, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r2.published()) == 1 }, "window due during the handover not published")
	r2.stop(t)

	// Crash failover: r2 died before :30 and r3 took over at :36.
	clk.Set(t0.Add(31 * time.Second))
	r3 := startProducer(t, brokers, clk, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r3.published()) == 1 }, "window due during the failover not published")
	waitLeading(t, r3)
	clk.Set(t0.Add(35 * time.Second)) // :40, on time
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r3.published()) == 2 }, "r3's scheduled window")
	r3.stop(t)

	var got []string
	for _, r := range []*run{r1, r2, r3} {
		for _, p := range r.published() {
			got = append(got, p.ID+" "+string(p.Trigger))
		}
		r.mu.Lock()
		if len(r.skips) != 0 {
			t.Errorf("skipped %v", r.skips)
		}
		r.mu.Unlock()
	}
	want := []string{
		"c@2026-11-22T10:00:10Z schedule", "c@2026-11-22T10:00:20Z catchup",
		"c@2026-11-22T10:00:30Z catchup", "c@2026-11-22T10:00:40Z schedule",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published %q, want %q", got, want)
	}
	if ids, _ := windowIDs(t, brokers); len(ids) != 4 {
		t.Fatalf("topic has %v, want each of the 4 windows once", ids)
	}
}

// A job no leader has published yet is recorded in the schedules topic
// when a leader first imports it, with the instant its first version
// applies from (EffectiveFrom), so that its first window, due after that
// leader stopped and before the next took over, is still published.
func TestNewJobsFirstWindowSurvivesHandover(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, `jobs:
  - name: fresh
    schedule: "@every 10s"
    handler: log
`)
	r1 := startProducer(t, brokers, clk, js, alwaysLeader{})
	waitLeading(t, r1)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(testenv.ReadCommitted(t, brokers, "kjob.windows.schedules")) == 1
	}, "r1 did not import the new job into the schedules topic")
	r1.stop(t)
	e, err := specs.ParseSpecRecord(testenv.ReadCommitted(t, brokers, "kjob.windows.schedules")[0], "")
	// A change takes effect PublishLead after it is committed.
	eff := t0.Add(producer.DefaultPublishLead)
	if err != nil || e.Job != "fresh" || e.Version != 1 || !e.Record.EffectiveFrom.Equal(eff) || !e.Record.SetAt.Equal(t0) || e.Record.Source.Kind != specs.SourceFile {
		t.Fatalf("imported record = %+v, %v; want job fresh, version 1 from the file, set at %v, EffectiveFrom %v", e.Record, err, t0, eff)
	}

	// r1 stopped before :10; r2 takes over at :10.2.
	clk.Set(t0.Add(5*time.Second + 200*time.Millisecond))
	r2 := startProducer(t, brokers, clk, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r2.published()) == 1 }, "the job's first window was not published")
	r2.stop(t)
	if got := r2.published()[0]; got.ID != "fresh@2026-11-22T10:00:10Z" || got.Trigger != jobmsg.TriggerCatchup {
		t.Fatalf("published %+v, want fresh@2026-11-22T10:00:10Z with trigger catchup", got)
	}
	if ids, _ := windowIDs(t, brokers); len(ids) != 1 {
		t.Fatalf("topic has %v", ids)
	}
}

// A Kafka error that ends a leader's term (a failed produce, or an EndTxn
// whose outcome is unknown) loses no window, even with catchup 0 and no
// misfire grace: the next term of the same tenure publishes the windows the
// failed transaction held, with the same ids and trigger "schedule".
func TestTransientKafkaErrorLosesNoWindow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault kfake.Fault
	}{
		{"produce", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "kjob.windows", Err: kerr.InvalidRecord}},
		{"end transaction", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Cluster(t)
			brokers := c.ListenAddrs()
			js := jobs(t, `jobs:
  - name: s
    schedule: "@every 1s"
    handler: log
`)
			var (
				mu        sync.Mutex
				attempted = map[string]int{} // window id -> records produced (signed) for it
			)
			r := startProducer(t, brokers, clock.Real{}, js, alwaysLeader{}, func(cfg *producer.Config) {
				cfg.MisfireGrace = -1 // none: the tenure alone must save the window
				cfg.Sign = func(rec *kgo.Record) error {
					m, err := jobmsg.FromRecord(rec)
					if err != nil {
						return err
					}
					mu.Lock()
					attempted[m.ID]++
					mu.Unlock()
					return nil
				}
			})
			testenv.Eventually(t, 20*time.Second, func() bool { return len(r.published()) >= 2 }, "first windows not published")
			h := c.Fault(tc.fault)
			testenv.Eventually(t, 20*time.Second, func() bool { return h.Hits() >= 1 }, "fault never hit")
			n := len(r.published())
			testenv.Eventually(t, 20*time.Second, func() bool { return len(r.published()) >= n+3 }, "publishing did not resume after the fault")
			r.stop(t)

			ids, msgs := windowIDs(t, brokers)
			count := map[string]int{}
			for _, id := range ids {
				count[id]++
			}
			mu.Lock()
			defer mu.Unlock()
			retried := 0
			for id, n := range attempted {
				if count[id] != 1 {
					t.Errorf("window %s attempted %d times, in the topic %d times; want once", id, n, count[id])
				}
				if n > 1 {
					retried++
				}
			}
			if retried == 0 {
				t.Errorf("no window was attempted twice: the fault did not hit a transaction holding a window (attempted %v)", attempted)
			}
			for _, m := range msgs {
				if m.Trigger != jobmsg.TriggerSchedule {
					t.Errorf("%s has trigger %s, want schedule", m.ID, m.Trigger)
				}
			}
			sort.Slice(msgs, func(i, j int) bool { return msgs[i].Window.Start.Before(msgs[j].Window.Start) })
			for i := 1; i < len(msgs); i++ {
				if d := msgs[i].Window.Start.Sub(msgs[i-1].Window.Start); d != time.Second {
					t.Errorf("%v between %s and %s: a window is missing or duplicated", d, msgs[i-1].ID, msgs[i].ID)
				}
			}
			r.mu.Lock()
			if len(r.skips) != 0 {
				t.Errorf("skipped %v", r.skips)
			}
			r.mu.Unlock()
		})
	}
}

// TestLongKafkaOutageIsBoundedLikeCatchup: a leader that cannot publish for
// five minutes (every produce fails) publishes, once Kafka is back, only the
// windows of the last minute (the retry horizon, since catchup and the
// misfire grace are shorter), and skips and counts the older ones once,
// instead of firing every window of the outage at once.
func TestLongKafkaOutageIsBoundedLikeCatchup(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 500_000_000, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, `jobs:
  - name: s
    schedule: "@every 1s"
    handler: log
`)
	// Published at their starts (no lead), so that the first window,
	// 10:00:01, is not out before the outage begins.
	r := startProducer(t, brokers, clk, js, alwaysLeader{}, func(c *producer.Config) { c.PublishLead = -1 })
	waitLeading(t, r)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "kjob.windows", Err: kerr.InvalidRecord, Count: -1})
	// Five minutes pass while every produce fails; the producer keeps
	// starting new terms: one fails before the first step of the clock
	// and another after the last. A producer that stops trying (a hang)
	// fails here, with its goroutines; a slow machine only takes longer.
	clk.Set(t0.Add(time.Second))
	eventuallyOrDump(t, time.Minute, func() bool { return h.Hits() >= 1 }, "no produce failed after the clock moved to +1s")
	for i := 31; i <= 300; i += 30 {
		clk.Set(t0.Add(time.Duration(i) * time.Second))
	}
	clk.Set(t0.Add(300 * time.Second))
	hits := h.Hits()
	eventuallyOrDump(t, time.Minute, func() bool { return h.Hits() > hits }, "no produce failed after the clock moved to +300s (%d failed before)", hits)
	h.Remove()
	// Once Kafka answers, the windows of the last minute are published.
	last := time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, p := range r.published() {
			if p.Start.Equal(last) {
				return true
			}
		}
		return false
	}, "the window due at 10:05:00 was not published after the outage")
	r.stop(t)
	ids, msgs := windowIDs(t, brokers)
	// The term that publishes starts at 10:05:00.5: windows more than a
	// minute older, up to 10:04:00, are skipped.
	first := last.Add(-time.Minute + time.Second) // 10:04:01
	for _, m := range msgs {
		if m.Window.Start.Before(first) {
			t.Errorf("%s published after a 5 minute outage; only windows from %s on should be", m.ID, first.Format(time.TimeOnly))
		}
	}
	if len(ids) != 60 {
		t.Errorf("%d windows published, want the 60 from 10:04:01 to 10:05:00", len(ids))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// 10:00:01 ... 10:04:00 are skipped: 240 windows, each counted once
	// although every failed term skipped them again.
	if r.skips["s"] != 240 {
		t.Errorf("skipped %d windows, want 240 (10:00:01 to 10:04:00), each counted once", r.skips["s"])
	}
}

// TestZombieLeaderIsFenced runs two producers that both believe they lead
// (as when a paused leader wakes up after its lease passed to another): the
// one that started its term last fences the other, whose writes then fail
// and never become visible; each window is in the topic once.
func TestZombieLeaderIsFenced(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk1 := clock.NewFake(t0)
	js := jobs(t, everyTen)
	zombie := startProducer(t, brokers, clk1, js, alwaysLeader{})
	waitLeading(t, zombie)
	clk1.Set(t0.Add(5 * time.Second))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(zombie.published()) == 2 }, "zombie's first windows")

	clk2 := clock.NewFake(t0.Add(5 * time.Second))
	leader := startProducer(t, brokers, clk2, js, alwaysLeader{})
	waitLeading(t, leader)

	// The zombie wakes up at 10:00:20 and tries to publish: fenced.
	clk1.Set(t0.Add(15 * time.Second))
	var err error
	select {
	case err = <-zombie.done:
		close(zombie.done)
	case <-time.After(20 * time.Second):
		t.Fatal("zombie producer was not stopped by fencing")
	}
	if !errors.Is(err, producer.ErrFenced) {
		t.Fatalf("zombie returned %v, want ErrFenced", err)
	}
	clk2.Set(t0.Add(15 * time.Second))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(leader.published()) == 2 }, "leader's windows")
	leader.stop(t)

	ids, _ := windowIDs(t, brokers)
	want := "a@2026-11-22T10:00:10Z a@2026-11-22T10:00:20Z b@2026-11-22T10:00:10Z b@2026-11-22T10:00:20Z"
	if strings.Join(ids, " ") != want {
		t.Fatalf("topic has %v, want %s", ids, want)
	}
}

func TestRefusesTopicWithOtherPartitionCount(t *testing.T) {
	brokers := testenv.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: brokers, Jobs: jobs(t, everyTen), Elector: alwaysLeader{}, Partitions: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Create the topic with 1 partition first.
	p1, err := producer.New(producer.Config{Brokers: brokers, Jobs: jobs(t, everyTen), Elector: alwaysLeader{}, Partitions: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c1, cancel1 := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p1.Run(c1) }()
	testenv.Eventually(t, 10*time.Second, func() bool { return p1.Status().Leading }, "p1 leading")
	cancel1()
	testenv.Recv(t, done, 20*time.Second, "p1's Run returns after cancel")
	err = p.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "topic kjob.windows exists but has 1 partitions, configured 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	js := jobs(t, everyTen)
	for _, tc := range []struct {
		cfg  producer.Config
		want string
	}{
		{producer.Config{Jobs: js, Elector: alwaysLeader{}}, "producer: Brokers is empty: set at least one seed broker (e.g. 127.0.0.1:9092)"},
		{producer.Config{Brokers: []string{"x"}, Jobs: js}, "producer: Elector is nil: use lease.NewElector"},
		{producer.Config{Brokers: []string{"x"}, Jobs: js, Elector: alwaysLeader{}, Topic: "t", StateTopic: "t"}, `producer: StateTopic = "t" is the windows topic: use a separate topic (default "t.state")`},
		{producer.Config{Brokers: []string{"x"}, Jobs: append(js, js[0]), Elector: alwaysLeader{}}, `producer: Jobs[2]: job name "a" appears twice: names must be unique`},
	} {
		if _, err := producer.New(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("err = %v\nwant %s", err, tc.want)
		}
	}
}

// Deployments keep apart by namespace (issue 21): each record carries its
// producer's namespace, and a producer of namespace b pointed at a's topic
// refuses to lead from a's state: it publishes nothing, logs an ERROR
// naming the topic, the other namespace and the fix, and Run returns an
// error wrapping ErrForeignState.
func TestRefusesToLeadFromAnotherDeploymentsState(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, `jobs:
  - name: tick
    schedule: "@every 10s"
    handler: log
`)
	ns := func(n, topic string) func(*producer.Config) {
		return func(c *producer.Config) { c.Namespace, c.Topic, c.TransactionalID = n, topic, "" }
	}
	a := startProducer(t, brokers, clk, js, alwaysLeader{}, ns("a", ""))
	waitLeading(t, a)
	clk.Set(t0.Add(5 * time.Second))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(a.published()) == 1 }, "a did not publish tick@10:00:10")
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	windows := testenv.ReadCommitted(t, brokers, "kjob.a.windows")
	state := testenv.ReadCommitted(t, brokers, "kjob.a.windows.state")
	if len(windows) != 1 || len(state) == 0 {
		t.Fatalf("a's topics hold %d windows and %d state records, want 1 and some", len(windows), len(state))
	}
	m, err := jobmsg.FromRecord(windows[0])
	if err != nil || m.Namespace != "a" {
		t.Fatalf("a's window = %+v, %v; want namespace a", m, err)
	}
	for _, r := range state {
		if st, err := jobmsg.ParseState(r.Value); err != nil || st.Namespace != "a" {
			t.Fatalf("a's state record = %+v, %v; want namespace a", st, err)
		}
	}

	logs := testenv.NewLogBuffer(t)
	b := startProducer(t, brokers, clk, js, alwaysLeader{}, ns("b", "kjob.a.windows"), func(c *producer.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	err = testenv.Recv(t, b.done, 20*time.Second, "b's Run returns: it must refuse to lead")
	close(b.done) // stop has nothing left to wait for
	if !errors.Is(err, producer.ErrForeignState) {
		t.Fatalf("b's Run = %v, want ErrForeignState", err)
	}
	for _, want := range []string{`"kjob.a.windows.state"`, `namespace "a" (tick)`, `namespace is "b"`, `"kjob.b.windows"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("b's error %q does not name %s", err, want)
		}
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "refusing to lead") || !strings.Contains(out, "state_topic=kjob.a.windows.state") {
		t.Errorf("b logged no ERROR naming the state topic:\n%s", out)
	}
	if got := b.published(); len(got) != 0 {
		t.Errorf("b published %v", got)
	}
	if n := len(testenv.ReadCommitted(t, brokers, "kjob.a.windows")); n != 1 {
		t.Errorf("a's windows topic holds %d records after b ran, want 1", n)
	}
	if n := len(testenv.ReadCommitted(t, brokers, "kjob.a.windows.state")); n != len(state) {
		t.Errorf("a's state topic holds %d records after b ran, want %d", n, len(state))
	}
}

// A state record without a namespace (written before records carried it)
// is taken as the deployment's own, never silently: the producer leads,
// resumes the job from it, and logs a WARN naming the topic.
func TestUnlabelledStateIsTakenWithAWarning(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	compact := "compact"
	for topic, cfg := range map[string]map[string]*string{"kjob.c.windows": nil, "kjob.c.windows.state": {"cleanup.policy": &compact}} {
		parts := int32(2)
		if cfg != nil {
			parts = 1
		}
		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, cfg, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	old := `{"v":1,"job":"tick","last_window":"2026-11-22T10:00:00Z","last_id":"tick@2026-11-22T10:00:00Z","published_at":"2026-11-22T10:00:00Z"}`
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kjob.c.windows.state", Key: []byte("tick"), Value: []byte(old)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	logs := testenv.NewLogBuffer(t)
	r := startProducer(t, brokers, clock.NewFake(t0), jobs(t, "jobs:\n  - name: tick\n    schedule: \"@every 10s\"\n    handler: log\n"), alwaysLeader{},
		func(c *producer.Config) {
			c.Namespace, c.TransactionalID = "c", ""
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
	waitLeading(t, r)
	if last := r.p.Status().Last["tick"]; !last.Equal(t0.Add(-5 * time.Second)) {
		t.Errorf("resumed tick from %v, want the unlabelled record's 10:00:00", last)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "without a namespace") || !strings.Contains(out, "state_topic=kjob.c.windows.state") {
		t.Errorf("no WARN about the unlabelled state record:\n%s", out)
	}
}
