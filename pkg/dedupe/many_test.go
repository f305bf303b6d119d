package dedupe

import (
	"context"
	"errors"
	"fmt"
	"testing"
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
