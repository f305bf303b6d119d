package schedule

import (
	"strconv"
	"strings"
)

// ValidationError is one problem in a schedules file, a Spec or a job
// name. Parse and Spec.Job join all problems with errors.Join; use
// errors.As to get at the first, or unwrap the join (interface{ Unwrap()
// []error }) to get at each.
type ValidationError struct {
	// File is the schedules file's path as given to Parse or Load, or the
	// source given to Spec.Job; "" for CheckName.
	File string
	// Line is the 1-based line of the offending node; 0 if unknown.
	Line int
	// Field is the path of the offending field, such as "jobs[1].timezone"
	// in a file or "timezone" in a Spec;
	// "" for a problem with the file as a whole (invalid YAML).
	Field string
	// Value is the offending value as written; "" if there is none to show.
	Value string
	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error formats the problem as "file:line: field: "value": message",
// leaving out the parts that are empty (a name checked alone by CheckName
// has no file: "name: "A": want ...").
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	sep := func() {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
	}
	if e.Field != "" {
		sep()
		b.WriteString(e.Field)
	}
	if e.Value != "" {
		sep()
		b.WriteString(strconv.Quote(e.Value))
	}
	sep()
	b.WriteString(e.Msg)
	return b.String()
}
