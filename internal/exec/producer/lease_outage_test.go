package producer_test

import (
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// logWriter passes a test's log lines to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestRedisOutageLosesNoWindow: two producer replicas elect their leader
// through a Redis lease; the redis-server is killed for longer than the
// misfire grace (three times it; KJOB_TEST_REDIS_OUTAGE sets another length)
// while a job with no catch-up limit ticks every second. The leader steps
// down before its lease can expire and nobody can take the lease while
// Redis is away, so nobody publishes. Once Redis is back (empty: it had no
// persistence), the replica that wins the lease publishes every window due
// during the outage, once, with trigger catchup: the windows topic holds
// every window from the first to the last exactly once and none is skipped.
func TestRedisOutageLosesNoWindow(t *testing.T) {
	r := testenv.NewRedis(t)
	if r.Kind != "redis-server" {
		t.Skipf("needs a redis-server started by testenv, to kill it and start it again; have %s", r)
	}
	const grace = 2 * time.Second
	outage := 3 * grace
	if s := os.Getenv("KJOB_TEST_REDIS_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("KJOB_TEST_REDIS_OUTAGE=%q: want a positive duration such as 40s", s)
		}
		outage = d
	}
	brokers := testenv.Brokers(t)
	js := jobs(t, `jobs:
  - name: s
    schedule: "@every 1s"
    handler: log
`)
	log := slog.New(slog.NewTextHandler(logWriter{t}, nil))
	var (
		mu   sync.Mutex
		lost int // lease.Lost events
	)
	var runs []*run
	for _, name := range []string{"a", "b"} {
		lock, err := lease.NewRedisLock(r.Client(), "kjob:{outage}:producer-lease")
		if err != nil {
			t.Fatal(err)
		}
		el, err := lease.NewElector(lease.Config{
			Lock: lock, Holder: name, TTL: time.Second, RenewInterval: 200 * time.Millisecond, RetryInterval: 200 * time.Millisecond,
			Logger: log.With("replica", name),
			OnChange: func(ev lease.Event) {
				if ev.Kind == lease.Lost {
					mu.Lock()
					lost++
					mu.Unlock()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, startProducer(t, brokers, clock.Real{}, js, el, func(cfg *producer.Config) {
			cfg.MisfireGrace = grace
			cfg.Logger = log.With("replica", name)
		}))
	}
	published := func() []producer.Published {
		var out []producer.Published
		for _, rn := range runs {
			out = append(out, rn.published()...)
		}
		return out
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(published()) >= 3 }, "the first windows were not published")

	r.Kill()
	killed := time.Now()
	testenv.Eventually(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return lost > 0 }, "the leader did not step down with Redis killed")
	// Redis stays away for the outage: this wait is the fault, not a
	// synchronisation.
	testenv.Eventually(t, outage+10*time.Second, func() bool { return time.Since(killed) >= outage }, "outage")
	r.Restart()
	back := time.Now()
	t.Logf("redis-server was away for %v (misfire grace %v)", back.Sub(killed).Round(time.Millisecond), grace)
	// Publishing goes on as scheduled after the outage.
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, p := range published() {
			if p.Start.After(back.Add(2 * time.Second)) {
				return true
			}
		}
		return false
	}, "publishing did not resume after Redis came back")
	for _, rn := range runs {
		rn.stop(t)
	}

	_, msgs := windowIDs(t, brokers)
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].Window.Start.Before(msgs[j].Window.Start) })
	missing, twice, catchup := 0, 0, 0
	for i, m := range msgs {
		if m.Trigger == jobmsg.TriggerCatchup {
			catchup++
		}
		if i == 0 {
			continue
		}
		switch d := m.Window.Start.Sub(msgs[i-1].Window.Start); {
		case d == 0:
			twice++
			t.Errorf("%s is in the topic twice", m.ID)
		case d > time.Second:
			n := int(d/time.Second) - 1
			missing += n
			t.Errorf("%d windows between %s and %s were never published", n, msgs[i-1].ID, m.ID)
		}
	}
	skipped := 0
	for _, rn := range runs {
		rn.mu.Lock()
		skipped += rn.skips["s"]
		rn.mu.Unlock()
	}
	t.Logf("windows lost to a %v Redis outage: %d (skipped and counted: %d); published twice: %d; published late with trigger catchup: %d; in the topic: %d",
		back.Sub(killed).Round(time.Second), missing, skipped, twice, catchup, len(msgs))
	if skipped != 0 {
		t.Errorf("%d windows skipped after a Redis outage shorter than the retry horizon, want 0", skipped)
	}
	if catchup == 0 {
		t.Errorf("no window published with trigger catchup: the outage did not stop publishing")
	}
}
