package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 10ms until it returns true, failing the test
// with msg if it has not within timeout. Use it instead of fixed sleeps.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: condition not met within %v: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Recv waits for a value (or the close) of ch and returns it, failing the
// test with what if none comes within timeout. Use it instead of a bare
// <-ch, which only the test binary's -timeout would end.
func Recv[T any](tb testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("testenv: %s: nothing received within %v", what, timeout)
	}
	var zero T
	return zero
}
