package testenv

import (
	"strings"
	"sync"
	"testing"
)

// LogBuffer is a log destination for tests: it logs each write to the
// test and keeps what was written, for assertions. It is safe for
// concurrent use.
type LogBuffer struct {
	tb testing.TB
	mu sync.Mutex
	b  strings.Builder
}

// NewLogBuffer returns a LogBuffer logging to tb.
func NewLogBuffer(tb testing.TB) *LogBuffer { return &LogBuffer{tb: tb} }

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.tb.Helper()
	l.tb.Log(strings.TrimRight(string(p), "\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
