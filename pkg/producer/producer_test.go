package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/clock"
	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/producer"
	"github.com/kjob/kjob/pkg/schedule"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// alwaysLeader leads at once and until ctx ends: leadership is not what
// these tests are about (pkg/lease has its own).
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
`

type run struct {
	p      *producer.Producer
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	pubs   []producer.Published
	skips  map[string]int
}

func startProducer(t *testing.T, brokers []string, clk clock.Clock, js []*schedule.Job, el producer.Elector) *run {
	t.Helper()
	r := &run{done: make(chan error, 1), skips: map[string]int{}}
	p, err := producer.New(producer.Config{
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
	})
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
		t.Fatalf("producer did not stop within 20s")
	}
	return nil
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
	// were missed. Job a may catch up 25s (so :30 and :40); b never (0).
	clk.Set(t0.Add(42 * time.Second))
	r2 := startProducer(t, brokers, clk, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r2.published()) == 2 }, "catch-up not published")
	r2.stop(t)

	got := r2.published()
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	if len(got) != 2 || got[0].ID != "a@2026-11-22T10:00:30Z" || got[1].ID != "a@2026-11-22T10:00:40Z" ||
		got[0].Trigger != jobmsg.TriggerCatchup || got[1].Trigger != jobmsg.TriggerCatchup {
		t.Fatalf("catch-up published %+v", got)
	}
	r2.mu.Lock()
	skips := r2.skips
	r2.mu.Unlock()
	if skips["a"] != 1 || skips["b"] != 3 {
		t.Fatalf("skipped = %v, want a:1 (the :20 window) b:3", skips)
	}
	ids, _ := windowIDs(t, brokers)
	if len(ids) != 4 {
		t.Fatalf("topic has %v", ids)
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
		{producer.Config{Brokers: []string{"x"}, Elector: alwaysLeader{}}, "producer: Jobs is empty: load a schedules file with schedule.Load"},
		{producer.Config{Brokers: []string{"x"}, Jobs: js, Elector: alwaysLeader{}, Topic: "t", StateTopic: "t"}, `producer: StateTopic = "t" is the windows topic: use a separate topic (default "t.state")`},
		{producer.Config{Brokers: []string{"x"}, Jobs: append(js, js[0]), Elector: alwaysLeader{}}, `producer: Jobs[2]: job name "a" appears twice: names must be unique`},
	} {
		if _, err := producer.New(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("err = %v\nwant %s", err, tc.want)
		}
	}
}
