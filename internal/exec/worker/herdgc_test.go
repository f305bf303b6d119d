package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// collections returns a herdGC whose collections are sent on the
// returned channel instead of run.
func collections(threshold int, ahead time.Duration) (*herdGC, chan time.Time) {
	c := make(chan time.Time, 16)
	h := newHerdGC(threshold)
	h.ahead = ahead
	h.gc = func() { c <- time.Now() }
	return h, c
}

func TestHerdGCCollectsAheadOfAHerd(t *testing.T) {
	h, c := collections(3, 100*time.Millisecond)
	at := time.Now().Add(300 * time.Millisecond)
	for range 3 {
		h.expect(at)
	}
	select {
	case got := <-c:
		if got.Before(at.Add(-100*time.Millisecond)) || !got.Before(at) {
			t.Fatalf("collected at %v, want from %v (100ms ahead of the herd) to before %v", got, at.Add(-100*time.Millisecond), at)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no collection ahead of 3 windows held for one instant (threshold 3)")
	}
	// One per herd, however many more windows come for it.
	h.expect(at)
	select {
	case <-c:
		t.Fatal("a second collection for the same herd")
	case <-time.After(300 * time.Millisecond):
	}
	h.stop()
}

func TestHerdGCLeavesSmallerStartsAlone(t *testing.T) {
	h, c := collections(3, 50*time.Millisecond)
	now := time.Now()
	a, b := now.Add(150*time.Millisecond), now.Add(150*time.Millisecond+time.Second)
	h.expect(a)
	h.expect(a)
	h.expect(b) // a different instant: its own count
	// Already within ahead of its start: too late to collect before it.
	late := now.Add(10 * time.Millisecond)
	for range 5 {
		h.expect(late)
	}
	select {
	case <-c:
		t.Fatal("collected for fewer windows than the threshold, or too late for the start")
	case <-time.After(400 * time.Millisecond):
	}
}

func TestHerdGCAtMostOneCollectionPerGap(t *testing.T) {
	h, c := collections(1, 50*time.Millisecond)
	now := time.Now()
	h.expect(now.Add(100 * time.Millisecond))
	h.expect(now.Add(150 * time.Millisecond)) // within minGap (1s) of the first
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("no collection ahead of the first herd")
	}
	select {
	case <-c:
		t.Fatal("two collections within herdGCMinGap")
	case <-time.After(300 * time.Millisecond):
	}
}

// A worker holding more windows for one start than it has slots collects
// its garbage once, ahead of that start, and then runs them all; as many
// windows as slots start in one wave and need no collection.
func TestWorkerCollectsBeforeAHerd(t *testing.T) {
	for _, tc := range []struct {
		windows int
		want    int
	}{{3, 1}, {2, 0}} {
		e := newEnv(t, 1, 5*time.Second)
		st := &startTimes{at: map[string]time.Time{}}
		x := &execs{}
		cfg := e.config("w0", st.handler(), x)
		cfg.Now = nil
		cfg.Concurrency = 2
		gcs := make(chan time.Time, 4)
		w, stop := start(t, cfg, func(w *Worker) { w.herd.gc = func() { gcs <- time.Now() } })
		testenv.Eventually(t, 30*time.Second, func() bool { return len(w.Assigned()) == 1 }, "partition not assigned")

		due := time.Now().Add(time.Second)
		var ms []*jobmsg.Message
		for i := range tc.windows {
			ms = append(ms, aheadWindow(fmt.Sprintf("job-%d", i), "mark", due, time.Second, jobmsg.OverlapQueue))
		}
		e.publish(ms...)
		testenv.Eventually(t, 10*time.Second, func() bool { return x.count(OutcomeDone) == tc.windows },
			"%d windows done (have %v)", tc.windows, x.all())
		stop()
		var got []time.Time // Run returned: no collection is under way or to come
		for len(gcs) > 0 {
			got = append(got, <-gcs)
		}
		if len(got) != tc.want {
			t.Fatalf("%d windows due at once, 2 slots: %d collections, want %d", tc.windows, len(got), tc.want)
		}
		for _, at := range got {
			if !at.Before(due) {
				t.Errorf("collected %v after the herd's start", at.Sub(due))
			}
		}
	}
}

// Stopped (the worker's Run returning), it collects no more.
func TestHerdGCStopCancelsCollections(t *testing.T) {
	h, c := collections(1, 50*time.Millisecond)
	h.expect(time.Now().Add(200 * time.Millisecond))
	h.stop()
	h.expect(time.Now().Add(200 * time.Millisecond)) // after stop: not set
	select {
	case <-c:
		t.Fatal("a collection after stop")
	case <-time.After(400 * time.Millisecond):
	}
}
