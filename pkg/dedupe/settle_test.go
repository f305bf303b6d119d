package dedupe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Skip and supersede settle a window for good: Claim then reports it
// AlreadyDone, and no compare-and-set (a zombie's Complete included) can
// change it.
func TestSkipAndSupersedeAreSettled(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: time.Second})
	ctx := context.Background()
	for _, tc := range []struct {
		op     Op
		status string
	}{{OpSkip, StatusSkipped}, {OpSupersede, StatusSuperseded}} {
		t.Run(tc.status, func(t *testing.T) {
			// Never claimed: settled without a token.
			fresh := "job-" + tc.status + "@2026-11-22T10:00:00Z"
			errs, err := s.Settle(ctx, []Settlement{{ID: fresh, Op: tc.op, Reason: "because"}})
			if err != nil || errs[0] != nil {
				t.Fatalf("settle a fresh window: %v %v", err, errs)
			}
			st, err := s.State(ctx, fresh)
			if err != nil || st.Status != tc.status || st.LastError != "because" || st.ClaimTTL != 0 {
				t.Fatalf("state = %+v, %v", st, err)
			}
			if !Settled(st.Status) {
				t.Fatalf("Settled(%q) = false", st.Status)
			}
			mustClaim(t, s, fresh, "w2", AlreadyDone)

			// Running under our token: settled with the token; the
			// token's Complete is refused afterwards.
			held := "job-" + tc.status + "@2026-11-22T10:01:00Z"
			c := mustClaim(t, s, held, "w1", Claimed)
			errs, err = s.Settle(ctx, []Settlement{{ID: held, Op: tc.op, Token: c.Token + 1, Reason: "not mine"}})
			if err != nil || !errors.Is(errs[0], ErrFenced) {
				t.Fatalf("settle with another token: %v %v, want ErrFenced", err, errs)
			}
			errs, err = s.Settle(ctx, []Settlement{{ID: held, Op: tc.op, Token: c.Token, Reason: "newer window"}})
			if err != nil || errs[0] != nil {
				t.Fatalf("settle with the claim's token: %v %v", err, errs)
			}
			if err := s.Complete(ctx, held, c.Token); !errors.Is(err, ErrAlreadyDone) {
				t.Fatalf("complete after %s: %v, want ErrAlreadyDone", tc.status, err)
			}
			if err := s.Extend(ctx, held, c.Token); !errors.Is(err, ErrAlreadyDone) {
				t.Fatalf("extend after %s: %v, want ErrAlreadyDone", tc.status, err)
			}
			// Settling again reports it settled, whatever the op.
			errs, err = s.Settle(ctx, []Settlement{{ID: held, Op: OpSkip, Reason: "again"}, {ID: held, Op: OpDeadLetter, Token: c.Token, Reason: "again"}})
			if err != nil || !errors.Is(errs[0], ErrAlreadyDone) || !errors.Is(errs[1], ErrAlreadyDone) {
				t.Fatalf("settle a settled window: %v %v", err, errs)
			}
			if st, _ := s.State(ctx, held); st.Status != tc.status || st.LastError != "newer window" {
				t.Fatalf("state after re-settling = %+v", st)
			}
		})
	}
}

// A token-less skip needs the window free of live claims: a live claim
// (someone runs it) answers ErrBusy; once the claim expired, or after a
// release, the skip settles it and the old holder's Complete is refused.
func TestSkipWithoutTokenWaitsForLiveClaim(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 200 * time.Millisecond})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	errs, err := s.Settle(ctx, []Settlement{{ID: win, Op: OpSkip, Reason: "r"}})
	if err != nil || !errors.Is(errs[0], ErrBusy) {
		t.Fatalf("skip under a live claim: %v %v, want ErrBusy", err, errs)
	}
	if st, _ := s.State(ctx, win); st.Status != StatusRunning {
		t.Fatalf("a refused skip changed the window: %+v", st)
	}
	time.Sleep(300 * time.Millisecond) // the claim's TTL runs out on the server's clock
	errs, err = s.Settle(ctx, []Settlement{{ID: win, Op: OpSkip, Reason: "r"}})
	if err != nil || errs[0] != nil {
		t.Fatalf("skip after the claim expired: %v %v", err, errs)
	}
	if err := s.Complete(ctx, win, c.Token); !errors.Is(err, ErrAlreadyDone) {
		t.Fatalf("the expired holder's complete: %v, want ErrAlreadyDone", err)
	}

	released := "report@2026-11-22T11:00:00Z"
	c = mustClaim(t, s, released, "w1", Claimed)
	if err := s.Release(ctx, released, c.Token, "failed"); err != nil {
		t.Fatal(err)
	}
	errs, err = s.Settle(ctx, []Settlement{{ID: released, Op: OpSupersede, Reason: "replaced"}})
	if err != nil || errs[0] != nil {
		t.Fatalf("supersede a released window: %v %v", err, errs)
	}
	mustClaim(t, s, released, "w2", AlreadyDone)
}

// One Settle call mixes ops and jobs, each window judged on its own, in
// one script call on a single server.
func TestSettleMixedBatch(t *testing.T) {
	s, r, rdb := newStore(t, Config{})
	if !r.Real() {
		t.Skip("counting script calls needs a real redis-server")
	}
	ctx := context.Background()
	// Warm up: the first use of a script on a server is EVALSHA, refused
	// NOSCRIPT, then EVAL.
	if _, err := s.Settle(ctx, []Settlement{{ID: "warm-a@1", Op: OpSkip}, {ID: "warm-b@1", Op: OpSkip}}); err != nil {
		t.Fatal(err)
	}
	var ss []Settlement
	var want []error
	for j := range 3 {
		id := func(i int) string { return fmt.Sprintf("mix-%d@2026-11-22T10:0%d:00Z", j, i) }
		ids := []string{id(0), id(1), id(2), id(3)}
		cs, err := s.ClaimBatch(ctx, ids[:3], "w1")
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss,
			Settlement{ID: ids[0], Op: OpComplete, Token: cs[0].Token},
			Settlement{ID: ids[1], Op: OpRelease, Token: cs[1].Token, Reason: "failed"},
			Settlement{ID: ids[2], Op: OpComplete, Token: cs[2].Token + 100},
			Settlement{ID: ids[3], Op: OpSkip, Reason: "skipped"},
		)
		want = append(want, nil, nil, ErrFenced, nil)
	}
	before := scriptCalls(t, rdb)
	errs, err := s.Settle(ctx, ss)
	if err != nil {
		t.Fatal(err)
	}
	if n := scriptCalls(t, rdb) - before; n != 1 {
		t.Errorf("script calls for a mixed batch of 3 jobs = %d, want 1", n)
	}
	for i := range ss {
		if want[i] == nil && errs[i] != nil || want[i] != nil && !errors.Is(errs[i], want[i]) {
			t.Errorf("%s %s: %v, want %v", ss[i].Op, ss[i].ID, errs[i], want[i])
		}
	}
	wantStatus := []string{StatusDone, StatusFailed, StatusRunning, StatusSkipped}
	for i, st := range ss {
		got, err := s.State(ctx, st.ID)
		if err != nil || got.Status != wantStatus[i%4] {
			t.Errorf("%s after the batch: %+v %v, want %s", st.ID, got, err, wantStatus[i%4])
		}
	}
	if _, err := s.Settle(ctx, []Settlement{{ID: win, Op: Op(99)}}); err == nil {
		t.Error("an unknown op was accepted")
	}
}
