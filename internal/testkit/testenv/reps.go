package testenv

import (
	"os"
	"strconv"
	"testing"
)

// Reps is how many repetitions a benchmark that repeats a fault inside one
// b.N runs: the whole number in the environment variable env, or def when
// it is unset. A value that is not a whole number of at least 1 fails tb,
// naming the variable.
func Reps(tb testing.TB, env string, def int) int {
	tb.Helper()
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a whole number of at least 1", env, s)
	}
	return n
}
