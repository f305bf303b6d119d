package backoff

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestExponentialWithoutJitter(t *testing.T) {
	for _, c := range []struct {
		base, ceil time.Duration
		want       []time.Duration // for n = 1, 2, ...
	}{
		{50 * ms, 2 * time.Second, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{100 * ms, 5 * time.Second, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second}},
		{100 * ms, 30 * time.Second, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second}},
		{time.Second, time.Second, []time.Duration{time.Second, time.Second}},
		{time.Second, 300 * ms, []time.Duration{300 * ms, 300 * ms}}, // a cap below the base wins
		{0, time.Second, []time.Duration{0, 0}},
		{time.Second, 0, []time.Duration{0, 0}},
		{-time.Second, time.Second, []time.Duration{0}},
	} {
		var got []time.Duration
		for n := 1; n <= len(c.want); n++ {
			got = append(got, Exponential(c.base, c.ceil, n, None))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Exponential(%v, %v, 1..%d) = %v, want %v", c.base, c.ceil, len(c.want), got, c.want)
		}
	}
	if got := Exponential(50*ms, time.Second, 0, None); got != 50*ms {
		t.Errorf("Exponential(n=0) = %v, want the base", got)
	}
	if got := Exponential(time.Nanosecond, math.MaxInt64, 1000, None); got != math.MaxInt64 {
		t.Errorf("Exponential near the largest Duration = %v, want the cap (no overflow)", got)
	}
	if got := Exponential(3, math.MaxInt64-1, 200, None); got != math.MaxInt64-1 {
		t.Errorf("Exponential with an odd cap = %v, want the cap", got)
	}
}

// Equal jitter keeps every delay within [d/2, d] of the exact one, and
// spreads them over that range.
func TestExponentialEqualJitter(t *testing.T) {
	for n := 1; n <= 8; n++ {
		exact := Exponential(100*ms, 3*time.Second, n, None)
		lo, hi := exact, time.Duration(0)
		for range 2000 {
			d := Exponential(100*ms, 3*time.Second, n, Equal)
			if d < exact/2 || d > exact {
				t.Fatalf("n=%d: delay %v outside [%v, %v]", n, d, exact/2, exact)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if hi-lo < exact/4 {
			t.Errorf("n=%d: 2000 jittered delays span only [%v, %v] of [%v, %v]", n, lo, hi, exact/2, exact)
		}
	}
	if got := Exponential(time.Nanosecond, time.Nanosecond, 3, Equal); got != 0 && got != time.Nanosecond {
		t.Errorf("Equal jitter of 1ns = %v", got)
	}
}

func TestBackoffNextAndReset(t *testing.T) {
	b := Backoff{Min: 100 * ms, Max: 500 * ms}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	if want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms}; !slices.Equal(got, want) {
		t.Errorf("Next() x5 = %v, want %v", got, want)
	}
	b.Reset()
	if d := b.Next(); d != 100*ms {
		t.Errorf("Next() after Reset = %v, want Min", d)
	}
}

func TestBackoffSleep(t *testing.T) {
	b := Backoff{Min: time.Nanosecond, Max: time.Nanosecond}
	if err := b.Sleep(context.Background()); err != nil {
		t.Errorf("Sleep = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := Backoff{Min: time.Hour, Max: time.Hour}
	if err := long.Sleep(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with a cancelled context = %v, want context.Canceled", err)
	}
}
