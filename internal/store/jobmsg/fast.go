package jobmsg

import (
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// The fast decoder: a hand-written scanner for the version-1 value as the
// producer writes it. It fills a wire exactly as json.Unmarshal would, and
// it gives up (returns false) on anything it does not handle exactly the
// same way: escapes in a field it reads, a key that only case-insensitively
// matches a field, a repeated field, null, a number or type that is not the
// field's, invalid UTF-8 in a string it reads, and any syntax error. The
// caller then decodes with encoding/json, whose errors (and the careful
// explain path) stay the only source of error messages. The differential
// fuzz test FuzzFastMatchesReference holds it to that.

// Kept (issue 24, docs/performance.md "Fast paths (issue 24)"), measured
// on 2026-11-28 on the shared 2-vCPU machine, embedded broker (kfake),
// load average 5-11, alternated 3 rounds with encoding/json alone:
// BenchmarkFromRecord 2.6-6.8 µs, 7 allocs against 11.8-12.3 µs, 26
// allocs; the no-op burst (1 partition, 100k windows, to lag 0) 9.4k /
// 33.5k / 16.9k windows/s against 29.6k / 30.7k / 18.3k without it, worker
// CPU 27.2-36.1 against 31.4-40.8 µs per window. The row misses its
// target (>= 70k/s) without it, so it stays. Re-measured on a quiet
// machine (load 0.1-2.4, the benchmark's own), 2026-11-28 17:22, 3 rounds
// alternated: 38.0k / 26.9k / 33.7k windows/s with it, 25.7k / 24.5k /
// 25.6k without; worker CPU 19.9-27.2 against 33.6-36.1 µs per window.

// maxFastDepth bounds the nesting the fast decoder skips; deeper values go
// to encoding/json (which has its own, larger, limit).
const maxFastDepth = 64

// Fields of wire the fast decoder fills, as bits to catch repeats.
const (
	fV = 1 << iota
	fID
	fJob
	fHandler
	fWindow
	fScheduledAt
	fPublishedAt
	fTrigger
	fPayload
	fPolicy
	fStart
	fEnd
	fTimeout
	fMaxAttempts
	fBackoff
	fMaxBackoff
	fOverlap
	fNamespace
	fMaxConcurrent
	fScheduleVersion
)

// Field names of each object the fast decoder reads, for the
// case-insensitive match it leaves to encoding/json.
var (
	topFields    = []string{"v", "namespace", "id", "job", "handler", "window", "scheduled_at", "published_at", "trigger", "payload", "policy", "schedule_version"}
	windowFields = []string{"start", "end"}
	policyFields = []string{"timeout", "max_attempts", "backoff", "max_backoff", "overlap", "max_concurrent"}
)

type scanner struct {
	b   []byte
	src string // b as one string: what str returns substrings of
	i   int
}

// decodeFast decodes value into w (which must be zero) and reports
// whether it did so exactly as json.Unmarshal(value, w) would, without an
// error. On false w holds partial results and must be reset.
func (w *wire) decodeFast(value []byte, alias bool) bool {
	// The message's strings are substrings of one copy of the value (one
	// allocation instead of one per field), or of the value itself.
	s := scanner{b: value}
	if alias && len(value) > 0 {
		s.src = unsafe.String(unsafe.SliceData(value), len(value))
	} else {
		s.src = string(value)
	}
	s.ws()
	// Each object's seen fields are a variable its field function
	// closes over, not a parameter of it: an argument of a function
	// value escapes, and cost an allocation per object per window (the
	// no-op burst row, test/perf BenchmarkBurst).
	seen := new(int)
	if !s.object(func(key []byte) bool {
		switch string(key) {
		case "v":
			return s.once(seen, fV) && s.int(&w.V)
		case "namespace":
			return s.once(seen, fNamespace) && s.str(&w.Namespace)
		case "id":
			return s.once(seen, fID) && s.str(&w.ID)
		case "job":
			return s.once(seen, fJob) && s.str(&w.Job)
		case "handler":
			return s.once(seen, fHandler) && s.str(&w.Handler)
		case "trigger":
			var t string
			ok := s.once(seen, fTrigger) && s.str(&t)
			w.Trigger = Trigger(t)
			return ok
		case "scheduled_at":
			return s.once(seen, fScheduledAt) && s.str(&w.ScheduledAt)
		case "published_at":
			return s.once(seen, fPublishedAt) && s.str(&w.PublishedAt)
		case "schedule_version":
			var v int
			ok := s.once(seen, fScheduleVersion) && s.int(&v)
			w.ScheduleVersion = int64(v)
			return ok
		case "payload":
			if !s.once(seen, fPayload) || s.peek() == 'n' { // null: RawMessage("null")
				return false
			}
			start := s.i
			if !s.skip(0) {
				return false
			}
			w.Payload = append([]byte(nil), s.b[start:s.i]...)
			return true
		case "window":
			if !s.once(seen, fWindow) {
				return false
			}
			seen := new(int)
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "start":
					return s.once(seen, fStart) && s.str(&w.Window.Start)
				case "end":
					return s.once(seen, fEnd) && s.str(&w.Window.End)
				}
				return s.unknown(key, windowFields)
			})
		case "policy":
			p := &w.Policy
			if !s.once(seen, fPolicy) {
				return false
			}
			seen := new(int)
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "timeout":
					return s.once(seen, fTimeout) && s.duration(&p.Timeout)
				case "max_attempts":
					return s.once(seen, fMaxAttempts) && s.int(&p.MaxAttempts)
				case "backoff":
					return s.once(seen, fBackoff) && s.duration(&p.Backoff)
				case "max_backoff":
					return s.once(seen, fMaxBackoff) && s.duration(&p.MaxBackoff)
				case "overlap":
					return s.once(seen, fOverlap) && s.overlap(&p.Overlap)
				case "max_concurrent":
					return s.once(seen, fMaxConcurrent) && s.int(&p.MaxConcurrent)
				}
				return s.unknown(key, policyFields)
			})
		}
		return s.unknown(key, topFields)
	}) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// once marks bit in seen and reports whether it was not set before.
func (s *scanner) once(seen *int, bit int) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// object reads an object, calling field with each key (the scanner then
// stands at the key's value, past the colon and white space). field reads
// the value and reports success.
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.plain()
		if !ok {
			return false
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !field(key) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// unknown skips the value of a key that is not one of fields. A key that
// matches one case-insensitively (encoding/json would decode it into that
// field) or is not plain ASCII is left to encoding/json.
func (s *scanner) unknown(key []byte, fields []string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, f := range fields {
		if len(f) == len(key) && equalFoldASCII(f, key) {
			return false
		}
	}
	return s.skip(0)
}

func equalFoldASCII(f string, key []byte) bool {
	for i := range len(f) {
		a, b := f[i], key[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// plain reads a string without escapes, as valid UTF-8 without control
// characters, and returns its contents (a slice of the input).
func (s *scanner) plain() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) && !special[s.b[s.i]] {
		s.i++
	}
	ascii := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	return nil, false
}

// special marks the bytes plain must look at: the closing quote, escapes,
// control characters and non-ASCII.
var special = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

func (s *scanner) str(dst *string) bool {
	v, ok := s.plain()
	if ok {
		*dst = s.substr(v)
	}
	return ok
}

// substr returns v, the string plain just read, as a substring of src.
func (s *scanner) substr(v []byte) string {
	end := s.i - 1 // the closing quote
	return s.src[end-len(v) : end]
}

// overlap reads an Overlap string; the five known values cost no
// allocation.
func (s *scanner) overlap(dst *Overlap) bool {
	v, ok := s.plain()
	if !ok {
		return false
	}
	switch string(v) {
	case string(OverlapQueue):
		*dst = OverlapQueue
	case string(OverlapSkip):
		*dst = OverlapSkip
	case string(OverlapLatest):
		*dst = OverlapLatest
	case string(OverlapReplace):
		*dst = OverlapReplace
	case string(OverlapAllow):
		*dst = OverlapAllow
	default:
		*dst = Overlap(v)
	}
	return true
}

// int reads a number without fraction or exponent that fits an int.
func (s *scanner) int(dst *int) bool {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	if !s.digits() {
		return false
	}
	switch s.peek() {
	case '.', 'e', 'E':
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, strconv.IntSize)
	*dst = int(n)
	return err == nil
}

// digits reads an integer part: 0 or a digit 1-9 followed by digits.
func (s *scanner) digits() bool {
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return false
	}
	return true
}

// duration reads a Duration as Duration.UnmarshalJSON does for a string
// without escapes; a bad duration is left to encoding/json to report.
func (s *scanner) duration(dst *Duration) bool {
	v, ok := s.plain()
	if !ok {
		return false
	}
	d, err := time.ParseDuration(s.substr(v))
	*dst = Duration(d)
	return err == nil
}

// skip reads any JSON value, checking its syntax as encoding/json's
// scanner does (it does not check UTF-8 in strings it skips).
func (s *scanner) skip(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '{':
		s.i++
		s.ws()
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			if !s.skipString() {
				return false
			}
			s.ws()
			if s.peek() != ':' {
				return false
			}
			s.i++
			s.ws()
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				s.ws()
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				s.ws()
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.skipString()
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// skipString reads a string with any valid escapes.
func (s *scanner) skipString() bool {
	if s.peek() != '"' {
		return false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			switch s.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					switch h := s.peek(); {
					case '0' <= h && h <= '9', 'a' <= h && h <= 'f', 'A' <= h && h <= 'F':
						s.i++
					default:
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return false
}

// skipNumber reads a JSON number.
func (s *scanner) skipNumber() bool {
	if s.peek() == '-' {
		s.i++
	}
	if !s.digits() {
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.moreDigits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.moreDigits() {
			return false
		}
	}
	return true
}

// moreDigits reads one or more digits.
func (s *scanner) moreDigits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
