// Package configerr is the error kjob's libraries return for a setting
// they cannot accept: which field, the value given, what is wrong and how
// to fix it. A caller branches on it with errors.As, and a program that
// feeds the fields from its own flags or files names those in its message:
// kjob's binaries print the flag and environment variable a field came
// from (for example "--claim-ttl/KJOB_CLAIM_TTL=50ms: dedupe:
// Config.ClaimTTL = 50ms is below the minimum 100ms; ..."), so no library
// message names a flag of theirs.
package configerr

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error is a configuration value a library rejected.
type Error struct {
	// Op names what rejected it: the package ("dedupe"), or the package
	// and its function ("lease: NewRedisLock").
	Op string
	// Field is the setting as the library's API names it:
	// "Config.ClaimTTL", "AgentConfig.Group", "ReplaySpec.Partitions".
	Field string
	// Value is the value given; nil when the field is unset (empty, nil),
	// and then the message shows none.
	Value any
	// Reason says what is wrong and how to fix it: "is negative; set a
	// positive duration, or 0 for the default 10s". It follows the field
	// (and value) after a space, or directly when it starts with
	// punctuation (": no such partition"). It may name the fields listed
	// in Related, which Message renames too.
	Reason string
	// Related lists the other fields the reason involves, e.g.
	// "Config.TTL" for a renew interval that must stay below TTL/2.
	Related []string
	// Err, if set, is what the error also matches with errors.Is, such as
	// a package's sentinel for the condition (ErrInvalidSpec). It is not
	// printed: Reason says it in words.
	Err error
}

// Error returns "<Op>: <Field>[ = <Value>] <Reason>".
func (e *Error) Error() string { return e.Message(nil) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// ConfigFields returns Field, then Related.
func (e *Error) ConfigFields() []string { return append([]string{e.Field}, e.Related...) }

// Message returns the error's text with the fields named as the caller
// knows them: name maps a field (Field, or one in Related) to the caller's
// name of it, for example a flag ("--partition"), and reports false for a
// field it does not rename. A renamed Field is followed by its value the
// way a command line writes it ("--partition 9: no such partition"); a
// field name keeps its library form ("ReplaySpec.Partitions = 9: no such
// partition"). A nil name renames nothing: that is Error.
func (e *Error) Message(name func(field string) (string, bool)) string {
	rename := func(f string) (string, bool) {
		if name == nil {
			return f, false
		}
		if n, ok := name(f); ok {
			return n, true
		}
		return f, false
	}
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	label, renamed := rename(e.Field)
	b.WriteString(label)
	if e.Value != nil {
		if renamed {
			fmt.Fprintf(&b, " %v", e.Value)
		} else {
			b.WriteString(" = ")
			b.WriteString(formatValue(e.Value))
		}
	}
	reason := e.Reason
	for _, f := range e.Related {
		if n, ok := rename(f); ok {
			reason = strings.ReplaceAll(reason, f, n)
		}
	}
	if reason != "" {
		if !strings.ContainsAny(reason[:1], ":;,.") {
			b.WriteByte(' ')
		}
		b.WriteString(reason)
	}
	return b.String()
}

// formatValue writes strings quoted (an empty or odd value stays
// visible) and anything else as fmt's %v does.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}

// Fielder is implemented by errors about configuration fields: *Error,
// and errors of another shape such as topic.MismatchError (an existing
// topic whose settings differ from the configured ones).
type Fielder interface {
	error
	// ConfigFields returns the fields the error is about, the main one
	// first.
	ConfigFields() []string
}

// Fields returns the configuration fields err is about: those of every
// Fielder in err's tree (errors.Unwrap, errors.Join), in order, each once.
func Fields(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if f, ok := err.(Fielder); ok {
			for _, x := range f.ConfigFields() {
				if !slices.Contains(out, x) {
					out = append(out, x)
				}
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// As returns the first *Error in err's tree, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
