package dedupe

import (
	"context"
	"errors"
	"testing"
)

// An epoch's floor lifts every job's counter, for single claims, batches
// across jobs and claims chained to completions; an unproven store claims
// nothing, and a completion's Next is left unclaimed.
func TestEpochFloor(t *testing.T) {
	s, _, _ := newStore(t, Config{Namespace: "ns"})
	ctx := context.Background()
	c, err := s.Claim(ctx, "a@1", "w")
	if err != nil || c.Token != 1 {
		t.Fatalf("claim without an epoch: %+v %v, want token 1", c, err)
	}
	if _, err := s.Mark(ctx, 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEpoch(2); err != nil {
		t.Fatal(err)
	}
	floor := EpochFloor(2)
	c, err = s.Claim(ctx, "a@2", "w")
	if err != nil || c.Token != floor+1 {
		t.Fatalf("claim in epoch 2: %+v %v, want token %d", c, err, floor+1)
	}
	cs, err := s.ClaimBatch(ctx, []string{"b@1", "b@2", "a@3"}, "w")
	if err != nil || cs[0].Token != floor+1 || cs[1].Token != floor+2 || cs[2].Token != floor+2 {
		t.Fatalf("batch in epoch 2: %+v %v", cs, err)
	}
	res, err := s.Settle(ctx, []Settlement{{ID: "b@1", Op: OpComplete, Token: cs[0].Token, Next: "b@3", Owner: "w"}})
	if err != nil || res[0].Err != nil || res[0].Next.Token != floor+3 {
		t.Fatalf("chained claim in epoch 2: %+v %v", res, err)
	}

	s.Unprove()
	if _, err := s.Claim(ctx, "c@1", "w"); !errors.Is(err, ErrStoreUnproven) {
		t.Fatalf("claim while unproven: %v, want ErrStoreUnproven", err)
	}
	if _, err := s.ClaimBatch(ctx, []string{"c@1", "d@1"}, "w"); !errors.Is(err, ErrStoreUnproven) {
		t.Fatalf("batch while unproven: %v, want ErrStoreUnproven", err)
	}
	res, err = s.Settle(ctx, []Settlement{{ID: "b@2", Op: OpComplete, Token: cs[1].Token, Next: "b@4", Owner: "w"}})
	if err != nil || res[0].Err != nil || res[0].Next.WindowID != "" {
		t.Fatalf("chained claim while unproven: %+v %v, want the completion and no claim", res, err)
	}
	if e, ok := s.Epoch(); ok || e != 2 {
		t.Fatalf("Epoch() = %d, %v; want 2, false", e, ok)
	}
	if err := s.SetEpoch(MaxEpoch + 1); err == nil {
		t.Fatal("SetEpoch above MaxEpoch accepted")
	}
}

// On a single server every claim checks the marker in the same script: a
// marker that no longer holds the proven epoch (a wipe between two checks
// of the guard) refuses the claim and unproves the store.
func TestEpochMarkerCheckedInScript(t *testing.T) {
	s, r, rdb := newStore(t, Config{Namespace: "ns"})
	ctx := context.Background()
	if !s.crossJob(ctx) {
		t.Skipf("%s does not answer HELLO as a standalone server: scripts may not read the marker there", r)
	}
	if _, err := s.Mark(ctx, 1, "test", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEpoch(1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "a@1", "w"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "a@2", "w"); !errors.Is(err, ErrStoreUnproven) {
		t.Fatalf("claim after the marker vanished: %v, want ErrStoreUnproven", err)
	}
	if _, ok := s.Epoch(); ok {
		t.Fatal("the store still claims after a refusal")
	}
	if v, err := rdb.Exists(ctx, "kjob:{ns:a}:token").Result(); err != nil || v != 0 {
		t.Fatalf("the refused claim wrote the counter: %d %v", v, err)
	}
}
