package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A worker of namespace b pointed at a topic that holds a window of
// namespace a (issue 21) dead-letters it with a reason naming both
// namespaces, never claims it in the store and never runs it; its own
// windows run, and a window without a namespace (published before records
// carried one) runs too.
func TestWindowOfAnotherNamespaceIsDeadLettered(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	var mu sync.Mutex
	ran := map[string]int{}
	mux := handler.NewMux()
	mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
		mu.Lock()
		ran[j.Name()]++
		mu.Unlock()
		return nil
	})
	foreign := window("foreign", "h", 0, defaultPolicy)
	foreign.Namespace = "a"
	own := window("own", "h", 0, defaultPolicy)
	own.Namespace = "b"
	old := window("old", "h", 0, defaultPolicy) // no namespace
	e.publish(foreign, own, old)

	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Namespace = "b"
	_, stop := start(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(x.of(foreign.ID)) == 1 && len(x.of(own.ID)) == 1 && len(x.of(old.ID)) == 1
	}, "every window settled")
	testenv.Eventually(t, 10*time.Second, func() bool { return e.committed()[0] == 3 }, "all three records committed")
	stop()

	mu.Lock()
	defer mu.Unlock()
	if ran["foreign"] != 0 || ran["own"] != 1 || ran["old"] != 1 {
		t.Errorf("handler runs %v, want own and old once, foreign never", ran)
	}
	ex := x.of(foreign.ID)[0]
	if ex.Outcome != OutcomeDeadLettered || !errors.Is(ex.Err, ErrForeignNamespace) || ex.Job != "foreign" || ex.Attempt != 0 {
		t.Errorf("foreign window's execution %+v, want dead-lettered with ErrForeignNamespace, no attempt", ex)
	}
	for _, id := range []string{own.ID, old.ID} {
		if got := x.of(id)[0].Outcome; got != OutcomeDone {
			t.Errorf("%s: outcome %s, want done", id, got)
		}
	}
	dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
	if len(dlq) != 1 {
		t.Fatalf("dead-letter topic has %d records, want 1", len(dlq))
	}
	reason, _ := header(dlq[0], HeaderDLQReason)
	for _, want := range []string{foreign.ID, `namespace "a"`, `namespace is "b"`} {
		if !strings.Contains(reason, want) {
			t.Errorf("dead letter's reason %q does not name %s", reason, want)
		}
	}
	// Never claimed: the store holds no key of the foreign job.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := e.redis.Client().Keys(ctx, "*foreign*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("store keys of the foreign job: %v, %v; want none", keys, err)
	}
	if keys, _ := e.redis.Client().Keys(ctx, "*own*").Result(); len(keys) == 0 {
		t.Errorf("store holds no key of the worker's own job: the check above proves nothing")
	}
}
