package main

import (
	"strconv"
	"strings"
	"unicode"
)

// safe makes record-derived text (window ids, worker ids, error texts)
// safe to print on a terminal: control characters and the bidirectional
// overrides are written as Go escapes, so a record cannot clear the
// screen, set the window title or break a table's rows.
//
// A minimal stand-in for the shared helper (safe.go) that the hardening
// branch adds to kjobctl; when both are merged, delete this file.
func safe(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == unicode.ReplacementChar || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
