package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// exerciseStore runs every operation of the store over windows of many jobs
// (so, on a cluster, of many hash slots), one at a time and in batches that
// mix jobs, and checks the semantics end to end.
func exerciseStore(t *testing.T, rdb redis.UniversalClient, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := dedupe.New(rdb, dedupe.Config{Namespace: ns, ClaimTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for j := range 40 {
		for w := range 3 {
			ids = append(ids, fmt.Sprintf("job-%02d@2026-11-22T10:00:%02dZ", j, w))
		}
	}
	claims, err := s.ClaimBatch(ctx, ids, "w1")
	if err != nil {
		t.Fatalf("ClaimBatch over %d jobs: %v", 40, err)
	}
	tokens := make([]int64, len(ids))
	for i, c := range claims {
		if c.Outcome != dedupe.Claimed || c.Token <= 0 {
			t.Fatalf("claim %s: %+v", ids[i], c)
		}
		tokens[i] = c.Token
	}
	if errs, err := s.ExtendBatch(ctx, ids, tokens); err != nil {
		t.Fatalf("ExtendBatch: %v", err)
	} else if e := errors.Join(errs...); e != nil {
		t.Fatalf("ExtendBatch: %v", e)
	}
	// Complete all but the last window of each job in one batch.
	var done []string
	var doneTok []int64
	for i, id := range ids {
		if i%3 != 2 {
			done, doneTok = append(done, id), append(doneTok, tokens[i])
		}
	}
	if errs, err := s.CompleteBatch(ctx, done, doneTok); err != nil {
		t.Fatalf("CompleteBatch: %v", err)
	} else if e := errors.Join(errs...); e != nil {
		t.Fatalf("CompleteBatch: %v", e)
	}
	// The last window of each job: release, dead-letter or leave running.
	for i := 2; i < len(ids); i += 3 {
		switch (i / 3) % 3 {
		case 0:
			if err := s.Release(ctx, ids[i], tokens[i], "boom"); err != nil {
				t.Fatalf("Release %s: %v", ids[i], err)
			}
		case 1:
			if err := s.DeadLetter(ctx, ids[i], tokens[i], "poison"); err != nil {
				t.Fatalf("DeadLetter %s: %v", ids[i], err)
			}
		}
	}
	again, err := s.ClaimBatch(ctx, ids, "w2")
	if err != nil {
		t.Fatalf("second ClaimBatch: %v", err)
	}
	for i, c := range again {
		want := dedupe.AlreadyDone
		if i%3 == 2 {
			switch (i / 3) % 3 {
			case 0:
				want = dedupe.Claimed // released: runs again
			case 2:
				want = dedupe.Busy // w1's claim is live
			}
		}
		if c.Outcome != want {
			t.Fatalf("second claim of %s: %+v, want outcome %v", ids[i], c, want)
		}
		if want == dedupe.Claimed && c.Token <= tokens[i] {
			t.Fatalf("re-claim of %s got token %d, not above %d", ids[i], c.Token, tokens[i])
		}
	}
	st, err := s.State(ctx, ids[0])
	if err != nil || st.Status != dedupe.StatusDone || st.Holder != "w1" {
		t.Fatalf("State(%s) = %+v, %v", ids[0], st, err)
	}
	exerciseChain(ctx, t, s)
	c, err := s.Claim(ctx, "solo@2026-11-22T10:00:00Z", "w3")
	if err != nil || c.Outcome != dedupe.Claimed {
		t.Fatalf("Claim: %+v %v", c, err)
	}
	if err := s.Complete(ctx, "solo@2026-11-22T10:00:00Z", c.Token); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := s.Forget(ctx, "solo@2026-11-22T10:00:00Z"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
}

// TestRedisCluster runs the store against a real three-master Redis
// Cluster: no script may touch keys of two slots (the cluster refuses with
// CROSSSLOT), whatever mix of jobs a batch holds.
func TestRedisCluster(t *testing.T) {
	c := testenv.NewRedisCluster(t)
	exerciseStore(t, c.Client(), "cluster")
	// The client the binaries build for --redis-addrs is a UniversalClient
	// in cluster mode; exercise that type too.
	u := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: c.Addrs[:1], IsClusterMode: true})
	defer u.Close()
	exerciseStore(t, u, "universal")
}

// TestStandaloneServer runs the same checks against one redis-server, where
// batches put windows of many jobs into one script call.
func TestStandaloneServer(t *testing.T) {
	exerciseStore(t, testenv.NewRedis(t).Client(), "standalone")
}

// TestRedisSentinel runs the store through a Sentinel-discovered master.
func TestRedisSentinel(t *testing.T) {
	s := testenv.NewRedisSentinel(t)
	exerciseStore(t, s.Client(t), "sentinel")
}

// exerciseChain completes a window of each of 40 jobs and claims its next
// window in the same Settle call (Settlement.Next): one batch mixing jobs,
// so, on a cluster, hash slots.
func exerciseChain(ctx context.Context, t *testing.T, s *dedupe.Store) {
	t.Helper()
	id := func(j, w int) string { return fmt.Sprintf("chain-%02d@2026-11-22T10:00:%02dZ", j, w) }
	var firsts []string
	for j := range 40 {
		firsts = append(firsts, id(j, 0))
	}
	cs, err := s.ClaimBatch(ctx, firsts, "w1")
	if err != nil {
		t.Fatalf("ClaimBatch: %v", err)
	}
	ss := make([]dedupe.Settlement, len(cs))
	for j, c := range cs {
		if c.Outcome != dedupe.Claimed {
			t.Fatalf("claim %s: %+v", firsts[j], c)
		}
		ss[j] = dedupe.Settlement{ID: firsts[j], Op: dedupe.OpComplete, Token: c.Token, Next: id(j, 1), Owner: "w1"}
	}
	res, err := s.Settle(ctx, ss)
	if err != nil {
		t.Fatalf("Settle with Next over 40 jobs: %v", err)
	}
	for j, r := range res {
		if r.Err != nil || r.Next.Outcome != dedupe.Claimed || r.Next.Token <= cs[j].Token || r.Next.Attempt != 1 || r.Next.WindowID != id(j, 1) {
			t.Fatalf("complete %s and claim %s: %+v (first token %d)", firsts[j], id(j, 1), r, cs[j].Token)
		}
		st, err := s.State(ctx, id(j, 1))
		if err != nil || st.Status != dedupe.StatusRunning || st.Token != r.Next.Token || st.Holder != "w1" {
			t.Fatalf("State(%s) after the chained claim = %+v, %v", id(j, 1), st, err)
		}
	}
}
