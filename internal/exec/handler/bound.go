package handler

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
)

// Bounds of what kjob logs and stores of a handler's failure: a handler
// may return an error of megabytes (a response body, a dump), which would
// otherwise become one log line, one dead-letter header and one history
// entry of that size.
const (
	// MaxErrorBytes bounds an error's text as Recover returns it (Bound).
	MaxErrorBytes = 2 << 10
	// MaxStackBytes bounds a panic's stack as logged (ErrorAttrs).
	MaxStackBytes = 16 << 10
)

// Cut returns s if it has at most n bytes; otherwise its start, cut at a
// UTF-8 boundary, and a note of how much was left out, n bytes in all
// (for an n too small for the note: the start alone). A text that Cut
// made is cut again from its start, its note counting from the original
// size.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const format = " [... cut: %d of %d bytes left out]"
	// A text cut before keeps counting from its original size.
	total := len(s)
	if i := strings.LastIndex(s, " [... cut: "); i >= 0 && strings.HasSuffix(s, " bytes left out]") {
		var out, of int
		if _, err := fmt.Sscanf(s[i:], format, &out, &of); err == nil && of > len(s) {
			s, total = s[:i], of
		}
	}
	// The note is at most as long as with total for both counts.
	keep := n - len(fmt.Sprintf(format, total, total))
	withNote := keep > 0
	if !withNote {
		keep = max(n, 0)
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	if !withNote {
		return s[:keep]
	}
	return s[:keep] + fmt.Sprintf(format, total-keep, total)
}

// boundedError is an error whose text is cut; errors.Is and errors.As see
// the original.
type boundedError struct {
	err  error
	text string
}

func (e *boundedError) Error() string { return e.text }
func (e *boundedError) Unwrap() error { return e.err }

// Bound returns err with its text cut to MaxErrorBytes (Cut), saying how
// much was cut; errors.Is and errors.As still see err and what it wraps.
// A nil or short error is returned as it is.
func Bound(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	if len(s) <= MaxErrorBytes {
		return err
	}
	return &boundedError{err: err, text: Cut(s, MaxErrorBytes)}
}

// ErrorAttrs are the log attributes of a failed attempt's error: "err",
// its text bounded by Bound, and for a panic "stack", the panicking
// goroutine's stack cut to MaxStackBytes.
func ErrorAttrs(err error) []any {
	attrs := []any{slog.String("err", Bound(err).Error())}
	if pe := (*PanicError)(nil); errors.As(err, &pe) && len(pe.Stack) > 0 {
		attrs = append(attrs, slog.String("stack", Cut(string(pe.Stack), MaxStackBytes)))
	}
	return attrs
}
