package storeepoch_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/storeepoch"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

const ns = "t"

// guards starts n Guards (each with its own Store on rdb) against one
// Kafka and returns their stores and guards; they stop with the test.
func guards(t *testing.T, rdb redis.UniversalClient, brokers []string, n int) ([]*dedupe.Store, []*storeepoch.Guard) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var stores []*dedupe.Store
	var gs []*storeepoch.Guard
	for i := range n {
		s, err := dedupe.New(rdb, dedupe.Config{Namespace: ns, ClaimTTL: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		g, err := storeepoch.New(storeepoch.Config{Brokers: brokers, Topic: "w.epoch", Namespace: ns, Store: s,
			Interval: 20 * time.Millisecond, ID: string(rune('a' + i)), Logger: slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, "j@1", "x"); !errors.Is(err, dedupe.ErrStoreUnproven) {
			t.Fatalf("claim before the first check: %v, want ErrStoreUnproven", err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		stores, gs = append(stores, s), append(gs, g)
	}
	return stores, gs
}

// agreed waits until every guard has proven the same epoch, and returns it.
func agreed(t *testing.T, gs []*storeepoch.Guard, s *dedupe.Store, what string) int64 {
	t.Helper()
	return agreedAbove(t, gs, s, -1, what)
}

// agreedAbove is agreed for an epoch above above: after a restart that
// kept the marker, the guards go on proving the old epoch until their
// next check finds the new run_id.
func agreedAbove(t *testing.T, gs []*storeepoch.Guard, s *dedupe.Store, above int64, what string) int64 {
	t.Helper()
	var e int64
	testenv.Eventually(t, 30*time.Second, func() bool {
		m, ok, err := s.ReadMarker(context.Background())
		if err != nil || !ok || m.Epoch <= above {
			return false
		}
		for _, g := range gs {
			st := g.Status()
			if !st.Proven || st.Epoch != m.Epoch {
				return false
			}
		}
		e = m.Epoch
		return true
	}, "%s: every guard proves the marker's epoch", what)
	return e
}

// Two workers that find the store wiped at once race to bump the epoch:
// they end on one epoch, above the one before, and tokens resume above
// every earlier one on both.
func TestRacingBumpsAgreeOnOneEpoch(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	brokers := testenv.Brokers(t)
	stores, gs := guards(t, rdb, brokers, 2)
	e0 := agreed(t, gs, stores[0], "start")
	if e0 != 0 {
		t.Fatalf("a new deployment starts at epoch %d, want 0", e0)
	}
	ctx := context.Background()
	var high int64
	for i, s := range stores {
		c, err := s.Claim(ctx, "j@"+string(rune('1'+i)), "x")
		if err != nil || c.Outcome != dedupe.Claimed {
			t.Fatalf("claim: %+v %v", c, err)
		}
		high = max(high, c.Token)
	}
	for round := 1; round <= 3; round++ {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		e := agreed(t, gs, stores[0], "after a wipe")
		if e <= e0 {
			t.Fatalf("round %d: epoch %d after the wipe, want above %d", round, e, e0)
		}
		for i, s := range stores {
			c, err := claimProven(t, s, "j@"+string(rune('1'+i)))
			if err != nil || c.Outcome != dedupe.Claimed {
				t.Fatalf("claim after the wipe: %+v %v", c, err)
			}
			if c.Token <= high {
				t.Fatalf("round %d: token %d after the wipe is not above %d", round, c.Token, high)
			}
			high = c.Token
		}
		t.Logf("round %d: epoch %d -> %d, tokens now %d", round, e0, e, high)
		e0 = e
	}
	// Each wipe is counted by the worker that bumped the epoch (the other
	// one found the marker raised already and took its epoch).
	var wipes int64
	for _, g := range gs {
		wipes += g.Status().Wipes
	}
	if wipes < 3 {
		t.Errorf("%d wipes counted by the guards, want at least one per round (3)", wipes)
	}
}

// claimProven claims id, waiting while the store is (again) unproven.
func claimProven(t *testing.T, s *dedupe.Store, id string) (dedupe.Claim, error) {
	t.Helper()
	var c dedupe.Claim
	var err error
	testenv.Eventually(t, 30*time.Second, func() bool {
		c, err = s.Claim(context.Background(), id, "x")
		return !errors.Is(err, dedupe.ErrStoreUnproven)
	}, "claim of %s once the epoch is proven", id)
	return c, err
}

// A restart that keeps the data (AOF) changes the server's run_id: the
// last writes before it may be lost (everysec, or a failover to an
// asynchronous replica), so the epoch is bumped even though the marker
// survived.
func TestRestartBumpsEpoch(t *testing.T) {
	r := testenv.NewDurableRedis(t)
	if !r.Real() {
		t.Skip("needs a real redis-server: the test restarts it (with its data), which the in-process fallback cannot do")
	}
	rdb := r.Client()
	stores, gs := guards(t, rdb, testenv.Brokers(t), 1)
	e0 := agreed(t, gs, stores[0], "start")
	c0, err := claimProven(t, stores[0], "j@1")
	if err != nil {
		t.Fatal(err)
	}
	r.Restart()
	e1 := agreedAbove(t, gs, stores[0], e0, "after the restart")
	if e1 != e0+1 {
		t.Fatalf("epoch %d after a restart, want %d", e1, e0+1)
	}
	c1, err := claimProven(t, stores[0], "j@2")
	if err != nil {
		t.Fatal(err)
	}
	if c1.Token <= dedupe.EpochFloor(e1) || c1.Token <= c0.Token {
		t.Fatalf("token %d after the restart: want above the floor %d and the earlier %d", c1.Token, dedupe.EpochFloor(e1), c0.Token)
	}
	if st := gs[0].Status(); st.Restarts != 1 || st.Wipes != 0 {
		t.Errorf("status %+v: want one restart, no wipe", st)
	}
}
