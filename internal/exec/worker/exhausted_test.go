package worker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A window whose max_attempts were all used by interrupted attempts (each
// claimed, then released as the worker's revoke path releases it) is
// dead-lettered by the next owner instead of run: an interrupted attempt
// counts. Before, it ran as attempt 4 of max_attempts 3.
func TestInterruptedAttemptsCountTowardsMaxAttempts(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	var calls atomic.Int64
	mux := handler.NewMux()
	mux.HandleFunc("slow", func(context.Context, *handler.Job) error { calls.Add(1); return nil })
	pol := defaultPolicy
	pol.MaxAttempts = 3
	m := window("slow", "slow", 0, pol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 1; i <= pol.MaxAttempts; i++ {
		c, err := e.store.Claim(ctx, m.ID, "gone")
		if err != nil || c.Attempt != i {
			t.Fatalf("claim %d: %+v, %v", i, c, err)
		}
		if err := e.store.Release(ctx, m.ID, c.Token, "interrupted: partition revoked or lost: context canceled"); err != nil {
			t.Fatal(err)
		}
	}
	e.publish(m)
	x := &execs{}
	_, stop := start(t, e.config("w1", mux, x))
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDeadLettered) == 1 }, "the window is not dead-lettered")
	stop()
	if n := calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times after max_attempts were used up", n)
	}
	ex := x.of(m.ID)[0]
	if !errors.Is(ex.Err, ErrAttemptsExhausted) || !strings.Contains(ex.Err.Error(), "max_attempts (3) used up: this would be attempt 4") {
		t.Errorf("dead-lettered with %v", ex.Err)
	}
	dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dlq))
	}
	if got, _ := header(dlq[0], HeaderDLQAttempts); got != "3" {
		t.Errorf("dead letter's attempts %q, want 3", got)
	}
}
