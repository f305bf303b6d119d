package perf

import (
	"testing"
	"time"
)

// TestPercentileIsNearestRank: the figures' percentiles are nearest rank,
// so a p99 of fewer than 100 samples is their maximum, never the second
// largest.
func TestPercentileIsNearestRank(t *testing.T) {
	ds := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i + 1)
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{30, 99, 30}, {30, 50, 15}, {60, 99, 60}, {100, 99, 99}, {100, 50, 50},
		{101, 99, 100}, {10000, 99, 9900}, {1, 99, 1}, {1, 0, 1}, {7, 100, 7},
	} {
		if got := percentile(ds(tc.n), tc.p); got != tc.want {
			t.Errorf("p%v of 1..%d = %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
}
