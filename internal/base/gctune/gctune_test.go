package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	c := Config{Small: 100, Large: 50, From: 64 << 20}
	for _, tc := range []struct {
		cur  int
		live uint64
		want int
	}{
		{100, 1 << 20, 100},
		{100, 40 << 20, 100}, // between the lines: kept
		{100, 64 << 20, 50},  // at From
		{100, 500 << 20, 50},
		{50, 40 << 20, 50}, // between the lines: kept
		{50, 32 << 20, 50}, // at From/2: kept
		{50, 31 << 20, 100},
		{50, 0, 100},
	} {
		if got := c.Percent(tc.cur, tc.live); got != tc.want {
			t.Errorf("Percent(%d, %d MiB) = %d, want %d", tc.cur, tc.live>>20, got, tc.want)
		}
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// waitGOGC runs collections until GOGC reads want: the tuner runs after
// a collection, on the runtime's cleanup goroutine.
func waitGOGC(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d after 10s of collections, want %d", gogc(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // let the cleanup goroutine run
	}
}

func TestStartFollowsTheLiveHeap(t *testing.T) {
	stop := Start(Config{Small: 100, Large: 50, From: 32 << 20})
	defer func() {
		stop()
		waitStopped(t)
	}()
	waitGOGC(t, 100)

	held := make([]byte, 64<<20) // live: the tuner must see it
	for i := range held {
		held[i] = byte(i)
	}
	waitGOGC(t, 50)
	runtime.KeepAlive(held)
	held = nil

	waitGOGC(t, 100)
}

// waitStopped lets the stopped tuner's last cleanup run, and sets Go's
// default back for the other tests.
func waitStopped(t *testing.T) {
	t.Helper()
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	debug.SetGCPercent(100)
}
