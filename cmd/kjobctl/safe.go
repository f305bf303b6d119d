package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// safe makes text that comes from a record, a header, Redis or another
// client (window ids, keys, headers, reasons, payloads, member and holder
// names) safe to print on a terminal, in a table cell or a line of its
// own. Control characters (C0 including tab and newline, DEL, C1 such as
// the one-byte CSI), bytes that are not UTF-8, and the bidirectional
// overrides that reorder what is shown are written as Go escapes (\x1b,
// \n, \u009b, \u202e), so a record cannot clear the screen, set the
// window title, move the cursor or break a table's rows. Every place
// kjobctl prints such text goes through safe (or safeLines); JSON output
// is escaped by encoding/json instead.
func safe(s string) string {
	clean := true
	for _, r := range s {
		if escaped(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && escaped(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safeLines is safe for text of several lines (a pretty-printed payload):
// each line is made safe, the newlines between them are kept.
func safeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = safe(l)
	}
	return strings.Join(lines, "\n")
}

// escaped reports whether safe writes r as an escape.
func escaped(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidirectional embeddings, overrides, isolates and marks
	}
	return false
}
