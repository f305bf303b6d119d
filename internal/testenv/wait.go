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
