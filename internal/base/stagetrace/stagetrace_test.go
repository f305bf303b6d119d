package stagetrace_test

import (
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/stagetrace"
)

func TestTrace(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// Off: stamps go nowhere.
	stagetrace.Stamp(stagetrace.Decoded, t0, t0.Add(time.Millisecond))
	if stagetrace.On() {
		t.Fatal("On() with no trace started")
	}
	tr := stagetrace.Start(t0, t0.Add(time.Second))
	if !stagetrace.On() {
		t.Fatal("On() = false after Start")
	}
	for i := 1; i <= 100; i++ {
		stagetrace.Stamp(stagetrace.Started, t0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	stagetrace.Stamp(stagetrace.Started, t0.Add(-time.Nanosecond), t0.Add(time.Hour)) // before the range
	stagetrace.Stamp(stagetrace.Started, t0.Add(time.Second), t0.Add(time.Hour))      // after it
	rec := new(int)
	stagetrace.Fetch(rec, t0.Add(3*time.Millisecond))
	stagetrace.StampFetched(rec, t0)
	stagetrace.StampFetched(rec, t0) // the note is gone
	tr.Stop()
	stagetrace.Stamp(stagetrace.Started, t0, t0.Add(time.Hour)) // off again
	if stagetrace.On() {
		t.Fatal("On() after Stop")
	}
	ss := tr.Stages()
	if len(ss) != int(stagetrace.Started)+1 {
		t.Fatalf("%d stages, want %d", len(ss), stagetrace.Started+1)
	}
	if s := ss[stagetrace.Started]; s.N != 100 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("started = %+v, want 100 windows, p50 50ms, p99 99ms, max 100ms", s)
	}
	if s := ss[stagetrace.Fetched]; s.N != 1 || s.Max != 3*time.Millisecond {
		t.Errorf("fetched = %+v, want one window at 3ms", s)
	}
	if s := ss[stagetrace.Decoded]; s.N != 0 {
		t.Errorf("decoded = %+v, want none (stamped while off)", s)
	}
	t.Log("\n" + ss[stagetrace.Started].String())
}

func TestPercentileNearestRank(t *testing.T) {
	ds := make([]time.Duration, 30)
	for i := range ds {
		ds[i] = time.Duration(i + 1)
	}
	if got := stagetrace.Percentile(ds, 99); got != 30 {
		t.Errorf("p99 of 30 = %v, want the maximum 30", got)
	}
	if got := stagetrace.Percentile(ds, 50); got != 15 {
		t.Errorf("p50 of 30 = %v, want 15", got)
	}
}

// A stamp with no trace on must cost next to nothing: it is on the
// worker's path of every window.
func BenchmarkStampOff(b *testing.B) {
	t0 := time.Now()
	for b.Loop() {
		stagetrace.Stamp(stagetrace.Decoded, t0, t0)
	}
}
