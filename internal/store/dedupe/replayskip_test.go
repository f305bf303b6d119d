package dedupe

import (
	"context"
	"slices"
	"testing"
	"time"
)

// SkipForReplay settles what holds no live claim (never claimed, failed),
// leaves a live claim alone (Busy) and a settled window as it is, records
// a skipped-replay run for each window it settled, and a second call
// changes nothing.
func TestSkipForReplay(t *testing.T) {
	s, _, _ := newStore(t, Config{ClaimTTL: 5 * time.Second})
	ctx := context.Background()
	id := func(i int) string { return "job@2026-11-22T10:0" + string(rune('0'+i)) + ":00Z" }
	fresh, failed, live, done := id(0), id(1), id(2), id(3)
	c := mustClaim(t, s, failed, "w1", Claimed)
	if err := s.Release(ctx, failed, c.Token, "boom"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, live, "w1", Claimed)
	c = mustClaim(t, s, done, "w1", Claimed)
	if err := s.Complete(ctx, done, c.Token); err != nil {
		t.Fatal(err)
	}
	var ws []Run
	for _, w := range []string{fresh, failed, live, done} {
		ws = append(ws, Run{WindowID: w, Job: "job"})
	}
	res, err := s.SkipForReplay(ctx, ws, "request r1 by alice", "w9")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Skipped, []string{fresh, failed}) || !slices.Equal(res.Busy, []string{live}) || !slices.Equal(res.Settled, []string{done}) {
		t.Fatalf("result %+v", res)
	}
	for _, w := range []string{fresh, failed} {
		st, err := s.State(ctx, w)
		if err != nil || !SkippedByReplay(st) || st.LastError != ReplaySkipReason("request r1 by alice") {
			t.Fatalf("%s: %+v, %v; want skipped by the replay", w, st, err)
		}
		mustClaim(t, s, w, "w2", AlreadyDone)
	}
	if st, _ := s.State(ctx, live); st.Status != StatusRunning {
		t.Fatalf("live claim changed: %+v", st)
	}
	runs, err := s.Runs(ctx, "job", RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if r.Outcome == RunSkippedReplay && r.Worker == "w9" && r.Attempt == 0 {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d skipped-replay runs, want 2: %+v", n, runs)
	}
	res, err = s.SkipForReplay(ctx, ws[:2], "again", "w9")
	if err != nil || len(res.Skipped) != 0 || len(res.Settled) != 2 {
		t.Fatalf("second call: %+v, %v", res, err)
	}
}
