package dedupe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const win = "report@2026-11-22T10:00:00Z"

// newStore starts a redis-server for the test and returns a Store on it.
func newStore(tb testing.TB, cfg Config) (*Store, *testenv.Redis, *redis.Client) {
	tb.Helper()
	r := testenv.NewRedis(tb)
	rdb := r.Client()
	if cfg.Namespace == "" {
		cfg.Namespace = "test"
	}
	s, err := New(rdb, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s, r, rdb
}

func mustClaim(t *testing.T, s *Store, id, owner string, want Outcome) Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), id, owner)
	if err != nil {
		t.Fatalf("claim %s by %s: %v", id, owner, err)
	}
	if c.Outcome != want {
		t.Fatalf("claim %s by %s: outcome %v, want %v (%+v)", id, owner, c.Outcome, want, c)
	}
	return c
}

// waitClaimed polls Claim until the live claim expires and owner gets it.
func waitClaimed(t *testing.T, s *Store, id, owner string) Claim {
	t.Helper()
	var c Claim
	testenv.Eventually(t, 5*time.Second, func() bool {
		var err error
		c, err = s.Claim(context.Background(), id, owner)
		if err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		return c.Outcome == Claimed
	}, "claim of %s by %s never succeeded", id, owner)
	return c
}

func TestClaimCompleteThenAlreadyDone(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()

	c := mustClaim(t, s, win, "w1", Claimed)
	if c.Token != 1 || c.Attempt != 1 || c.Holder != "w1" || c.WindowID != win || c.Retry != 0 {
		t.Fatalf("first claim = %+v", c)
	}
	st, err := s.State(ctx, win)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusRunning || st.Token != 1 || st.Attempts != 1 || st.Holder != "w1" ||
		st.ClaimTTL <= 0 || st.ClaimTTL > DefaultClaimTTL || time.Since(st.UpdatedAt).Abs() > time.Minute {
		t.Fatalf("state while running = %+v", st)
	}
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	d := mustClaim(t, s, win, "w2", AlreadyDone)
	if d.Token != c.Token || d.Holder != "w1" || d.Attempt != 1 || d.Retry != 0 {
		t.Fatalf("claim after done = %+v", d)
	}
	st, err = s.State(ctx, win)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusDone || st.Token != c.Token || st.Holder != "w1" || st.ClaimTTL != 0 {
		t.Fatalf("state when done = %+v", st)
	}
}

func TestClaimWhileLiveIsBusy(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 10 * time.Second})
	c := mustClaim(t, s, win, "w1", Claimed)
	b := mustClaim(t, s, win, "w2", Busy)
	if b.Token != c.Token || b.Holder != "w1" || b.Attempt != 1 || b.Retry <= 0 || b.Retry > 10*time.Second {
		t.Fatalf("busy claim = %+v", b)
	}
	// Busy changes nothing: the holder still completes.
	if err := s.Complete(context.Background(), win, c.Token); err != nil {
		t.Fatal(err)
	}
}

func TestExpiredClaimIsReclaimedWithHigherToken(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 200 * time.Millisecond})
	c1 := mustClaim(t, s, win, "w1", Claimed)
	c2 := waitClaimed(t, s, win, "w2")
	if c2.Token <= c1.Token || c2.Attempt != 2 || c2.Holder != "w2" {
		t.Fatalf("re-claim = %+v after %+v", c2, c1)
	}
}

func TestZombieCompleteIsFenced(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 200 * time.Millisecond})
	ctx := context.Background()
	old := mustClaim(t, s, win, "zombie", Claimed)
	cur := waitClaimed(t, s, win, "w2")

	for _, op := range []func() error{
		func() error { return s.Complete(ctx, win, old.Token) },
		func() error { return s.Extend(ctx, win, old.Token) },
		func() error { return s.Release(ctx, win, old.Token, "late") },
	} {
		if err := op(); !errors.Is(err, ErrFenced) {
			t.Fatalf("zombie op: err = %v, want ErrFenced", err)
		}
	}
	if err := s.Complete(ctx, win, cur.Token); err != nil {
		t.Fatal(err)
	}
	// After completion the zombie sees the window done, never completes it.
	if err := s.Complete(ctx, win, old.Token); !errors.Is(err, ErrAlreadyDone) {
		t.Fatalf("zombie complete after done: err = %v, want ErrAlreadyDone", err)
	}
	st, err := s.State(ctx, win)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusDone || st.Token != cur.Token || st.Holder != "w2" || st.Attempts != 2 {
		t.Fatalf("state = %+v", st)
	}
}

func TestCompleteAfterExpiryWithoutReclaim(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 150 * time.Millisecond})
	ctx := context.Background()
	c := mustClaim(t, s, win, "slow", Claimed)
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := s.State(ctx, win)
		return err == nil && st.ClaimTTL == 0
	}, "claim did not expire")
	st, err := s.State(ctx, win)
	if err != nil || st.Status != StatusRunning {
		t.Fatalf("expired claim state = %+v, %v", st, err)
	}
	// Nobody re-claimed, so nobody else ran it: the slow holder may finish.
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, win, "w2", AlreadyDone)
}

func TestCompleteTwice(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	err := s.Complete(ctx, win, c.Token)
	if !errors.Is(err, ErrAlreadyDone) {
		t.Fatalf("second complete: %v", err)
	}
	if got, want := err.Error(), "complete "+win+": dedupe: window already done"; got != want {
		t.Fatalf("error text %q, want %q", got, want)
	}
}

func TestReleaseThenClaim(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	c1 := mustClaim(t, s, win, "w1", Claimed)
	if err := s.Release(ctx, win, c1.Token+1, "not mine"); !errors.Is(err, ErrFenced) {
		t.Fatalf("release with wrong token: %v", err)
	}
	if err := s.Release(ctx, win, c1.Token, "handler: boom"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, win, c1.Token, "again"); err != nil {
		t.Fatalf("repeated release: %v", err)
	}
	st, err := s.State(ctx, win)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusFailed || st.LastError != "handler: boom" || st.ClaimTTL != 0 || st.Attempts != 1 {
		t.Fatalf("state after release = %+v", st)
	}
	// A released token can neither complete nor extend.
	if err := s.Complete(ctx, win, c1.Token); !errors.Is(err, ErrFenced) {
		t.Fatalf("complete after release: %v", err)
	}
	if err := s.Extend(ctx, win, c1.Token); !errors.Is(err, ErrFenced) {
		t.Fatalf("extend after release: %v", err)
	}
	c2 := mustClaim(t, s, win, "w2", Claimed) // at once, no TTL wait
	if c2.Token <= c1.Token || c2.Attempt != 2 {
		t.Fatalf("claim after release = %+v", c2)
	}
	if err := s.Release(ctx, win, c1.Token, "late"); !errors.Is(err, ErrFenced) {
		t.Fatalf("old release after re-claim: %v", err)
	}
	if err := s.Complete(ctx, win, c2.Token); err != nil {
		t.Fatal(err)
	}
	st, _ = s.State(ctx, win)
	if st.Status != StatusDone || st.LastError != "handler: boom" || st.Attempts != 2 {
		t.Fatalf("state after success = %+v", st)
	}
	if err := s.Release(ctx, win, c2.Token, "x"); !errors.Is(err, ErrAlreadyDone) {
		t.Fatalf("release when done: %v", err)
	}
}

func TestReleaseTruncatesReason(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	if err := s.Release(ctx, win, c.Token, strings.Repeat("é", maxReasonBytes)); err != nil {
		t.Fatal(err)
	}
	st, _ := s.State(ctx, win)
	if len(st.LastError) != maxReasonBytes || !strings.HasSuffix(st.LastError, "é") {
		t.Fatalf("stored reason: %d bytes", len(st.LastError))
	}
}

func TestExtend(t *testing.T) {
	const ttl = 300 * time.Millisecond
	s, _, _ := newStore(t, Config{ClaimTTL: ttl})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	start := time.Now()
	// The worker's extend loop: every ttl/3, for three times the TTL.
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for time.Since(start) < 3*ttl {
		<-tick.C
		if err := s.Extend(ctx, win, c.Token); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, win, "w2", Busy)
	}
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, win, c.Token); !errors.Is(err, ErrAlreadyDone) {
		t.Fatalf("extend when done: %v", err)
	}
}

func TestExtendRevivesExpiredClaimAndFencesOldToken(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 150 * time.Millisecond})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := s.State(ctx, win)
		return err == nil && st.ClaimTTL == 0
	}, "claim did not expire")
	// Nobody re-claimed: Extend re-creates the claim for its holder.
	if err := s.Extend(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	if b := mustClaim(t, s, win, "w2", Busy); b.Holder != "w1" || b.Token != c.Token {
		t.Fatalf("busy after revive = %+v", b)
	}
	c2 := waitClaimed(t, s, win, "w2")
	if err := s.Extend(ctx, win, c.Token); !errors.Is(err, ErrFenced) {
		t.Fatalf("extend with old token: %v", err)
	}
	if err := s.Extend(ctx, win, c2.Token); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionTTL(t *testing.T) {
	s, _, rdb := newStore(t, Config{ClaimTTL: 10 * time.Second, Retention: time.Hour})
	ctx := context.Background()
	wk, tag, err := s.key(win)
	if err != nil {
		t.Fatal(err)
	}
	tk := tokenKey(wk, tag)
	if wk != "kjob:{test:report}:w:"+win || tk != "kjob:{test:report}:token" {
		t.Fatalf("keys = %q %q", wk, tk)
	}
	if d := (names.Deployment{Namespace: "test"}); wk != d.JobKey("report", "w:"+win) || tk != d.JobKey("report", "token") {
		t.Fatalf("keys %q %q are not the per-job keys internal/base/names derives", wk, tk)
	}
	c := mustClaim(t, s, win, "w1", Claimed)
	// The claim lives in the window's hash, until the server's TIME
	// passes claim_until_ms.
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	until, err := rdb.HGet(ctx, wk, "claim_until_ms").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.UnixMilli(until).Sub(now); left <= 9*time.Second || left > 10*time.Second {
		t.Fatalf("claim until %v, %v after the server's time", until, left)
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 2 {
		t.Fatalf("keys of one claimed window = %q; want its hash and its job's token counter", keys)
	}
	// The claim keeps the record for Retention + ClaimTTL, so a window
	// completed while its claim is live stays done for at least Retention.
	if p := rdb.PTTL(ctx, wk).Val(); p <= time.Hour || p > time.Hour+10*time.Second {
		t.Fatalf("claimed record PTTL = %v, want Retention + ClaimTTL = 1h0m10s", p)
	}
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	if p := rdb.PTTL(ctx, wk).Val(); p <= 59*time.Minute || p > time.Hour+10*time.Second {
		t.Fatalf("done record PTTL = %v, want about 1h (at least Retention after completion)", p)
	}
	if p := rdb.PTTL(ctx, tk).Val(); p != -1 {
		t.Fatalf("token counter PTTL = %v, want -1 (never expires)", p)
	}
	if v := rdb.HGetAll(ctx, wk).Val(); v["status"] != "done" || v["token"] != "1" || v["holder"] != "w1" || v["updated_ms"] == "" ||
		v["attempts"] != "1" || v["claim_until_ms"] != "0" {
		t.Fatalf("record = %v", v)
	}
}

// A window completed after its claim expired (nobody re-claimed) is kept
// Retention from its completion.
func TestRetentionAfterExpiredClaim(t *testing.T) {
	s, _, rdb := newStore(t, Config{ClaimTTL: MinClaimTTL, Retention: time.Hour})
	ctx := context.Background()
	c := mustClaim(t, s, win, "slow", Claimed)
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := s.State(ctx, win)
		return err == nil && st.ClaimTTL == 0
	}, "claim did not expire")
	// Let the record's TTL fall below Retention, then complete.
	wk, _, _ := s.key(win)
	testenv.Eventually(t, 5*time.Second, func() bool {
		return rdb.PTTL(ctx, wk).Val() < time.Hour-50*time.Millisecond
	}, "record TTL did not fall below Retention")
	if err := s.Complete(ctx, win, c.Token); err != nil {
		t.Fatal(err)
	}
	if p := rdb.PTTL(ctx, wk).Val(); p <= time.Hour-50*time.Millisecond || p > time.Hour {
		t.Fatalf("done record PTTL = %v, want Retention (1h) from the completion", p)
	}
}

func TestTokensIncreasePerJob(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, job := range []string{"report", "billing"} {
		var last int64
		for i := range 5 {
			id := fmt.Sprintf("%s@%s", job, start.Add(time.Duration(i)*time.Hour).Format(time.RFC3339))
			c := mustClaim(t, s, id, "w", Claimed)
			if c.Token != last+1 {
				t.Fatalf("%s: token %d after %d", id, c.Token, last)
			}
			last = c.Token
			if err := s.Complete(ctx, id, c.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestForget(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	if err := s.Forget(ctx, win); err != nil {
		t.Fatalf("forget unknown window: %v", err)
	}
	c1 := mustClaim(t, s, win, "w1", Claimed)
	if err := s.Complete(ctx, win, c1.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, win); err != nil {
		t.Fatal(err)
	}
	_, err := s.State(ctx, win)
	if !errors.Is(err, ErrNotFound) || err.Error() != "state "+win+": dedupe: no record of window" {
		t.Fatalf("state after forget: %v", err)
	}
	c2 := mustClaim(t, s, win, "w2", Claimed)
	if c2.Token <= c1.Token || c2.Attempt != 1 {
		t.Fatalf("claim after forget = %+v", c2)
	}
	// Forgetting a running window fences its holder.
	if err := s.Forget(ctx, win); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, win, c2.Token); !errors.Is(err, ErrFenced) {
		t.Fatalf("complete after forget: %v", err)
	}
	if c3 := mustClaim(t, s, win, "w3", Claimed); c3.Token <= c2.Token {
		t.Fatalf("claim after second forget = %+v", c3)
	}
}

func TestInvalidIDs(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	noAt := `dedupe: invalid window id "report": no '@'; window ids are "<job>@<window>", e.g. "report@2026-11-22T10:00:00Z"`
	empty := `dedupe: invalid window id "@2026-11-22T10:00:00Z": empty job name before '@'; window ids are "<job>@<window>"`
	for _, tc := range []struct {
		id, want string
	}{
		{"report", noAt},
		{"@2026-11-22T10:00:00Z", empty},
		{"", `dedupe: invalid window id "": no '@'; window ids are "<job>@<window>", e.g. "report@2026-11-22T10:00:00Z"`},
	} {
		ops := map[string]error{}
		_, ops["claim"] = s.Claim(ctx, tc.id, "w")
		ops["extend"] = s.Extend(ctx, tc.id, 1)
		ops["complete"] = s.Complete(ctx, tc.id, 1)
		ops["release"] = s.Release(ctx, tc.id, 1, "r")
		ops["forget"] = s.Forget(ctx, tc.id)
		_, ops["state"] = s.State(ctx, tc.id)
		_, ops["claim batch"] = s.ClaimBatch(ctx, []string{win, tc.id}, "w")
		_, ops["complete batch"] = s.CompleteBatch(ctx, []string{tc.id}, []int64{1})
		for op, err := range ops {
			if !errors.Is(err, ErrInvalidID) || err.Error() != op+": "+tc.want {
				t.Errorf("%s(%q): error %q, want %q", op, tc.id, err, op+": "+tc.want)
			}
		}
	}
	// The batch failed before claiming its valid window.
	if _, err := s.State(ctx, win); !errors.Is(err, ErrNotFound) {
		t.Fatalf("state of window in rejected batch: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, `dedupe: Config.Namespace is empty; set it to the deployment's name, e.g. "prod" (letters, digits, '_', '.', '-')`},
		{Config{Namespace: "prod:x"}, `dedupe: Config.Namespace = "prod:x" contains ':'; use only letters, digits, '_', '.', '-'`},
		{Config{Namespace: "a}b"}, `dedupe: Config.Namespace = "a}b" contains '}'; use only letters, digits, '_', '.', '-'`},
		{Config{Namespace: "prod", ClaimTTL: 50 * time.Millisecond}, `dedupe: Config.ClaimTTL = 50ms is below the minimum 100ms; set it to at least 100ms, or 0 for the default 6s`},
		{Config{Namespace: "prod", ClaimTTL: -time.Second}, `dedupe: Config.ClaimTTL = -1s is below the minimum 100ms; set it to at least 100ms, or 0 for the default 6s`},
		{Config{Namespace: "prod", Retention: 5 * time.Second}, `dedupe: Config.Retention = 5s is shorter than Config.ClaimTTL = 6s; set it to at least ClaimTTL, or 0 for the default 168h0m0s`},
		{Config{Namespace: "prod", Retention: -time.Hour}, `dedupe: Config.Retention = -1h0m0s is shorter than Config.ClaimTTL = 6s; set it to at least ClaimTTL, or 0 for the default 168h0m0s`},
	} {
		_, err := New(rdb, tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): error %q, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(nil, Config{Namespace: "prod"}); err == nil ||
		err.Error() != "dedupe: New: client is nil; pass a redis.UniversalClient, e.g. redis.NewClient(opts)" {
		t.Errorf("New(nil): %v", err)
	}
	s, err := New(rdb, Config{Namespace: "prod-1.eu_west"})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.ClaimTTL != DefaultClaimTTL || s.cfg.Retention != DefaultRetention || s.claimMS != "6000" || s.retainMS != "604800000" {
		t.Fatalf("defaults: %+v", s.cfg)
	}
}

func TestBatch(t *testing.T) {
	s, _, rdb := newStore(t, Config{})
	ctx := context.Background()
	ids := []string{"a@1", "a@2", "a@3", "b@1"}
	done := mustClaim(t, s, ids[0], "other", Claimed)
	if err := s.Complete(ctx, ids[0], done.Token); err != nil {
		t.Fatal(err)
	}
	busy := mustClaim(t, s, ids[1], "other", Claimed)

	// A flushed script cache exercises the NOSCRIPT fallback.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, ids, "me")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 4 ||
		cs[0].Outcome != AlreadyDone || cs[0].Token != done.Token || cs[0].Holder != "other" ||
		cs[1].Outcome != Busy || cs[1].Token != busy.Token || cs[1].Holder != "other" || cs[1].Retry <= 0 ||
		cs[2].Outcome != Claimed || cs[2].Token != 3 || cs[2].Holder != "me" || cs[2].WindowID != ids[2] ||
		cs[3].Outcome != Claimed || cs[3].Token != 1 || cs[3].Attempt != 1 {
		t.Fatalf("claim batch = %+v", cs)
	}

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	errs, err := s.CompleteBatch(ctx, ids, []int64{done.Token, cs[1].Token + 100, cs[2].Token, cs[3].Token})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 4 || !errors.Is(errs[0], ErrAlreadyDone) || !errors.Is(errs[1], ErrFenced) || errs[2] != nil || errs[3] != nil {
		t.Fatalf("complete batch = %v", errs)
	}
	if errs[1].Error() != "complete a@2: dedupe: fenced: claim is held by a newer token" {
		t.Fatalf("per-window error text: %q", errs[1])
	}
	for _, id := range ids[2:] {
		mustClaim(t, s, id, "x", AlreadyDone)
	}

	if _, err := s.CompleteBatch(ctx, ids, []int64{1}); err == nil ||
		err.Error() != "complete batch: 4 ids but 1 tokens; pass one token per id" {
		t.Fatalf("mismatched batch: %v", err)
	}
	if cs, err := s.ClaimBatch(ctx, nil, "me"); cs != nil || err != nil {
		t.Fatalf("empty claim batch: %v %v", cs, err)
	}
	if errs, err := s.CompleteBatch(ctx, nil, nil); errs != nil || err != nil {
		t.Fatalf("empty complete batch: %v %v", errs, err)
	}
	// The same window twice in one batch: the second sees the first's claim.
	cs, err = s.ClaimBatch(ctx, []string{"c@1", "c@1"}, "me")
	if err != nil || cs[0].Outcome != Claimed || cs[1].Outcome != Busy || cs[1].Holder != "me" {
		t.Fatalf("duplicate ids: %+v, %v", cs, err)
	}
}

func TestRedisDown(t *testing.T) {
	r := testenv.NewRedis(t)
	if !r.Real() {
		t.Skip("needs a redis-server this test can kill; have " + r.String())
	}
	// No client-side retries, so each call fails fast once the server is gone.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	s, err := New(rdb, Config{Namespace: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := mustClaim(t, s, win, "w1", Claimed)
	r.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ops := map[string]error{}
	var cl Claim
	cl, ops["claim"] = s.Claim(ctx, win, "w2")
	ops["extend"] = s.Extend(ctx, win, c.Token)
	ops["complete"] = s.Complete(ctx, win, c.Token)
	ops["release"] = s.Release(ctx, win, c.Token, "r")
	ops["forget"] = s.Forget(ctx, win)
	_, ops["state"] = s.State(ctx, win)
	var cls []Claim
	cls, ops["claim batch"] = s.ClaimBatch(ctx, []string{win}, "w2")
	var errs []error
	errs, ops["complete batch"] = s.CompleteBatch(ctx, []string{win}, []int64{c.Token})
	for op, err := range ops {
		if err == nil {
			t.Errorf("%s with Redis down: no error", op)
			continue
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrAlreadyDone) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidID) {
			t.Errorf("%s with Redis down: a wrong answer: %v", op, err)
		}
		if !strings.HasPrefix(err.Error(), op+" ") {
			t.Errorf("%s: error lacks context: %v", op, err)
		}
	}
	if cl != (Claim{}) || cls != nil || errs != nil {
		t.Errorf("results with Redis down: %+v %+v %v", cl, cls, errs)
	}

	// Back up (without persistence: it forgot everything, see the package doc).
	r.Restart()
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := s.Claim(context.Background(), "other@1", "w")
		return err == nil
	}, "store unusable after Redis restart")
}

// TestConcurrentClaimComplete races 8 workers over the same 200 windows.
// Some attempts fail (Release), some stall past the claim TTL and then try
// to complete (fenced if another worker re-claimed meanwhile). Every window must be
// completed exactly once, by the latest token.
func TestConcurrentClaimComplete(t *testing.T) {
	const workers, windows = 8, 200
	s, _, _ := newStore(t, Config{ClaimTTL: 100 * time.Millisecond})
	stalls := true // claims of stalled goroutines expire (in the fallback too)
	ctx := context.Background()
	ids := make([]string, windows)
	for i := range ids {
		ids[i] = fmt.Sprintf("job%d@%04d", i%7, i)
	}
	var (
		completions [windows]atomic.Int32
		fenced      atomic.Int32
		mu          sync.Mutex
		completedBy = map[string]int64{}
		wg          sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			owner := fmt.Sprintf("w%d", w)
			pending := rng.Perm(windows)
			for len(pending) > 0 {
				i := pending[0]
				pending = pending[1:]
				c, err := s.Claim(ctx, ids[i], owner)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				switch c.Outcome {
				case AlreadyDone:
					continue
				case Busy:
					pending = append(pending, i) // look again later
					continue
				}
				switch p := rng.IntN(20); {
				case p == 0: // the handler failed
					if err := s.Release(ctx, ids[i], c.Token, "boom"); err != nil && !errors.Is(err, ErrFenced) {
						t.Errorf("release: %v", err)
					}
					pending = append(pending, i)
					continue
				case p == 1 && stalls: // stall past the claim TTL (someone else may take the window over)
					for {
						st, err := s.State(ctx, ids[i])
						if err != nil {
							t.Errorf("state: %v", err)
							return
						}
						if st.Token != c.Token || st.ClaimTTL == 0 {
							break
						}
						time.Sleep(5 * time.Millisecond) // a slow handler, polled
					}
				}
				err = s.Complete(ctx, ids[i], c.Token)
				switch {
				case err == nil:
					completions[i].Add(1)
					mu.Lock()
					completedBy[ids[i]] = c.Token
					mu.Unlock()
				case errors.Is(err, ErrFenced), errors.Is(err, ErrAlreadyDone):
					fenced.Add(1)
				default:
					t.Errorf("complete: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if n := completions[i].Load(); n != 1 {
			t.Errorf("%s completed %d times", id, n)
		}
		st, err := s.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusDone || st.Token != completedBy[id] {
			t.Errorf("%s: state %+v, completed by token %d", id, st, completedBy[id])
		}
	}
	t.Logf("%d stale completions fenced", fenced.Load())
}

func TestExtendAndUnclaimBatch(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: MinClaimTTL})
	ctx := context.Background()
	ids := []string{"u@1", "u@2", "u@3", "u@4"}
	// u@2 failed once before: its next claim is attempt 2.
	first := mustClaim(t, s, ids[1], "me", Claimed)
	if err := s.Release(ctx, ids[1], first.Token, "boom"); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, ids, "me")
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]int64, len(cs))
	for i, c := range cs {
		if c.Outcome != Claimed {
			t.Fatalf("claim %s = %v", ids[i], c.Outcome)
		}
		tokens[i] = c.Token
	}
	if cs[1].Attempt != 2 {
		t.Fatalf("u@2 attempt = %d, want 2", cs[1].Attempt)
	}
	if err := s.Complete(ctx, ids[3], tokens[3]); err != nil {
		t.Fatal(err)
	}
	// Extend keeps the claims alive past their TTL (and revives expired
	// ones nobody re-claimed).
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := s.State(ctx, ids[2])
		return err == nil && st.ClaimTTL == 0
	}, "claim of %s did not expire", ids[2])
	errs, err := s.ExtendBatch(ctx, ids, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrAlreadyDone) {
		t.Fatalf("extend batch = %v", errs)
	}
	// Unclaim gives the windows back without counting an attempt.
	errs, err = s.UnclaimBatch(ctx, ids, append(tokens[:2:2], tokens[2]+100, tokens[3]))
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrFenced) || !errors.Is(errs[3], ErrAlreadyDone) {
		t.Fatalf("unclaim batch = %v", errs)
	}
	if _, err := s.State(ctx, ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a window unclaimed after its first claim should be gone, State err = %v", err)
	}
	st, err := s.State(ctx, ids[1])
	if err != nil || st.Status != StatusFailed || st.Attempts != 1 || st.LastError != "boom" || st.ClaimTTL != 0 {
		t.Fatalf("u@2 after unclaim = %+v, %v", st, err)
	}
	again := mustClaim(t, s, ids[1], "other", Claimed)
	if again.Attempt != 2 || again.Token <= tokens[1] {
		t.Fatalf("re-claim of u@2 = %+v; want attempt 2 and a token above %d", again, tokens[1])
	}
	if _, err := s.UnclaimBatch(ctx, ids, nil); err == nil ||
		err.Error() != "unclaim batch: 4 ids but 0 tokens; pass one token per id" {
		t.Fatalf("mismatched batch: %v", err)
	}
}

// A batch is split per job whatever the client, so no script call crosses
// slots, even behind a proxy or a client wrapper that fronts a Cluster.
func TestBatchGroups(t *testing.T) {
	ids := []string{"a@1", "b@1", "a@2", "c@1", "b@2"}
	single, _, _ := newStore(t, Config{})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}) // never contacted
	defer cc.Close()
	cluster, err := New(cc, Config{Namespace: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"single server": single, "cluster": cluster} {
		g, err := s.group(ids, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range g {
			got = append(got, fmt.Sprint(g.idx, g.keys))
		}
		want := []string{
			"[0 2] [kjob:{test:a}:token kjob:{test:a}:w:a@1 kjob:{test:a}:w:a@2]",
			"[1 4] [kjob:{test:b}:token kjob:{test:b}:w:b@1 kjob:{test:b}:w:b@2]",
			"[3] [kjob:{test:c}:token kjob:{test:c}:w:c@1]",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: groups = %q, want %q", name, got, want)
		}
		if _, err := s.group([]string{"nojob"}, false, nil); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("%s: invalid id: %v", name, err)
		}
	}
}
