package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A 5 MB handler error is cut, with a note of how much, in the log lines,
// the dead letter's reason and the run history; a panic is logged with
// its stack, bounded. Before, the error became a 5 MB log line and the
// panic's stack was logged nowhere.
func TestHugeErrorsAndPanicsAreBoundedInLogs(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	huge := strings.Repeat("e", 5<<20)
	mux := handler.NewMux()
	mux.HandleFunc("huge", func(context.Context, *handler.Job) error { return errors.New(huge) })
	mux.HandleFunc("boom", func(context.Context, *handler.Job) error { panicInHandler(); return nil })
	pol := defaultPolicy
	pol.MaxAttempts = 2
	hw, bw := window("huge", "huge", 0, pol), window("boom", "boom", 0, pol)
	e.publish(hw, bw)

	var logs lockedBuffer
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, stop := start(t, cfg)
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDeadLettered) == 2 }, "both windows dead-lettered")
	stop()

	const maxLine = handler.MaxErrorBytes + handler.MaxStackBytes + 4<<10
	note := " of 5242880 bytes left out]"
	var retried, lettered, stack bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > maxLine {
			t.Errorf("a log line of %d bytes (bound %d): %.300s...", len(line), maxLine, line)
		}
		retried = retried || strings.Contains(line, "attempt failed; retrying") && strings.Contains(line, note)
		lettered = lettered || strings.Contains(line, "dead-lettering window") && strings.Contains(line, note)
		stack = stack || strings.Contains(line, "handler panicked: kaboom") && strings.Contains(line, "stack=") && strings.Contains(line, "panicInHandler")
	}
	if !retried || !lettered || !stack {
		t.Errorf("log lines: cut retry %v, cut dead-lettering %v, panic with stack %v; want all", retried, lettered, stack)
	}
	dlq := testenv.ReadCommitted(t, e.brokers, testDLQ)
	for _, d := range dlq {
		if reason, _ := header(d, HeaderDLQReason); string(d.Key) == "huge" && (!strings.Contains(reason, note) || len(reason) > 4<<10) {
			t.Errorf("dead letter's reason: %d bytes, %.200q...; want it cut with the note", len(reason), reason)
		}
	}
	runs, err := e.store.Runs(context.Background(), "huge", dedupe.RunQuery{})
	if err != nil || len(runs) == 0 {
		t.Fatalf("history of huge: %v, %v", runs, err)
	}
	for _, r := range runs {
		if len(r.Error) > dedupe.MaxRunErrorBytes || !strings.Contains(r.Error, note) {
			t.Errorf("history run error: %d bytes, %q; want at most %d with the note", len(r.Error), r.Error, dedupe.MaxRunErrorBytes)
		}
	}
}

//go:noinline
func panicInHandler() { panic("kaboom") }

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 100), 50, strings.Repeat("a", 13) + " [... cut: 87 of 100 bytes left out]"},
		{strings.Repeat("é", 50), 50, strings.Repeat("é", 6) + " [... cut: 88 of 100 bytes left out]"},
		// Cut again: counted from the original size.
		{strings.Repeat("a", 60) + " [... cut: 940 of 1000 bytes left out]", 50, strings.Repeat("a", 11) + " [... cut: 989 of 1000 bytes left out]"},
		{strings.Repeat("a", 100), 10, strings.Repeat("a", 10)},
	} {
		if got := handler.Cut(tc.s, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Cut(%d bytes, %d) = %q, want %q", len(tc.s), tc.n, got, tc.want)
		}
	}
}
