package test

import (
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

const holdSchedules = `jobs:
  - name: hold
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 30s
    catchup: 1m
`

// TestWorkerKilledMidHandler SIGKILLs the worker running a window while its
// handler is blocked, and checks that the window runs again on the other
// worker with attempt 2 and a strictly higher fencing token, completes
// once, and that the partition catches up to lag 0.
func TestWorkerKilledMidHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test; skipped with -short")
	}
	c := newCluster(t, holdSchedules, 1)
	release := make(chan struct{})
	c.ledger.mu.Lock()
	c.ledger.hold["hold"] = release
	c.ledger.mu.Unlock()

	c.startProducer(t, "producer-1")
	workers := map[string]*process{}
	for _, name := range []string{"worker-1", "worker-2"} {
		workers[name] = c.startWorker(t, name, "KJOB_CLAIM_TTL=3s")
	}

	var first ledgerEntry
	select {
	case first = <-c.ledger.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("no window reached the ledger within 60s")
	}
	victim := workers[first.Worker]
	if victim == nil {
		t.Fatalf("unknown worker %q", first.Worker)
	}
	killed := time.Now()
	victim.kill(t)
	close(release) // from now on the ledger answers at once
	t.Logf("killed %s while it ran %s (attempt %d, token %d)", first.Worker, first.WindowID, first.Attempt, first.FencingToken)

	var rerun ledgerEntry
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, e := range c.ledger.snapshot() {
			if e.WindowID == first.WindowID && e.Worker != first.Worker {
				rerun = e
				return true
			}
		}
		return false
	}, "window %s never re-ran on another worker", first.WindowID)
	t.Logf("%s re-ran on %s %v after the kill: attempt %d, token %d", rerun.WindowID, rerun.Worker,
		rerun.Received.Sub(killed).Round(time.Millisecond), rerun.Attempt, rerun.FencingToken)
	if rerun.FencingToken <= first.FencingToken || rerun.Attempt != first.Attempt+1 {
		t.Errorf("re-run has token %d attempt %d; want token > %d and attempt %d", rerun.FencingToken, rerun.Attempt, first.FencingToken, first.Attempt+1)
	}

	c.producers[0].stop(t, 15*time.Second)
	c.waitLagZero(t, 60*time.Second)

	// Redis says the window is done, by the re-run's token: one completion.
	store, err := dedupe.New(c.redis.Client(), dedupe.Config{Namespace: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.State(ctxTimeout(t, 5*time.Second), first.WindowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != dedupe.StatusDone || st.Token != rerun.FencingToken {
		t.Errorf("state of %s = %+v; want done by token %d", first.WindowID, st, rerun.FencingToken)
	}
	// Every other window ran exactly once.
	for id, n := range c.ledger.windows("hold") {
		if id != first.WindowID && n != 1 {
			t.Errorf("window %s ran %d times", id, n)
		}
	}
	for name, w := range workers {
		if name != first.Worker {
			w.stop(t, 20*time.Second)
		}
	}
}
