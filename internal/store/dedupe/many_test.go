package dedupe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// States reads the records of many windows at once and leaves out those
// without one; ForgetAll clears them all.
func TestStatesAndForgetAll(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	var ids []string
	for i := range 100 {
		ids = append(ids, fmt.Sprintf("many@2026-11-22T10:%02d:00Z", i%60)+fmt.Sprint(i/60))
	}
	// 0..29 done, 30..39 dead-lettered, 40..49 running, the rest no record.
	for i, id := range ids[:50] {
		c := mustClaim(t, s, id, "w", Claimed)
		var err error
		switch {
		case i < 30:
			err = s.Complete(ctx, id, c.Token)
		case i < 40:
			err = s.DeadLetter(ctx, id, c.Token, "boom")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sts, err := s.States(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 50 {
		t.Fatalf("States returned %d records, want 50", len(sts))
	}
	for i, id := range ids[:50] {
		want := StatusRunning
		switch {
		case i < 30:
			want = StatusDone
		case i < 40:
			want = StatusDeadLettered
		}
		if sts[id].Status != want {
			t.Fatalf("%s: status %q, want %q", id, sts[id].Status, want)
		}
	}
	if err := s.ForgetAll(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if sts, err := s.States(ctx, ids); err != nil || len(sts) != 0 {
		t.Fatalf("after ForgetAll: %d records, %v", len(sts), err)
	}
	if _, err := s.States(ctx, []string{ids[0], "no-at-sign"}); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("States with an invalid id: %v, want ErrInvalidID", err)
	}
	if sts, err := s.States(ctx, nil); err != nil || len(sts) != 0 {
		t.Fatalf("States(nil) = %v, %v", sts, err)
	}
}

// States reads exactly what State reads, for every status, a live claim's
// remaining lifetime included.
func TestStatesMatchState(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: time.Minute})
	ctx := context.Background()
	ids := []string{"a@1", "a@2", "b@1", "b@2", "c@1"}
	cs, err := s.ClaimBatch(ctx, ids, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, ids[1], cs[1].Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, ids[2], cs[2].Token, "failed once"); err != nil {
		t.Fatal(err)
	}
	if errs, err := s.Settle(ctx, []Settlement{{ID: ids[3], Op: OpSupersede, Token: cs[3].Token, Reason: "newer"}}); err != nil || errs[0].Err != nil {
		t.Fatal(err, errs)
	}
	sts, err := s.States(ctx, append(ids, "d@1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sts["d@1"]; ok || len(sts) != len(ids) {
		t.Fatalf("States = %v; want the %d claimed windows only", sts, len(ids))
	}
	for _, id := range ids {
		one, err := s.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		many := sts[id]
		if d := one.ClaimTTL - many.ClaimTTL; d < -time.Second || d > time.Second {
			t.Errorf("%s: claim TTL %v by State, %v by States", id, one.ClaimTTL, many.ClaimTTL)
		}
		one.ClaimTTL, many.ClaimTTL = 0, 0
		if one != many {
			t.Errorf("%s: State %+v, States %+v", id, one, many)
		}
	}
	if sts[ids[0]].ClaimTTL <= 0 || sts[ids[1]].Status != StatusDone || sts[ids[3]].Status != StatusSuperseded {
		t.Errorf("States %+v", sts)
	}
}
