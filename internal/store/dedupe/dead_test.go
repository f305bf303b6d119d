package dedupe

import (
	"context"
	"errors"
	"testing"
)

// A dead-lettered window is settled: Claim reports AlreadyDone, so a
// redelivered record of it is skipped, and no token can touch it again
// until Forget.
func TestDeadLetterIsTerminal(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	c1 := mustClaim(t, s, win, "w1", Claimed)
	if err := s.DeadLetter(ctx, win, c1.Token+1, "not mine"); !errors.Is(err, ErrFenced) {
		t.Fatalf("dead-letter with a wrong token: %v", err)
	}
	if err := s.DeadLetter(ctx, win, c1.Token, "handler: permanent"); err != nil {
		t.Fatal(err)
	}
	st, err := s.State(ctx, win)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusDeadLettered || st.LastError != "handler: permanent" || st.ClaimTTL != 0 {
		t.Fatalf("state after dead-letter = %+v", st)
	}
	if c := mustClaim(t, s, win, "w2", AlreadyDone); c.Token != c1.Token || c.Attempt != 1 {
		t.Fatalf("claim of a dead-lettered window = %+v", c)
	}
	for name, err := range map[string]error{
		"complete":    s.Complete(ctx, win, c1.Token),
		"extend":      s.Extend(ctx, win, c1.Token),
		"release":     s.Release(ctx, win, c1.Token, "x"),
		"dead-letter": s.DeadLetter(ctx, win, c1.Token, "again"),
	} {
		if !errors.Is(err, ErrAlreadyDone) {
			t.Errorf("%s of a dead-lettered window: %v, want ErrAlreadyDone", name, err)
		}
	}
	if err := s.Forget(ctx, win); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, s, win, "w3", Claimed); c.Token <= c1.Token {
		t.Fatalf("claim after Forget = %+v", c)
	}
}

// A window released after a failure can be dead-lettered by the released
// token (the worker releases before its backoff and dead-letters on the
// last attempt without claiming again).
func TestDeadLetterAfterRelease(t *testing.T) {
	s, _, _ := newStore(t, Config{})
	ctx := context.Background()
	c := mustClaim(t, s, win, "w1", Claimed)
	if err := s.Release(ctx, win, c.Token, "boom"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeadLetter(ctx, win, c.Token, "boom"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, win, "w2", AlreadyDone)
}
