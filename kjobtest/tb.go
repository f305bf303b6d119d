package kjobtest

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// TB is what a Pipeline needs from a test: *testing.T, *testing.B and
// *testing.F implement it. Code that has no test at hand (a TestMain
// sharing one pipeline between tests, a runnable Example, a program) uses
// a *Standalone.
//
// Helper, Logf, Errorf, Fatalf and Cleanup have testing.TB's meaning.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(f func())
}

// Standalone is a TB for code outside a test: Logf and Errorf write a line
// to standard error, Fatalf writes it and panics, and the functions given
// to Cleanup run, last added first, when Close is called. Always defer
// Close right after NewStandalone: it also runs when Fatalf panics, so no
// server or goroutine outlives the caller.
//
//	tb := kjobtest.NewStandalone()
//	defer tb.Close()
//	p := kjobtest.StartPipeline(tb, mux, kjobtest.PipelineOptions{})
//
// It is safe for concurrent use.
type Standalone struct {
	mu       sync.Mutex
	out      io.Writer
	cleanups []func()
	failed   bool
	closed   bool
}

// NewStandalone returns a Standalone writing to standard error.
func NewStandalone() *Standalone { return &Standalone{out: os.Stderr} }

// Helper does nothing: there is no test to attribute lines to.
func (s *Standalone) Helper() {}

// Logf writes the message and a newline to standard error.
func (s *Standalone) Logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.print(format, args...)
}

// Errorf is Logf that also marks s failed.
func (s *Standalone) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.print(format, args...)
}

// Fatalf is Errorf followed by a panic with the message.
func (s *Standalone) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.Errorf("%s", msg)
	panic(msg)
}

// Failed reports whether Errorf or Fatalf was called.
func (s *Standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Cleanup registers f to run at Close. After Close, f runs at once.
func (s *Standalone) Cleanup(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f()
		return
	}
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

// Close runs the registered cleanups, the last registered first. A
// cleanup may register more; they run too. Calling Close again does
// nothing.
func (s *Standalone) Close() {
	for {
		s.mu.Lock()
		s.closed = true
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}

func (s *Standalone) print(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	_, _ = io.WriteString(s.out, msg)
}
