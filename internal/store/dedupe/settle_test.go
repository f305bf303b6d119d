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
			if err != nil || errs[0].Err != nil {
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
			if err != nil || !errors.Is(errs[0].Err, ErrFenced) {
				t.Fatalf("settle with another token: %v %v, want ErrFenced", err, errs)
			}
			errs, err = s.Settle(ctx, []Settlement{{ID: held, Op: tc.op, Token: c.Token, Reason: "newer window"}})
			if err != nil || errs[0].Err != nil {
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
			if err != nil || !errors.Is(errs[0].Err, ErrAlreadyDone) || !errors.Is(errs[1].Err, ErrAlreadyDone) {
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
	if err != nil || !errors.Is(errs[0].Err, ErrBusy) {
		t.Fatalf("skip under a live claim: %v %v, want ErrBusy", err, errs)
	}
	if st, _ := s.State(ctx, win); st.Status != StatusRunning {
		t.Fatalf("a refused skip changed the window: %+v", st)
	}
	time.Sleep(300 * time.Millisecond) // the claim's TTL runs out on the server's clock
	errs, err = s.Settle(ctx, []Settlement{{ID: win, Op: OpSkip, Reason: "r"}})
	if err != nil || errs[0].Err != nil {
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
	if err != nil || errs[0].Err != nil {
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
		if want[i] == nil && errs[i].Err != nil || want[i] != nil && !errors.Is(errs[i].Err, want[i]) {
			t.Errorf("%s %s: %v, want %v", ss[i].Op, ss[i].ID, errs[i].Err, want[i])
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

// A complete with Next claims the job's next window in the same step, and
// only when the completion succeeds: a refused completion leaves the next
// window alone; a next window done already or held by a live claim is
// reported as ClaimBatch would.
func TestSettleChainsTheNextClaim(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 10 * time.Second})
	ctx := context.Background()
	id := func(i int) string { return fmt.Sprintf("chain@2026-11-22T10:0%d:00Z", i) }
	cs, err := s.ClaimBatch(ctx, []string{id(0), id(3), id(5), id(6)}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, id(6), cs[3].Token); err != nil { // id(6) is done
		t.Fatal(err)
	}
	// id(1) is held by another worker's live claim.
	if err := s.Complete(ctx, id(3), cs[1].Token); err != nil {
		t.Fatal(err)
	}
	other, err := s.Claim(ctx, id(1), "w2")
	if err != nil || other.Outcome != Claimed {
		t.Fatalf("w2 claims %s: %+v %v", id(1), other, err)
	}
	res, err := s.Settle(ctx, []Settlement{
		{ID: id(0), Op: OpComplete, Token: cs[0].Token, Next: id(1), Owner: "w1"}, // next busy
		{ID: id(5), Op: OpComplete, Token: cs[2].Token, Next: id(6), Owner: "w1"}, // next done
		{ID: id(3), Op: OpComplete, Token: cs[1].Token, Next: id(4), Owner: "w1"}, // already done: next left alone
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Next.Outcome != Busy || res[0].Next.Holder != "w2" || res[0].Next.Token != other.Token || res[0].Next.Retry <= 0 {
		t.Errorf("next window held by w2: %+v, want Busy with w2's token %d", res[0], other.Token)
	}
	if res[1].Err != nil || res[1].Next.Outcome != AlreadyDone || res[1].Next.Token != cs[3].Token {
		t.Errorf("next window done: %+v, want AlreadyDone with token %d", res[1], cs[3].Token)
	}
	if !errors.Is(res[2].Err, ErrAlreadyDone) || res[2].Next != (Claim{}) {
		t.Errorf("refused completion: %+v, want ErrAlreadyDone and no claim of the next window", res[2])
	}
	if st, err := s.State(ctx, id(4)); !errors.Is(err, ErrNotFound) {
		t.Errorf("the next window of a refused completion: %+v %v, want never claimed (ErrNotFound)", st, err)
	}
	// A fenced completion claims nothing either.
	c, err := s.Claim(ctx, id(7), "w1")
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Settle(ctx, []Settlement{{ID: id(7), Op: OpComplete, Token: c.Token + 1, Next: id(8), Owner: "w1"}})
	if err != nil || !errors.Is(res[0].Err, ErrFenced) || res[0].Next != (Claim{}) {
		t.Errorf("fenced completion: %+v %v, want ErrFenced and no claim", res, err)
	}
	// Mistakes fail the whole call before Redis is asked.
	for _, bad := range []Settlement{
		{ID: id(7), Op: OpComplete, Token: c.Token, Next: "other@2026-11-22T10:00:00Z", Owner: "w1"},
		{ID: id(7), Op: OpComplete, Token: c.Token, Next: id(8)},
		{ID: id(7), Op: OpRelease, Token: c.Token, Next: id(8), Owner: "w1"},
	} {
		if _, err := s.Settle(ctx, []Settlement{bad}); err == nil {
			t.Errorf("Settle(%+v) succeeded, want an error", bad)
		}
	}
	if st, err := s.State(ctx, id(7)); err != nil || st.Status != StatusRunning {
		t.Errorf("%s after refused calls: %+v %v, want still running", id(7), st, err)
	}
}

// A settle call's keys and arguments cost allocations per call, not per
// window (the no-op burst's hot path): a call chaining the next windows of
// 100 jobs allocates at most a few objects per window more than one of 10
// jobs (each window's reply values and Result; before, about a dozen: its
// three keys, its op letter and token, each boxed into an interface).
func TestSettleAllocatesPerCall(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	allocs := func(jobs int) float64 {
		first := make([]string, jobs)
		for j := range first {
			first[j] = fmt.Sprintf("alloc%d-%03d@0", jobs, j)
		}
		nexts := make([][]string, 12) // AllocsPerRun runs once more than asked
		for n := range nexts {
			nexts[n] = make([]string, jobs)
			for j := range jobs {
				nexts[n][j] = fmt.Sprintf("alloc%d-%03d@%d", jobs, j, n+1)
			}
		}
		c := newChain(t, s, first)
		n := 0
		return testing.AllocsPerRun(10, func() {
			c.step(t, func(j int) string { return nexts[n][j] })
			n++
		})
	}
	small, large := allocs(10), allocs(100)
	perWindow := (large - small) / 90
	t.Logf("allocations per Settle call: %.0f with 10 windows, %.0f with 100: %.1f per window", small, large, perWindow)
	if perWindow > 4 {
		t.Errorf("a settle call allocates %.1f objects per window, want at most 4", perWindow)
	}
}
