package dedupe

import (
	"context"
	"strconv"
	"testing"
)

func BenchmarkClaimComplete(b *testing.B) {
	s, _, _ := newStore(b, Config{})
	ctx := context.Background()
	n := 0
	for b.Loop() {
		id := "bench@" + strconv.Itoa(n)
		n++
		c, err := s.Claim(ctx, id, "w")
		if err != nil || c.Outcome != Claimed {
			b.Fatalf("claim: %+v, %v", c, err)
		}
		if err := s.Complete(ctx, id, c.Token); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "windows/s")
}

func BenchmarkClaimCompleteBatch100(b *testing.B) {
	const batch = 100
	s, _, _ := newStore(b, Config{})
	ctx := context.Background()
	ids := make([]string, batch)
	tokens := make([]int64, batch)
	n := 0
	for b.Loop() {
		for j := range ids {
			ids[j] = "bench@" + strconv.Itoa(n)
			n++
		}
		cs, err := s.ClaimBatch(ctx, ids, "w")
		if err != nil {
			b.Fatal(err)
		}
		for j, c := range cs {
			if c.Outcome != Claimed {
				b.Fatalf("claim %s: %+v", ids[j], c)
			}
			tokens[j] = c.Token
		}
		errs, err := s.CompleteBatch(ctx, ids, tokens)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "windows/s")
}
